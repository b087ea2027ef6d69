"""The snapshot is one part per workspace: a workspace's run replaces its own part, the exporter serves every
part together, and one part that cannot be built or read keeps its last good copy while the others stay fresh.
"""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from pipelines.core import milestones
from pipelines.snapshot.format import encode_snapshot
from pipelines.snapshot.store import FileStore
from pipelines.sync.snapshot import build_parts, refresh_snapshot
from tests.exporter.history import NOW
from tests.helpers import build_registry, write_snapshot


@pytest.fixture
def conn(history_conn):
    return history_conn  # the exporter tests' history (tests/exporter/conftest.py): Acme and Beta


def _scrape(folder: Path) -> dict[str, list]:
    text = generate_latest(build_registry(folder)).decode()
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def _values(samples: dict, name: str, **labels: str) -> list[float]:
    return [s.value for s in samples.get(name, []) if all(s.labels.get(k) == v for k, v in labels.items())]


def _write_parts(conn, folder: Path) -> dict[str, dict]:
    parts = build_parts(conn, now=NOW)
    FileStore(folder).replace_all({name: encode_snapshot(doc) for name, doc in parts.items()})
    return parts


def test_every_part_is_served_once_and_the_global_series_once(conn, tmp_path: Path) -> None:
    folder = tmp_path / "scanwatch-metrics.json"
    parts = _write_parts(conn, folder)
    assert sorted(parts) == ["ws-1", "ws-2"] and sorted(p.name for p in folder.iterdir()) == ["ws-1.json", "ws-2.json"]
    s = _scrape(folder)
    assert {x.labels["workspace"] for x in s["secscan_project_score"]} == {"Acme"}  # Beta's project has no score
    assert _values(s, "secscan_snapshot_readable", workspace="Acme") == [1] == \
        _values(s, "secscan_snapshot_readable", workspace="Beta")
    assert len(s["secscan_snapshot_generated_timestamp_seconds"]) == 2
    severities = [x.labels["severity"] for x in s["secscan_sla_seconds"]]
    assert sorted(severities) == sorted(set(severities)), "a global series appears once whatever the parts"


def test_a_broken_part_keeps_its_last_good_copy_and_the_others_stay_fresh(conn, tmp_path: Path) -> None:
    folder = tmp_path / "scanwatch-metrics.json"
    parts = _write_parts(conn, folder)
    registry = build_registry(folder)

    def scrape() -> dict:
        return {f.name: f.samples for f in text_string_to_metric_families(generate_latest(registry).decode())}

    assert _values(scrape(), "secscan_project_score", project_id="p1") == [72]
    (folder / "ws-1.json").write_text('{"schema": 2, "tables": {')  # a torn part the atomic writer never makes
    beta = json.loads(json.dumps(parts["ws-2"]))
    beta["tables"]["projects"][0]["paused"] = True
    beta["generated_at_seconds"] += 60
    FileStore(folder).write("ws-2", encode_snapshot(beta))
    s = scrape()
    assert _values(s, "secscan_snapshot_readable", workspace="Acme") == [0]
    assert _values(s, "secscan_project_score", project_id="p1") == [72]  # Acme's last good part, still served
    assert _values(s, "secscan_snapshot_readable", workspace="Beta") == [1]
    assert _values(s, "secscan_project_paused", project_id="p4") == [1]  # Beta's new part, served at once
    assert _values(s, "secscan_snapshot_generated_timestamp_seconds", workspace="Beta") == \
        [parts["ws-2"]["generated_at_seconds"] + 60]
    (folder / "ws-2.json").unlink()  # a part the pipeline removed leaves /metrics with it
    assert not _values(scrape(), "secscan_project_paused", project_id="p4")


def test_no_part_at_all_is_one_unreadable_series_without_a_workspace(tmp_path: Path) -> None:
    s = _scrape(tmp_path / "absent")
    assert [(x.labels, x.value) for x in s["secscan_snapshot_readable"]] == [({}, 0)]


