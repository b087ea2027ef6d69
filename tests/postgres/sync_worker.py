"""One workspace's sync in a process of its own, as a run pod on another node would run it:
`python -m tests.postgres.sync_worker WORKSPACE [--pause-at NAME:NTH --release FILE]`.

It runs the ingestion assets and the history checks from the environment (tests/backends.sync_history) and
exits 0 when they all succeeded. With `--pause-at`, it stops at the NTH passage through that milestone (say
`merge.before_commit:4`, the issues merge with its transaction open and its workspace's turn held), writes
FILE.paused, and goes on once FILE exists: the tests hold one sync's write transaction open that way.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("workspace")
    parser.add_argument("--pause-at", default="")
    parser.add_argument("--release", type=Path)
    args = parser.parse_args()
    if args.pause_at:
        from pipelines.core import milestones

        wanted, _, nth = args.pause_at.partition(":")
        passages = [0]

        def pause(name: str) -> None:
            if name != wanted:
                return
            passages[0] += 1
            if passages[0] == int(nth or 1):
                Path(f"{args.release}.paused").write_text("paused")
                deadline = time.monotonic() + 300
                while not args.release.exists() and time.monotonic() < deadline:
                    time.sleep(0.05)

        milestones.observe(pause)
    from tests.backends import failure, sync_history

    result = sync_history(workspace=args.workspace)
    if not result.success:
        print(failure(result), file=sys.stderr)
    return 0 if result.success else 1


if __name__ == "__main__":
    sys.exit(main())
