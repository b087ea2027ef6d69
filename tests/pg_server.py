"""A real PostgreSQL server for the tests and the benchmarks: a scratch cluster, started and stopped here.

Never a mock: the history's second engine, Dagster's PostgreSQL instance and Grafana's PostgreSQL panels
are checked against the server a team would run (Debian's PostgreSQL 15). The cluster lives in a temporary
folder, listens on 127.0.0.1 at a free port with its socket in that folder, and asks for a password over
TCP (scram-sha-256), so a wrong password is a real refusal. PostgreSQL refuses to run as root: as root the
cluster belongs to the `postgres` system user, which Debian's package creates.

Durability settings are off (fsync, synchronous commit): the tests kill clients, never the server's host.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

SUPERUSER = "postgres"
INSTALL_HINT = ("PostgreSQL server binaries (initdb, pg_ctl) not found: run `make test-tools` (Debian's "
                "postgresql package) or put them on PATH")


class PgUnavailable(RuntimeError):
    """No server binaries on this machine; the message says how to get them."""


def find_bin_dir() -> Path:
    """The folder of `initdb` and `pg_ctl`: PATH first, then Debian's versioned folders, newest first."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(found).resolve().parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                        key=lambda p: int(Path(p).parent.parent.name) if Path(p).parent.parent.name.isdigit() else 0)
    if candidates:
        return Path(candidates[-1]).parent
    raise PgUnavailable(INSTALL_HINT)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class PgServer:
    """One scratch cluster. `url()` gives a `postgresql://` address for a database and a role."""

    root: Path
    port: int
    password: str
    bin_dir: Path
    run_as: str | None = None  # the system user the server runs as when we are root
    options: str = ""
    databases: list[str] = field(default_factory=list)

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def socket_dir(self) -> Path:
        return self.root / "socket"

    @property
    def log_file(self) -> Path:
        return self.root / "server.log"

    def _cmd(self, *args: str) -> list[str]:
        return ["runuser", "-u", self.run_as, "--", *args] if self.run_as else list(args)

    def _run(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        done = subprocess.run(self._cmd(*args), capture_output=True, text=True, timeout=timeout, cwd="/")
        if done.returncode != 0:
            raise RuntimeError(f"{args[0]} failed ({done.returncode}): {done.stderr.strip() or done.stdout.strip()}")
        return done

    @classmethod
    def start(cls, root: Path | None = None) -> PgServer:
        bin_dir = find_bin_dir()
        root = Path(root or tempfile.mkdtemp(prefix="scanwatch-pg-"))
        run_as = SUPERUSER if os.geteuid() == 0 else None
        server = cls(root=root, port=free_port(), password=secrets.token_urlsafe(16), bin_dir=bin_dir, run_as=run_as)
        server.socket_dir.mkdir(parents=True, exist_ok=True)
        pwfile = root / "pwfile"
        pwfile.write_text(server.password + "\n")
        if run_as:
            user = pwd.getpwnam(run_as)
            for path in (root, server.socket_dir, pwfile):
                os.chown(path, user.pw_uid, user.pw_gid)
        os.chmod(root, 0o700)
        server._run(str(bin_dir / "initdb"), "-D", str(server.data_dir), "-U", SUPERUSER, "--pwfile", str(pwfile),
                    "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C.UTF-8",
                    "--no-sync", timeout=120)
        pwfile.unlink()
        server.options = (f"-p {server.port} -k {server.socket_dir} -c listen_addresses=127.0.0.1 -c fsync=off "
                          "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200")
        server._pg_ctl_start()
        return server

    def _pg_ctl_start(self) -> None:
        self._run(str(self.bin_dir / "pg_ctl"), "-D", str(self.data_dir), "-o", self.options, "-l", str(self.log_file),
                  "-w", "-t", "60", "start", timeout=90)

    def stop(self) -> None:
        if self.data_dir.exists():
            with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
                self._run(str(self.bin_dir / "pg_ctl"), "-D", str(self.data_dir), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.root, ignore_errors=True)

    def url(self, database: str = "postgres", *, user: str = SUPERUSER, password: str | None = None,
            with_password: bool = True) -> str:
        secret = self.password if password is None else password
        auth = f"{quote(user, safe='')}:{quote(secret, safe='')}" if with_password else quote(user, safe="")
        return f"postgresql://{auth}@127.0.0.1:{self.port}/{database}"

    def psql(self, sql: str, database: str = "postgres") -> str:
        """Run SQL as the superuser over the cluster's socket (setup and inspection, not the product's path)."""
        return self._run(str(self.bin_dir / "psql"), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h",
                         str(self.socket_dir), "-p", str(self.port), "-U", SUPERUSER, "-d", database,
                         "-c", sql).stdout

    def create_database(self, name: str | None = None, *, template: str | None = None) -> str:
        """A fresh, empty database (or a copy of `template`, which nobody may be connected to); returns its name."""
        name = name or f"t_{secrets.token_hex(6)}"
        self.psql(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))
        self.databases.append(name)
        return name

    def drop_database(self, name: str) -> None:
        self.psql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def standby(self) -> PgServer:
        """A real hot standby of this server: a base backup (pg_basebackup -R) started as a streaming replica,
        which answers reads and refuses every write. `stop()` it when done."""
        root = Path(tempfile.mkdtemp(prefix="scanwatch-pg-standby-"))
        replica = PgServer(root=root, port=free_port(), password=self.password, bin_dir=self.bin_dir,
                           run_as=self.run_as)
        replica.socket_dir.mkdir(parents=True, exist_ok=True)
        if self.run_as:
            user = pwd.getpwnam(self.run_as)
            for path in (root, replica.socket_dir):
                os.chown(path, user.pw_uid, user.pw_gid)
        os.chmod(root, 0o700)
        replica._run(str(self.bin_dir / "pg_basebackup"), "-D", str(replica.data_dir), "-R", "-X", "stream",
                     "-c", "fast", "-h", str(self.socket_dir), "-p", str(self.port), "-U", SUPERUSER, "--no-sync",
                     timeout=120)
        replica.options = self.options.replace(f"-p {self.port} -k {self.socket_dir}",
                                               f"-p {replica.port} -k {replica.socket_dir}")
        replica._pg_ctl_start()
        deadline = time.monotonic() + 60
        while replica.psql("SELECT pg_is_in_recovery()").strip() != "t":
            if time.monotonic() > deadline:
                raise RuntimeError("the standby never entered recovery")
            time.sleep(0.2)
        return replica

    def restart(self, down_seconds: float = 0.0) -> None:
        """Stop the server at once (open connections break, their transactions roll back) and start it again
        after `down_seconds`. Stopped in fast mode, not immediate: with durability off (above) an immediate stop
        also lost the last commits, which a server keeping its commits never does, and hid a merge that
        committed part of its work before the server went."""
        self._run(str(self.bin_dir / "pg_ctl"), "-D", str(self.data_dir), "-m", "fast", "-w", "stop")
        time.sleep(down_seconds)
        self._pg_ctl_start()
