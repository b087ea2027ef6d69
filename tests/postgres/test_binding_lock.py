"""The locks that make PostgreSQL's many writers take turns, forced rather than hoped for: one session holds
the lock, and a second session that asks for it is seen waiting on the server (`pg_locks`, not granted) until
the first lets go. A race between two `scanwatch sync` processes finds a missing lock in some runs only; this
finds it in every run.

Mutations that fail it: `PostgresEngine.holding_name` taking no locks (two first syncs of one name would both
find the binding free), and `PostgresEngine.lock_workspace` a no-op (two syncs of one workspace would merge
at once)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from pipelines.storage import connect
from tests.backends import value


def _second_waits(db: str, first_holds: Callable[[], object], second_takes: Callable[[object], object],
                  second) -> bool:
    """Whether the second session waits for the first: True once the server shows it waiting, False when it
    got through while the first still held its lock. The first lets go afterwards, and the second then
    gets its turn."""
    pid = second.execute("SELECT pg_backend_pid()").fetchone()[0]
    through = threading.Event()

    def take() -> None:
        second_takes(through)

    with first_holds():
        thread = threading.Thread(target=take, daemon=True)
        thread.start()
        deadline = time.monotonic() + 30
        while True:
            # The name's advisory lock, or the workspace's lock row (a wait on its holder's transaction).
            if value(db, "SELECT count(*) FROM pg_locks WHERE pid = ? AND NOT granted "
                         "AND locktype IN ('advisory', 'transactionid', 'tuple')", [pid]):
                waited = True
                break
            if through.is_set():
                waited = False
                break
            assert time.monotonic() < deadline, "the second session neither waited nor got through"
            time.sleep(0.02)
        assert through.is_set() is not waited
    thread.join(30)
    assert through.is_set(), "the second session never got its turn once the first let go"
    return waited


@pytest.mark.parametrize(("held", "asked", "waits"), [
    ((None, "ws-1"), (None, "ws-2"), True),  # one name (the two variables' unnamed one), two workspaces' keys
    (("alpha", "ws-1"), ("beta", "ws-1"), True),  # one workspace's key under two names
    (("alpha", "ws-1"), ("beta", "ws-2"), False),  # nothing shared: no turn to wait for
], ids=["one-name", "one-workspace", "nothing-shared"])
def test_holding_a_name_makes_a_second_binding_of_it_or_of_its_workspace_wait(pg_database, held, asked, waits):
    first, second = connect(pg_database), connect(pg_database)
    try:
        def take(through: threading.Event) -> None:
            with second.engine.holding_name(second, *asked):
                through.set()

        assert _second_waits(pg_database, lambda: first.engine.holding_name(first, *held), take, second) is waits
    finally:
        first.close()
        second.close()


@pytest.mark.parametrize(("other", "waits"), [("ws-1", True), ("ws-2", False)])
def test_a_merge_of_a_workspace_waits_for_another_merge_of_it(pg_database, other, waits):
    first, second = connect(pg_database), connect(pg_database)

    class _InTransaction:
        def __enter__(self) -> None:
            first.execute("BEGIN")
            first.engine.lock_workspace(first, "ws-1")

        def __exit__(self, *exc: object) -> None:
            first.execute("ROLLBACK")

    def take(through: threading.Event) -> None:
        second.execute("BEGIN")
        second.engine.lock_workspace(second, other)
        through.set()
        second.execute("ROLLBACK")

    try:
        assert _second_waits(pg_database, _InTransaction, take, second) is waits
    finally:
        first.close()
        second.close()
