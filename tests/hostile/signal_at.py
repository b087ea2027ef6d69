"""`scanwatch` that signals itself at a named milestone: `python -m tests.hostile.signal_at NAME SIGNUM ARGS...`.

Unlike `tests.reliability.kill_at` (SIGKILL: nothing runs after it), the signal is one a user or a service
manager sends (SIGTERM, SIGINT), so the command's own handling of it is what the test sees.
"""

from __future__ import annotations

import os
import sys

from pipelines.cli import main
from pipelines.core import milestones


def signal_at(wanted: str, signum: int) -> None:
    def observer(name: str) -> None:
        if name == wanted:
            os.kill(os.getpid(), signum)

    milestones.observe(observer)


if __name__ == "__main__":
    signal_at(sys.argv[1], int(sys.argv[2]))
    sys.exit(main(sys.argv[3:]))
