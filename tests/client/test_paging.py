"""One cursor walk for every list: minimum requests, clean restarts on cursor_invalid, no duplicates."""

from __future__ import annotations

import pytest

from pipelines.api import InvalidRequestError

from .fakes import ListService, client_for, error, make_items


@pytest.mark.parametrize(("n", "pages"), [(0, 1), (1, 1), (100, 1), (101, 2), (250, 3)])
def test_lists_cost_the_minimum(n: int, pages: int) -> None:
    service = ListService({"/projects": make_items(n)})
    client = client_for(service)
    assert [p["n"] for p in client.list_projects()] == list(range(n))
    assert client.stats.requests == pages
    assert all(r.url.params["limit"] == "100" for r in service.requests)
    assert [r.url.params.get("starting_after") for r in service.requests[1:]] == [
        make_items(n)[100 * k - 1]["id"] for k in range(1, pages)]


def test_filters_are_sent_on_every_page() -> None:
    service = ListService({"/projects/p1/issues": make_items(150, "issue")})
    client = client_for(service)
    assert len(client.list_issues("p1", status="open", severity="high", target_id="t1")) == 150
    for r in service.requests:
        assert (r.url.params["status"], r.url.params["severity"], r.url.params["target_id"]) == ("open", "high", "t1")


def test_iter_scans_is_lazy() -> None:
    service = ListService({"/projects/p1/scans": make_items(350, "scan")})
    client = client_for(service)
    scans = client.iter_scans("p1")
    first = [next(scans) for _ in range(101)]
    assert len(first) == 101 and client.stats.requests == 2
    scans.close()
    assert client.stats.requests == 2


def test_list_changing_under_the_walk_restarts_cleanly() -> None:
    items = make_items(250)
    service = ListService({"/projects": items})
    changed = {"done": False}

    def change_once(request):
        # After the first page was served, the item used as cursor moves to the end under a new version and the
        # service refuses the cursor, as the simulator does when a list changed under a walk.
        if request.url.params.get("starting_after") and not changed["done"]:
            changed["done"] = True
            moved = items.pop(99)
            items.append({**moved, "n": "moved"})
            return error(400, "cursor_invalid", param="starting_after")
        return None

    service.hooks.append(change_once)
    client = client_for(service)
    result = client.list_projects()
    ids = [p["id"] for p in result]
    assert len(ids) == len(set(ids)) == 250
    assert {p["id"] for p in result} == {p["id"] for p in items}
    assert result[-1]["n"] == "moved" and result == items  # one clean pass, in the service's order
    assert client.stats.restarts == 1
    assert client.stats.requests == 1 + 1 + 3  # first page, refused cursor, a clean walk


def test_restarts_are_bounded() -> None:
    service = ListService({"/projects": make_items(150)})
    service.hooks.append(lambda r: error(400, "cursor_invalid") if r.url.params.get("starting_after") else None)
    client = client_for(service, max_restarts=2)
    with pytest.raises(InvalidRequestError) as info:
        client.list_projects()
    assert info.value.code == "cursor_invalid" and client.stats.restarts == 2


def test_cursor_invalid_on_first_page_is_not_a_restart() -> None:
    service = ListService({})
    service.hooks.append(lambda r: error(400, "cursor_invalid"))
    client = client_for(service)
    with pytest.raises(InvalidRequestError):
        client.list_projects()
    assert client.stats.requests == 1


def test_item_moving_across_the_cursor_is_not_doubled() -> None:
    items = make_items(150)
    service = ListService({"/projects": items})

    def move(request):
        if request.url.params.get("starting_after") and items[5]["n"] == 5:
            items.append({**items.pop(5), "n": "moved"})  # seen on page 1, seen again on page 2
        return None

    service.hooks.append(move)
    result = client_for(service).list_projects()
    assert len(result) == len({p["id"] for p in result}) == 150
    assert result[5]["n"] == "moved"


def test_item_removed_during_the_walk_does_not_linger() -> None:
    items = make_items(150)
    service = ListService({"/projects": items})

    def remove_cursor(request):
        if request.url.params.get("starting_after") and len(items) == 150:
            del items[99]  # the cursor item is deleted: the next page is refused
        return None

    service.hooks.append(remove_cursor)
    result = client_for(service).list_projects()
    assert result == items and len(result) == 149


def test_lazy_walk_restart_yields_only_new_ids() -> None:
    items = make_items(150, "scan")
    service = ListService({"/projects/p/scans": items})

    def insert_and_refuse(request):
        if request.url.params.get("starting_after") and items[0]["id"] != "new-scan":
            del items[99]
            items.insert(0, {"object": "scan", "id": "new-scan", "n": -1})
        return None

    service.hooks.append(insert_and_refuse)
    seen = [s["id"] for s in client_for(service).iter_scans("p")]
    assert len(seen) == len(set(seen)) == 151  # the removed one was already given, the new one is added
    assert seen[100] == "new-scan"


def test_exhausted_restarts_say_so_in_one_line() -> None:
    service = ListService({"/projects": make_items(150)})
    service.hooks.append(lambda r: error(400, "cursor_invalid") if r.url.params.get("starting_after") else None)
    with pytest.raises(InvalidRequestError) as info:
        client_for(service, max_restarts=1).list_projects()
    text = str(info.value)
    assert "GET /projects changed under every walk" in text and "cursor_invalid" in text
    assert "after 1 restart from" in text
    assert text.endswith("Request-Id: req_1") and "\n" not in text
