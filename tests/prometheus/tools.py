"""Finding the Prometheus binaries: a missing one skips a test, unless CI says it must be there."""

from __future__ import annotations

import os
import shutil
import socket

import pytest

ALERTMANAGER_NAMES = ("prometheus-alertmanager", "alertmanager")


def require(*names: str) -> str:
    """Path of the first binary found among names; skip (or fail under SCANWATCH_REQUIRE_PROMETHEUS=1)."""
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    message = f"{' or '.join(names)} not installed (make prom-tools installs Debian's prometheus packages)"
    if os.environ.get("SCANWATCH_REQUIRE_PROMETHEUS") == "1":
        pytest.fail(message)
    pytest.skip(message)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
