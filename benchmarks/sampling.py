"""Something sampled on a thread of its own while a measured run goes on: a `with` block starts and stops it."""

from __future__ import annotations

import threading
from typing import Self


class Sampler:
    """Calls `sample()` every `interval` seconds, from entering the block until leaving it."""

    interval = 0.2

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def sample(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Let go of what the samples read (a connection), once the thread has stopped."""

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.close()
