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


def installed(name: str) -> str:
    """Path of a tool `make test-tools` installs (openssl, promtool...): a missing one fails the test with the
    line that installs it, whatever the environment says; `make test` skips nothing but the soak."""
    found = shutil.which(name)
    if not found:
        pytest.fail(f"{name} not installed: run `make test-tools` (Debian's prometheus, "
                    "prometheus-alertmanager, postgresql and openssl packages)")
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
