"""`scanwatch` that SIGKILLs itself at a named milestone: `python -m tests.reliability.kill_at NAME[:NTH] sync`.

SIGKILL, not an exception: nothing runs after it, no `finally`, no rollback, no flush, as with the OOM
killer or a power cut. NTH counts the passages through NAME from 1 (default 1).
"""

from __future__ import annotations

import os
import signal
import sys
import threading

from pipelines.cli import main
from pipelines.core import milestones


def kill_at(spec: str) -> None:
    """Register an observer that kills this process at the NTH passage through the named milestone."""
    wanted, _, nth = spec.partition(":")
    passages = 0
    lock = threading.Lock()

    def observer(name: str) -> None:
        nonlocal passages
        if name != wanted:
            return
        with lock:
            passages += 1
            if passages >= int(nth or 1):
                os.kill(os.getpid(), signal.SIGKILL)

    milestones.observe(observer)


if __name__ == "__main__":
    kill_at(sys.argv[1])
    sys.exit(main(sys.argv[2:]))
