"""Named moments of a sync at which the history and the snapshot are in a known state.

The sync announces them (`reached("merge.before_commit")`); scanwatch itself never listens. They exist so
that something outside the product can act at exactly that moment: the reliability tests register an
observer that SIGKILLs the process there, to prove that a crash at any of them leaves the history and the
snapshot whole. With no observer a call costs one empty loop.
"""

from __future__ import annotations

from collections.abc import Callable

Observer = Callable[[str], None]

_observers: list[Observer] = []


def reached(name: str) -> None:
    """Tell the observers, if any, that the sync has reached `name`."""
    for observer in tuple(_observers):
        observer(name)


def observe(observer: Observer) -> Callable[[], None]:
    """Call `observer(name)` at every milestone from now on; the returned function stops it."""
    _observers.append(observer)
    return lambda: _observers.remove(observer)
