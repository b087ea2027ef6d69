"""The simulator in its own process, driven over HTTP (`/_sim/`), as an outside client would see it.

A separate process rather than `serve_simulator`'s thread: on 2 cores the service must not share the
benchmark's interpreter lock, or every timing (pacing above all) would measure the two fighting for it.
"""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

import httpx

from pipelines.core.processes import stop_process


class SimProcess:
    """`scanwatch simulator --clock driven --control` on a free port; stop it with `close()` or `with`."""

    def __init__(self, *, scale: str = "small", seed: int = 7, rate_limit: int = 120,
                 rate_window: float = 60.0, workspaces: int = 1) -> None:
        self.scale, self.rate_limit, self.rate_window = scale, rate_limit, rate_window
        cmd = [sys.executable, "-m", "pipelines.cli", "simulator", "--port", "0", "--clock", "driven", "--control",
               "--scale", scale, "--seed", str(seed), "--rate-limit", str(rate_limit),
               "--rate-window", str(rate_window), "--workspaces", str(workspaces)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)
        self.base_url = self.api_key = ""
        self.keys: list[str] = []  # one per Pro workspace, the main one first
        deadline = time.monotonic() + 60
        while not (self.base_url and len(self.keys) == workspaces):
            line = self.proc.stdout.readline() if self.proc.stdout else ""
            if not line:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the simulator did not start: {' '.join(cmd)}")
                continue
            if line.startswith("base URL:"):
                self.base_url = line.split(":", 1)[1].strip()
            elif line.startswith("API key"):
                self.keys.append(line.split(":", 1)[1].strip())
                self.api_key = self.keys[0]
        print(f"[bench] simulator --scale {scale} built and serving in {time.monotonic() - deadline + 60:.1f} s", file=sys.stderr, flush=True)  # noqa: E501
        self.root_url = self.base_url[: -len("/v1")]
        self.control = httpx.Client(base_url=self.root_url + "/_sim", timeout=120)

    def __enter__(self) -> SimProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.control.close()
        stop_process(self.proc)

    def env(self, db: str) -> dict[str, str]:
        """The environment a `scanwatch sync` against this simulator runs with."""
        return {"SCANWATCH_BASE_URL": self.base_url, "SCANWATCH_API_KEY": self.api_key, "SCANWATCH_DB": db}

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        return self.control.request(method, path, json=body).raise_for_status().json()

    def request_count(self) -> int:
        """Every request the service counted, 429s included (they are counted before the limiter)."""
        return int(self._call("GET", "/requests")["total"])

    def requests_by_route(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for row in self._call("GET", "/requests")["by_route"]:
            label = f"{row['method']} {row['route']}"
            out[label] = out.get(label, 0) + int(row["count"])
        return out

    def set_faults(self, **faults: Any) -> None:
        self._call("POST", "/faults", faults)

    def clear_faults(self) -> None:
        self._call("DELETE", "/faults")

    def advance(self, seconds: float) -> None:
        self._call("POST", "/clock", {"seconds": seconds})

    def run_round(self, fraction: float = 1.0) -> dict[str, Any]:
        return self._call("POST", "/round", {"fraction": fraction})

    def stats(self) -> dict[str, Any]:
        return self._call("GET", "/stats")

    def wait_for_window(self, offset: float = 0.05) -> None:
        """Sleep to just past the start of the next rate window, so each run starts with a fresh budget."""
        now = time.time()
        start = (int(now // self.rate_window) + 1) * self.rate_window
        time.sleep(max(0.0, start - now + offset))