def test_a_single_file_of_an_older_scanwatch_is_refused_in_one_line(tmp_path: Path, caplog) -> None:
    old = tmp_path / "scanwatch-metrics.json"
    old.write_text(json.dumps({"schema": 1, "tables": {}}))
    s = _scrape(old)
    assert _values(s, "secscan_snapshot_readable") == [0]
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "older scanwatch" in lines[0] and "run `scanwatch sync`" in lines[0]


@pytest.mark.parametrize("case", ["deep", "encoding", "size", "not_its_own", "another_label"])
def test_a_part_that_cannot_be_decoded_is_unreadable_alone_logged_once(conn, tmp_path: Path, caplog, case) -> None:
    """Each case of a part that cannot be decoded, on the file snapshot: that part unreadable (its last good copy
    served), one line naming it, the other part fresh, later versions still picked up."""
    folder = tmp_path / "scanwatch-metrics.json"
    parts = _write_parts(conn, folder)
    acme = encode_snapshot(parts["ws-1"])
    registry = build_registry(folder)  # the default Limits: 4 MiB a part

    def scrape() -> dict:
        return {f.name: f.samples for f in text_string_to_metric_families(generate_latest(registry).decode())}

    assert _values(scrape(), "secscan_snapshot_readable", workspace="Beta") == [1]
    bad = {"deep": b'{"schema":2,"tables":' + b"[" * 200_000 + b"]" * 200_000 + b"}",
           "encoding": acme.replace(b'"Acme"', b'"Ac\xff\xfeme"'),
           "size": acme[:-1] + b',"pad":"' + b"x" * (4 * 1024 * 1024) + b'"}',
           "not_its_own": acme,  # Acme's part (workspace_id ws-1) stored as Beta's
           "another_label": encode_snapshot({**parts["ws-2"], "workspace": "Acme"}),  # Beta's rows still say Beta
           }[case]
    (folder / "ws-2.json").write_bytes(bad)
    for _ in range(3):
        s = scrape()
        assert _values(s, "secscan_snapshot_readable", workspace="Beta") == [0]
        assert _values(s, "secscan_snapshot_readable", workspace="Acme") == [1]
        assert len(_values(s, "secscan_project_score", project_id="p1")) == 1  # never twice
    lines = [r.getMessage() for r in caplog.records if "ws-2" in r.getMessage()]
    assert len(lines) == 1, lines
    newer = json.loads(json.dumps(parts["ws-1"]))
    newer["tables"]["projects"][0]["score"] = 80
    FileStore(folder).write("ws-1", encode_snapshot(newer))
    assert _values(scrape(), "secscan_project_score", project_id="p1") == [80]
    (folder / "ws-2.json").unlink()
    assert not _values(scrape(), "secscan_snapshot_readable", workspace="Beta")


def test_a_run_replaces_its_own_part_only(conn, tmp_path: Path) -> None:
    folder = tmp_path / "scanwatch-metrics.json"
    first = refresh_snapshot(conn, workspace_id="ws-1", label=None, path=folder, now=NOW)
    assert first.parts == 2  # the first write holds every workspace's part
    os.utime(folder / "ws-2.json", ns=(1, 1))
    again = refresh_snapshot(conn, workspace_id="ws-1", label=None, path=folder, now=NOW + timedelta(minutes=15))
    assert again.parts == 1 and again.location == str(folder / "ws-1.json")
    assert (folder / "ws-2.json").stat().st_mtime_ns == 1
    assert json.loads((folder / "ws-1.json").read_text())["generated_at_seconds"] == \
        (NOW + timedelta(minutes=15)).timestamp()


