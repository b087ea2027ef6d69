"""One cursor walk for every list of the service.

Pages are asked for with ``limit`` and ``starting_after`` = the last id seen. When the list changes under the
walk the service answers 400 ``cursor_invalid``; the walk then starts over from the first page (a bounded
number of times). A collected list drops what the abandoned pass gathered, so the result is one consistent
pass (an item deleted meanwhile does not linger); a lazy iterator, which cannot take back what it yielded,
only skips ids it already gave. Within a pass, an item that moved between pages is kept once (the latest copy).

A walk that cannot end is cut short: a cursor handed out twice in one pass (the same page again, or a cycle)
or more items than ``max_items`` (far above the service's own counts) raise ``PagingError``, so the list is not
merged and the key's budget is not burned.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

from .errors import ApiError, MalformedResponseError, PagingError

log = logging.getLogger("scanwatch.api")

FetchPage = Callable[[dict[str, Any]], dict[str, Any]]


def walk(
    fetch: FetchPage,
    *,
    page_size: int,
    max_restarts: int = 3,
    on_restart: Callable[[], None] | None = None,
    max_items: int | None = None,
    label: str = "a list",
) -> Iterator[dict[str, Any]]:
    """Yield every item of every page, lazily; a consumer that stops iterating stops the paging."""
    restarts = 0
    cursor: str | None = None
    cursors: set[str] = set()  # handed out in this pass
    items = 0
    while True:
        params: dict[str, Any] = {"limit": page_size}
        if cursor is not None:
            params["starting_after"] = cursor
        try:
            page = fetch(params)
        except ApiError as err:
            if err.code != "cursor_invalid" or cursor is None:
                raise
            if restarts >= max_restarts:
                where = f"{err.method} {err.route}" if err.method and err.route else "a list"
                raise err.with_summary(
                    f"{where} changed under every walk (400 cursor_invalid after {restarts} restart"
                    f"{'' if restarts == 1 else 's'} from the first page): the service is busy changing it; "
                    "run again later"
                ) from None
            restarts += 1
            log.info("list changed while paged (cursor_invalid); restarting from the first page (%d)", restarts)
            if on_restart is not None:
                on_restart()
            cursor = None
            cursors.clear()
            items = 0
            continue
        data = page["data"]
        items += len(data)
        if max_items is not None and items > max_items:
            raise PagingError(
                "list longer than its counts", status=200,
                summary=f"{label} ran past {max_items:,} items, far beyond what the service's own counts say, and "
                "still had more: the service is paging without end; stopped, nothing of this list was stored",
            )
        yield from data
        if not page["has_more"]:
            return
        if not data:
            raise MalformedResponseError("a list page said has_more with no items", status=200)
        cursor = str(data[-1]["id"])
        if cursor in cursors:
            raise PagingError(
                "cursor repeated", status=200,
                summary=f"{label} said has_more again at a cursor it had already given ({cursor[:40]!r}, after "
                f"{len(cursors) + 1} pages): the pages go round in a cycle and would never end; stopped, nothing "
                "of this list was stored",
            )
        cursors.add(cursor)


def iter_unique(items: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """First sighting of each id wins: for lazy consumers, which cannot take back what was yielded."""
    seen: set[str] = set()
    for item in items:
        key = str(item["id"])
        if key not in seen:
            seen.add(key)
            yield item


def collect_latest(walker: Callable[[Callable[[], None]], Iterator[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Latest sighting of each id wins, in first-seen order; a restart starts the collection over.

    ``walker(on_restart)`` must return the item iterator and call ``on_restart`` when the walk starts over.
    """
    by_id: dict[str, dict[str, Any]] = {}
    for item in walker(by_id.clear):
        by_id[str(item["id"])] = item
    return list(by_id.values())
