"""Running the app under uvicorn: in the foreground (CLI) or in a background thread (tests, demo)."""

from __future__ import annotations

import socket
import threading
import time

import uvicorn

from .app import Runtime, build_app
from .clock import make_clock
from .config import SimConfig
from .generator import build_world


def build_runtime(config: SimConfig) -> Runtime:
    return Runtime(build_world(config, make_clock(config.clock)), config)


class ServerThread:
    """uvicorn on a socket bound before start, so the port is known (port 0 = any free port)."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        cfg = rt.config
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((cfg.host, cfg.port))
        self.host, self.port = self.sock.getsockname()[:2]
        self.server = uvicorn.Server(uvicorn.Config(build_app(rt), log_level="warning", access_log=False,
                                                   lifespan="off", timeout_keep_alive=30))
        self.thread = threading.Thread(target=self._run, name="scanwatch-simulator", daemon=True)

    def _run(self) -> None:
        self.server.run(sockets=[self.sock])

    def start(self, timeout: float = 10.0) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the simulator did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"
