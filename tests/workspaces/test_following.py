"""Workspaces added, changed and removed while scanwatch runs: Dagster's partitions follow the workspaces file
at each sensor tick (no redeploy), the schedules ask for the workspaces the file lists at their tick, and keys
may come from files (a folder of one file per workspace, as a mounted Kubernetes Secret gives them)."""

from __future__ import annotations

import datetime

import dagster as dg
import pytest

from pipelines.core.settings import ConfigError, Settings
from pipelines.defs.partitions import WORKSPACES

A, B, C = "rst_" + "a" * 40, "rst_" + "b" * 40, "rst_" + "c" * 40


def _file(path, *names: str) -> None:
    path.write_text("workspaces:\n" + "".join(f"  - name: {n}\n    api_key_env: KEY_{n.upper()}\n" for n in names))


@pytest.fixture
def instance():
    with dg.instance_for_test() as found:  # a schedule's context needs an instance it can refer to
        yield found


@pytest.fixture
def followed(tmp_path, monkeypatch):
    path = tmp_path / "workspaces.yml"
    monkeypatch.setenv("SCANWATCH_WORKSPACES_FILE", str(path))
    monkeypatch.setenv("SCANWATCH_BASE_URL", "http://sim.example/v1")
    for name, key in (("ACME", A), ("BETA", B), ("GAMMA", C)):
        monkeypatch.setenv(f"KEY_{name}", key)
    return path


def _tick(instance: dg.DagsterInstance):
    from pipelines.defs.resources import default_resources
    from pipelines.defs.sensors import workspaces_sensor

    with dg.build_sensor_context(instance=instance) as context:
        result = workspaces_sensor(context, scanning_service=default_resources()["scanning_service"])
    if isinstance(result, dg.SensorResult):  # what the daemon does with the requests
        for request in result.dynamic_partitions_requests or []:
            if isinstance(request, dg.AddDynamicPartitionsRequest):
                instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
            else:
                for key in request.partition_keys:
                    instance.delete_dynamic_partition(request.partitions_def_name, key)
    return result


def _refresh_tick(instance: dg.DagsterInstance) -> list[str]:
    from pipelines.definitions import defs
    from pipelines.defs.resources import default_resources

    schedule = defs().resolve_schedule_def("refresh_schedule")
    when = datetime.datetime(2026, 11, 1, 12, 15, tzinfo=datetime.UTC)
    with dg.build_schedule_context(scheduled_execution_time=when, instance=instance,
                                   resources=default_resources()) as context:
        return [r.partition_key for r in schedule(context)]


def test_partitions_follow_the_file_as_it_changes_without_a_reload(followed, instance):
    _file(followed, "acme", "beta")
    _tick(instance)
    assert WORKSPACES.get_partition_keys(dynamic_partitions_store=instance) == ["acme", "beta"]
    assert _refresh_tick(instance) == ["acme", "beta"]

    _file(followed, "beta", "gamma")  # acme leaves, gamma arrives: the same code location, no reload
    result = _tick(instance)
    assert isinstance(result, dg.SensorResult)
    assert WORKSPACES.get_partition_keys(dynamic_partitions_store=instance) == ["beta", "gamma"]
    assert _refresh_tick(instance) == ["beta", "gamma"]
    assert isinstance(_tick(instance), dg.SkipReason)  # nothing moved: nothing asked of Dagster


def test_a_broken_file_changes_no_partition(followed, instance):
    _file(followed, "acme", "beta")
    _tick(instance)
    followed.write_text("workspaces: [name: acme\n")
    result = _tick(instance)
    assert isinstance(result, dg.SkipReason)
    assert "partitions unchanged" in result.skip_message and "not valid YAML" in result.skip_message
    assert WORKSPACES.get_partition_keys(dynamic_partitions_store=instance) == ["acme", "beta"]


def test_a_schedule_ticking_before_the_sensor_still_asks_for_a_new_workspace(followed, instance):
    _file(followed, "acme")
    _tick(instance)
    _file(followed, "acme", "gamma")
    assert _refresh_tick(instance) == ["acme", "gamma"]
    assert instance.has_dynamic_partition(WORKSPACES.name, "gamma")


def _settings(tmp_path, text: str, **env: str) -> Settings:
    path = tmp_path / "workspaces.yml"
    path.write_text(text)
    return Settings.load({"SCANWATCH_BASE_URL": "http://sim.example/v1", "SCANWATCH_WORKSPACES_FILE": str(path),
                          **env})


