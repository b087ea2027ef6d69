"""POST /projects, GET /projects/{id}, POST /projects/{id}/targets."""

from __future__ import annotations

import httpx

from simulator.testing import Simulator

from .conftest import code


def test_create_project(sim: Simulator, client: httpx.Client) -> None:
    before = client.get("/account").json()["projects"]["used"]
    r = client.post("/projects", json={"name": "New shop", "url": "https://Shop.New-Example.com/path?q=1"})
    assert r.status_code == 201
    p = r.json()
    assert p["object"] == "project" and p["name"] == "New shop" and p["score"] is None and p["grade"] is None
    assert p["open_issues"] == 0 and p["paused"] is False and p["last_scan_at"] is None
    [t] = p["targets"]
    assert t == {"object": "target", "id": t["id"], "project_id": p["id"], "kind": "domain",
                 "address": "shop.new-example.com", "verified": False, "score": None, "grade": None,
                 "last_scan_at": None, "hidden_issues": 0}
    assert client.get(f"/projects/{p['id']}").json() == p
    assert client.get("/account").json()["projects"]["used"] == before + 1
    assert client.get("/projects", params={"limit": 100}).json()["data"][-1]["id"] == p["id"]  # oldest first
    bare = client.post("/projects", json={"name": "x" * 80})
    assert bare.status_code == 201 and bare.json()["targets"] == []


def test_create_project_errors(sim: Simulator, client: httpx.Client) -> None:
    def post(body: object = None, **kw: object) -> httpx.Response:
        return client.post("/projects", json=body, **kw) if not kw else client.post("/projects", **kw)

    assert code(client.post("/projects", content=b"{nope", headers={"Content-Type": "application/json"})) == \
        "body_invalid"
    assert code(client.post("/projects", content=b'{"name": "x"}', headers={"Content-Type": "text/plain"})) == \
        "body_invalid"
    assert code(post(["name"])) == "body_invalid"
    for body, param in (({}, "name"), ({"name": ""}, "name"), ({"name": "x" * 81}, "name"), ({"name": 3}, "name"),
                        ({"name": "ok", "color": "red"}, "color"), ({"name": "ok", "url": "h" * 2049}, "url")):
        r = post(body)
        assert (r.status_code, code(r), r.json()["error"]["param"]) == (400, "parameter_invalid", param), body
    for url, expected in (("not a url", "url_invalid"), ("ftp://example.com", "url_invalid"), ("nodot", "url_invalid"),
                          ("http://localhost:8080", "url_private"), ("10.1.2.3", "url_private"),
                          ("https://intranet.corp", "url_private"), ("https://www.example.gov", "site_excluded")):
        r = post({"name": "ok", "url": url})
        assert code(r) == expected, url
        assert r.status_code == (409 if expected == "site_excluded" else 400)
    # the plan's number of projects (Pro here: 3 included + 2 bought = 5, 3 used)
    assert post({"name": "four"}).status_code == 201
    assert post({"name": "five"}).status_code == 201
    r = post({"name": "six"})
    assert (r.status_code, code(r)) == (402, "project_limit_reached")


def test_solo_project_limit(sim: Simulator) -> None:
    r = httpx.post(sim.base_url + "/projects", headers=sim.headers("solo_trial"), json={"name": "second"})
    assert (r.status_code, code(r)) == (402, "project_limit_reached")


def test_add_site(sim: Simulator, client: httpx.Client) -> None:
    pid = sim.project_ids()[0]
    r = client.post(f"/projects/{pid}/targets", json={"url": "new.acme-demo.com"})
    assert r.status_code == 201
    t = r.json()
    assert t["object"] == "target" and t["verified"] is False and t["address"] == "new.acme-demo.com"
    assert t["score"] is None and t["hidden_issues"] == 0
    assert t["id"] in [x["id"] for x in client.get(f"/projects/{pid}").json()["targets"]]
    r = client.post(f"/projects/{pid}/targets", json={"url": "https://NEW.acme-demo.com/"})
    assert (r.status_code, code(r)) == (409, "target_exists")
    for body, expected, param in (({}, "parameter_invalid", "url"), ({"url": "ab"}, "parameter_invalid", "url"),
                                  ({"url": "x.example.com", "kind": "domain"}, "parameter_invalid", "kind"),
                                  ({"url": "bad host.com"}, "url_invalid", None),
                                  ({"url": "192.168.1.1"}, "url_private", None)):
        r = client.post(f"/projects/{pid}/targets", json=body)
        assert code(r) == expected and r.json()["error"].get("param") == param, body
    assert code(client.post(f"/projects/{pid}/targets", content=b"[", headers={"Content-Type": "application/json"})) \
        == "body_invalid"
    r = client.post("/projects/00000000-0000-4000-8000-000000000000/targets", json={"url": "x.example.com"})
    assert (r.status_code, code(r)) == (404, "resource_not_found")
    sim.pause_project(pid)
    r = client.post(f"/projects/{pid}/targets", json={"url": "paused.acme-demo.com"})
    assert (r.status_code, code(r)) == (402, "project_paused")
    assert client.get("/account").json()["projects"]["paused"] == 1
    assert client.get(f"/projects/{pid}").json()["paused"] is True


def test_address_limit(sim: Simulator) -> None:
    h = sim.headers("solo_trial")
    pid = sim.project_ids("solo_trial")[0]
    created = 0
    for n in range(10):
        r = httpx.post(f"{sim.base_url}/projects/{pid}/targets", headers=h, json={"url": f"s{n}.example.net"})
        if r.status_code != 201:
            assert (r.status_code, code(r)) == (402, "address_limit_reached")
            break
        created += 1
    assert created + 1 == 5  # Solo: 5 addresses per project, one existed
