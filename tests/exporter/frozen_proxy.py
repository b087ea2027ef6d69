"""A TCP proxy in front of a real PostgreSQL server that can go silent: the network path of a frozen peer.

`freeze()` stops forwarding in both directions while every socket stays open, as a peer stopped with SIGSTOP
(or a stalled middlebox) behaves: its kernel still accepts connections and ACKs what is sent until the
buffers fill, so TCP keepalives are answered and nothing ever fails by itself. `thaw()` forwards again.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
import time
from urllib.parse import urlsplit, urlunsplit


class FrozenProxy:
    def __init__(self, host: str, port: int, freeze_on: bytes | None = None, nth: int = 1) -> None:
        self.target = (host, port)
        self.freeze_on = freeze_on  # freeze when a client sends this the nth time, before it reaches the server
        self._left = nth
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self.connections = 0
        self.froze_at: float | None = None
        self._counting = threading.Lock()
        self._frozen = threading.Event()
        self._thawed = threading.Event()
        self._thawed.set()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._sockets: list[socket.socket] = []
        self._accepting = threading.Thread(target=self._accept, daemon=True)
        self._accepting.start()

    @classmethod
    def before(cls, url: str, freeze_on: bytes | None = None, nth: int = 1) -> tuple[FrozenProxy, str]:
        """A proxy to the server of a `postgresql://` URL, and the same URL through the proxy."""
        parts = urlsplit(url)
        proxy = cls(parts.hostname or "127.0.0.1", parts.port or 5432, freeze_on, nth)
        userinfo = parts.netloc.rpartition("@")[0]
        netloc = f"{userinfo}@127.0.0.1:{proxy.port}" if userinfo else f"127.0.0.1:{proxy.port}"
        return proxy, urlunsplit(parts._replace(netloc=netloc))

    def freeze(self) -> None:
        self._thawed.clear()
        self._frozen.set()

    def thaw(self) -> None:
        self._frozen.clear()
        self._thawed.set()

    def _accept(self) -> None:
        while not self._stop.is_set():
            self._thawed.wait()
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self._stop.is_set():
                client.close()
                return
            self.connections += 1
            try:
                server = socket.create_connection(self.target, timeout=10)
            except OSError:
                client.close()
                continue
            self._sockets += [client, server]
            thread = threading.Thread(target=self._pump, args=(client, server), daemon=True)
            thread.start()
            self._threads.append(thread)

    def _pump(self, a: socket.socket, b: socket.socket) -> None:
        sel = selectors.DefaultSelector()
        sel.register(a, selectors.EVENT_READ, b)  # the client's side
        sel.register(b, selectors.EVENT_READ, a)
        try:
            while not self._stop.is_set():
                if self._frozen.is_set():  # read nothing, send nothing: the kernel buffers and ACKs
                    self._thawed.wait(0.2)
                    continue
                for key, _ in sel.select(0.2):
                    if self._frozen.is_set():
                        break
                    data = key.fileobj.recv(65536)
                    if not data:
                        return
                    if key.fileobj is a and self.freeze_on is not None and self.freeze_on in data and \
                            self._count() == 0:
                        self.freeze_on = None
                        self.froze_at = time.monotonic()
                        self.freeze()
                        self._thawed.wait()  # the statement is held here, acknowledged and never answered
                    key.data.sendall(data)
        except OSError:
            return
        finally:
            sel.close()
            for s in (a, b):
                with contextlib.suppress(OSError):
                    s.close()

    def _count(self) -> int:
        with self._counting:
            self._left -= 1
            return self._left

    def close(self) -> None:
        self._stop.set()
        self.thaw()
        with contextlib.suppress(OSError):
            self.listener.close()
        for s in self._sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
        for thread in self._threads:
            thread.join(timeout=5)
