"""The CLI's Dagster instance (`pipelines/commands/ephemeral.py`) keeps one SQLite connection per storage for
all the runs a thread makes, and answers what only it changes (its partitions) from memory, without ever
answering wrong.

What fails these: a Dagster upgrade renaming the storage methods the instance overrides (its runs would open a
connection per statement again, silently), or a partition added or deleted that the instance keeps answering
from before."""

import sqlite3
import sqlite3.dbapi2
import threading
from typing import Any

import dagster as dg
import pytest

from pipelines.commands.ephemeral import ephemeral_instance

PARTITIONS = dg.DynamicPartitionsDefinition(name="workspaces")


@dg.asset(partitions_def=PARTITIONS)
def upstream(context: dg.AssetExecutionContext) -> None:
    context.log.info("from the step's thread")
    worker = threading.Thread(target=context.log.info, args=("from another thread, as the issues step's do",))
    worker.start()
    worker.join()


@dg.asset(partitions_def=PARTITIONS, deps=[upstream])
def downstream(context: dg.AssetExecutionContext) -> dg.MaterializeResult[Any]:
    return dg.MaterializeResult(metadata={"partition": context.partition_key})


JOB = dg.Definitions(assets=[upstream, downstream],
                     jobs=[dg.define_asset_job("both", partitions_def=PARTITIONS)]).resolve_job_def("both")


def test_runs_on_one_instance_open_no_connection_per_statement(monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[object] = []
    connect = sqlite3.dbapi2.connect

    def counted(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        opened.append(args)
        return connect(*args, **kwargs)

    monkeypatch.setattr(sqlite3.dbapi2, "connect", counted)  # what SQLAlchemy's SQLite dialect calls
    with ephemeral_instance() as instance:
        at_start = len(opened)
        for key in ("acme", "globex", "initech", "umbrella"):
            instance.add_dynamic_partitions(PARTITIONS.name, [key])
            result = JOB.execute_in_process(instance=instance, partition_key=key)
            assert result.success
            assert result.get_asset_materialization_events()[-1].materialization.metadata["partition"].value == key
            logs = [e.user_message for e in instance.all_logs(result.run_id) if e.dagster_event is None]
            assert "from another thread, as the issues step's do" in logs
            instance.delete_run(result.run_id)
    # Four runs of two steps: dozens of events and reads, each a connection of its own in Dagster's storages.
    assert len(opened) - at_start == 0, f"{len(opened) - at_start} SQLite connections opened by four runs"


def test_the_partitions_it_answers_follow_every_change() -> None:
    with ephemeral_instance() as instance:
        assert not instance.has_dynamic_partition(PARTITIONS.name, "acme")
        instance.add_dynamic_partitions(PARTITIONS.name, ["acme", "globex"])
        assert instance.has_dynamic_partition(PARTITIONS.name, "acme")
        assert instance.get_dynamic_partitions(PARTITIONS.name) == ["acme", "globex"]
        instance.delete_dynamic_partition(PARTITIONS.name, "acme")
        assert not instance.has_dynamic_partition(PARTITIONS.name, "acme")
        assert instance.get_dynamic_partitions(PARTITIONS.name) == ["globex"]
        instance.add_dynamic_partitions(PARTITIONS.name, ["acme"])
        assert instance.get_dynamic_partitions(PARTITIONS.name) == ["globex", "acme"]
        assert not instance.has_dynamic_partition("another", "acme")
        instance.wipe()
        assert not instance.has_dynamic_partition(PARTITIONS.name, "globex")
        assert instance.get_dynamic_partitions(PARTITIONS.name) == []