def test_keys_from_a_folder_of_key_files_and_from_a_named_file(tmp_path):
    keys = tmp_path / "secret"
    keys.mkdir()
    (keys / "acme").write_text(A + "\n")
    (tmp_path / "beta.key").write_text(B)
    text = ("workspaces:\n  - name: acme\n  - name: beta\n    api_key_file: beta.key\n"
            "  - name: gamma\n    api_key_env: KEY_GAMMA\n")
    settings = _settings(tmp_path, text, SCANWATCH_KEYS_DIR=str(keys), KEY_GAMMA=C)
    acme, beta, gamma = settings.workspaces
    assert (acme.api_key, acme.key_variable) == (A, f"the key file {keys / 'acme'}")
    assert (beta.api_key, beta.key_variable) == (B, f"the key file {tmp_path / 'beta.key'}")
    assert (gamma.api_key, gamma.key_variable) == (C, "KEY_GAMMA")
    assert settings.workspace("beta").api_key == B
    (tmp_path / "beta.key").write_text(C.replace("c", "d"))  # a rotated key is read at the next ask
    again = _settings(tmp_path, text, SCANWATCH_KEYS_DIR=str(keys), KEY_GAMMA=C)
    assert again.workspace("beta").api_key == C.replace("c", "d")


@pytest.mark.parametrize(("entry", "make", "says"), [
    ("  - name: acme\n", None, "workspaces[0] (acme): its key file {keys}/acme does not exist"),
    ("  - name: acme\n", "dir", "workspaces[0] (acme): its key file {keys}/acme is not a regular file"),
    ("  - name: acme\n", "big", "workspaces[0] (acme): its key file {keys}/acme is larger than 4 KiB"),
    ("  - name: acme\n", "bad", "workspaces[0] (acme): field 'api_key_file': the key file {keys}/acme does not "
                                "look like an API key"),
    ("  - name: acme\n    api_key_file: x\n    api_key_env: KEY_A\n", None,
     "workspaces[0] (acme): fields 'api_key_env' and 'api_key_file' both given"),
    ("  - name: acme\n    api_key_file: " + A + "\n", None, "field 'api_key_file' must be the path of a file"),
])
def test_a_bad_key_file_is_one_line_naming_the_entry_and_never_the_key(tmp_path, entry, make, says):
    keys = tmp_path / "keys"
    keys.mkdir()
    if make == "dir":
        (keys / "acme").mkdir()
    elif make == "big":  # a key file pointed at something large is refused, never read whole
        (keys / "acme").write_text(B + "\n" * 5000)
    elif make == "bad":
        (keys / "acme").write_text("not-a-key " + B)
    settings = _settings(tmp_path, "workspaces:\n" + entry, SCANWATCH_KEYS_DIR=str(keys), KEY_A=A)
    with pytest.raises(ConfigError) as caught:
        _ = settings.workspaces
    line = str(caught.value)
    assert says.format(keys=keys) in line and "\n" not in line
    assert A not in line and B not in line


def test_an_entry_without_a_key_source_says_where_a_key_may_come_from(tmp_path):
    with pytest.raises(ConfigError, match=r"field 'api_key_env' is missing.*SCANWATCH_KEYS_DIR"):
        _ = _settings(tmp_path, "workspaces:\n  - name: acme\n").workspaces


def test_one_workspace_is_read_without_checking_every_other_entry(tmp_path):
    """A run of one workspace reads its own entry: another entry's missing key is that workspace's problem."""
    settings = _settings(tmp_path, "workspaces:\n  - name: acme\n    api_key_env: KEY_A\n"
                                   "  - name: beta\n    api_key_env: KEY_UNSET\n", KEY_A=A)
    assert settings.workspace("acme").api_key == A
    with pytest.raises(ConfigError, match=r"\(beta\): field 'api_key_env': KEY_UNSET is not set"):
        settings.workspace("beta")


def test_snapshots_of_several_workspaces_at_once_on_postgresql_do_not_collide_on_the_sla_policy(pg_database):
    """Every workspace's snapshot records the SLA policy it counts with. On PostgreSQL the runs of several
    workspaces build their snapshots at once, and a policy written as delete-then-insert by two of them at
    once failed one with `duplicate key value violates unique constraint "sla_policy_pkey"` (2 of 10 workspaces'
    first sync). Forty writers at once, each on its own connection, as forty runs would."""
    import threading

    from pipelines.storage import connect
    from pipelines.storage.reference import write_sla_policy

    connect(pg_database).close()  # the schema, once
    conns = [connect(pg_database) for _ in range(40)]
    start, failures = threading.Barrier(len(conns)), []

    def write(conn, days: int) -> None:
        start.wait()
        try:
            write_sla_policy(conn, {"critical": days, "high": 30, "medium": 90, "low": 180})
        except Exception as exc:
            failures.append(f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=write, args=(c, 7 + n % 2)) for n, c in enumerate(conns)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    rows = dict(conns[0].execute("SELECT severity, days FROM sla_policy").fetchall())
    for conn in conns:
        conn.close()
    assert failures == []
    assert set(rows) == {"critical", "high", "medium", "low"} and rows["critical"] in (7, 8)