def test_a_part_that_cannot_be_written_leaves_every_part_as_it_was(conn, tmp_path: Path) -> None:
    folder = tmp_path / "scanwatch-metrics.json"
    refresh_snapshot(conn, workspace_id="ws-1", label=None, path=folder, now=NOW)
    held = {p.name: p.read_bytes() for p in folder.iterdir()}

    def fail(name: str) -> None:
        if name == "snapshot.mid_write":
            raise OSError("disk full")

    stop = milestones.observe(fail)
    try:
        with pytest.raises(OSError):
            refresh_snapshot(conn, workspace_id="ws-2", label=None, path=folder, now=NOW + timedelta(hours=1))
    finally:
        stop()
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == held


def test_a_single_file_snapshot_is_replaced_by_the_folder_of_every_part(conn, tmp_path: Path) -> None:
    path = tmp_path / "scanwatch-metrics.json"
    write_snapshot({"schema": 1, "tables": {}}, path)
    assert path.is_file()
    written = refresh_snapshot(conn, workspace_id="ws-2", label=None, path=path, now=NOW)
    assert path.is_dir() and written.parts == 2 and sorted(p.name for p in path.iterdir()) == ["ws-1.json", "ws-2.json"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # nothing left beside it


def test_parts_of_a_folder_past_the_total_cap_are_unreadable_and_served_once_there_is_room(conn, tmp_path: Path,
                                                                                         caplog) -> None:
    """Each part within the part cap, all of them together within the total: the part that would take the
    folder's parts past `total_bytes` is unreadable, never held, and served once room is made."""
    from exporters.source import SnapshotSource
    from pipelines.snapshot.format import Limits

    folder = tmp_path / "scanwatch-metrics.json"
    _write_parts(conn, folder)
    sizes = {p.stem: p.stat().st_size for p in folder.iterdir()}
    total = max(sizes.values()) + min(sizes.values()) - 1  # room for one part, not both
    source = SnapshotSource(folder, limits=Limits(part_bytes=total, total_bytes=total))
    state = source.get()
    served = sorted(name for name, part in state.parts.items() if part.readable)
    assert len(served) == 1 and not state.readable, state.parts
    refused = next(name for name in state.parts if name not in served)
    assert state.parts[refused].doc is None
    assert f"{refused}.json" in caplog.text and "byte total" in caplog.text
    (folder / f"{served[0]}.json").unlink()  # room made: the refused part is served at the next look
    again = source.get()
    assert sorted(again.parts) == [refused] and again.readable


def test_a_part_file_over_the_part_cap_is_refused_before_it_is_read(conn, tmp_path: Path) -> None:
    """The exporter's part cap bounds what it reads from a folder, not only what it serves: a larger part file
    is refused from its size, before any byte of it is held."""
    from pipelines.snapshot.format import Limits, SnapshotError

    folder = tmp_path / "scanwatch-metrics.json"
    _write_parts(conn, folder)
    sizes = {p.stem: p.stat().st_size for p in folder.iterdir()}
    small, large = sorted(sizes, key=sizes.get)
    store = FileStore(folder, limits=Limits(part_bytes=sizes[small]))
    assert store.read(small)[1] is not None
    with pytest.raises(SnapshotError, match=f"over the exporter's {sizes[small]:,}-byte cap"):
        store.read(large)
    sparse = folder / "ws-3.json"
    with open(sparse, "wb") as fh:  # sparse: its size is what counts; reading it would cost the memory
        fh.truncate(Limits().part_bytes + 1)
    with pytest.raises(SnapshotError, match="cap"):
        FileStore(folder, limits=Limits()).read("ws-3")


def test_a_part_another_run_wrote_during_the_first_build_is_kept(conn, tmp_path: Path) -> None:
    """Two workspaces' first runs at once (a PostgreSQL history takes both): the first build reads every part
    of the history, and the other run may write its own part after that read, built once its own writes (its
    owners) had committed. The build's copy, possibly half done, must not replace it. Mutation that fails it:
    the first build overwriting every part."""
    folder = tmp_path / "scanwatch-metrics.json"
    later = NOW + timedelta(minutes=5)
    written: list[str] = []

    def meanwhile(name: str) -> None:
        if name == "snapshot.built" and not written:
            written.append("ws-2")
            refresh_snapshot(conn, workspace_id="ws-2", label=None, path=folder, now=later)

    stop = milestones.observe(meanwhile)
    try:
        first = refresh_snapshot(conn, workspace_id="ws-1", label=None, path=folder, now=NOW)
    finally:
        stop()
    generated = {p.stem: json.loads(p.read_bytes())["generated_at_seconds"] for p in folder.iterdir()}
    assert written and first.parts == 2
    assert generated == {"ws-1": NOW.timestamp(), "ws-2": later.timestamp()}


def test_a_first_build_that_fails_midway_leaves_no_part_and_the_next_run_builds_them_all(
        conn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first build is whole or absent: stopped after one part (a full disk), it leaves no folder, so the
    next run builds every part again rather than its own alone, and a workspace that never runs again still
    gets its part. Mutation that fails it: the parts written straight into the folder."""
    import pipelines.snapshot.store as store_module

    folder = tmp_path / "scanwatch-metrics.json"
    write = store_module.write_file
    calls: list[Path] = []

    def full_disk(path: Path, data: bytes, milestone: object = None, *, keep: bool = False) -> None:
        calls.append(path)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        write(path, data, milestone, keep=keep)

    monkeypatch.setattr(store_module, "write_file", full_disk)
    with pytest.raises(OSError):
        refresh_snapshot(conn, workspace_id="ws-1", label=None, path=folder, now=NOW)
    assert not folder.exists() and FileStore(folder).needs_all()
    assert [p.name for p in tmp_path.iterdir()] == []  # nothing left beside it either
    monkeypatch.setattr(store_module, "write_file", write)
    again = refresh_snapshot(conn, workspace_id="ws-1", label=None, path=folder, now=NOW)
    assert again.parts == 2 and sorted(p.name for p in folder.iterdir()) == ["ws-1.json", "ws-2.json"]


def test_a_first_build_among_another_run_s_parts_needs_no_hard_links(
        conn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where other runs' parts arrived before the folder could be renamed into place, the build's parts go in
    one by one, each only where none is; a filesystem without hard links (a network share) does that by
    a replace of what is still absent. A part the build did not read (a workspace followed since) stays."""
    folder = tmp_path / "scanwatch-metrics.json"
    folder.mkdir()
    FileStore(folder).write("ws-2", b"{}")  # another run's, newer than this build's copy
    FileStore(folder).write("ws-9", b"{}")  # a workspace this build did not read

    def no_links(*_args: object) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr("os.link", no_links)
    first = refresh_snapshot(conn, workspace_id="ws-1", label=None, path=folder, now=NOW)
    assert first.parts == 1  # the store was not empty: only its own part
    FileStore(folder).replace_all({"ws-1": b'{"own": 1}', "ws-2": b'{"stale": 1}', "ws-3": b"{}"}, own="ws-1")
    held = {p.stem: p.read_bytes() for p in folder.iterdir() if not p.name.startswith(".")}
    assert held == {"ws-1": b'{"own": 1}', "ws-2": b"{}", "ws-3": b"{}", "ws-9": b"{}"}


def test_an_upgrade_that_cannot_put_the_folder_in_place_keeps_the_older_snapshot(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A single-file snapshot of an older scanwatch is moved aside while its folder of parts takes its place;
    if that fails, the file comes back, so the exporter keeps serving it rather than nothing."""
    path = tmp_path / "scanwatch-metrics.json"
    path.write_bytes(b'{"older": 1}')

    def refused(*_args: object) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr("os.rename", refused)
    with pytest.raises(OSError):
        FileStore(path).replace_all({"ws-1": b"{}"}, own="ws-1")
    assert path.read_bytes() == b'{"older": 1}' and [p.name for p in tmp_path.iterdir()] == [path.name]
