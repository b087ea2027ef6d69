"""Followed workspaces as Dagster partitions, following the workspaces file while scanwatch runs.

Each workspace is a partition of the ingestion assets: the asset graph, the partition status bar and the
run list then show each workspace's freshness and failures on its own, a backfill or a re-run can target one
workspace, and a failure in one marks only its partition. The partitions are dynamic, kept in Dagster's
instance rather than read when the code location loads: `workspaces_sensor` adds the names
`SCANWATCH_WORKSPACES_FILE` lists (or the single `default` workspace of the two variables) and removes the
ones it no longer lists at each tick, so adding a customer is an edit of the file, not a redeploy. A removed
workspace keeps its history (and its past partitions' runs) and is no longer polled.
"""

from __future__ import annotations

import dagster as dg

WORKSPACES_NAME = "workspaces"
WORKSPACES = dg.DynamicPartitionsDefinition(name=WORKSPACES_NAME)


def register(instance: dg.DagsterInstance, names: list[str]) -> None:
    """Make `names` partitions of `instance` (those it lacks): a run of a workspace is refused by Dagster
    unless its partition is known, and an instance made for one command (`scanwatch sync`'s) starts empty."""
    known = set(instance.get_dynamic_partitions(WORKSPACES_NAME))
    missing = [name for name in dict.fromkeys(names) if name not in known]
    if missing:
        instance.add_dynamic_partitions(WORKSPACES_NAME, missing)


def followed_workspaces(instance: dg.DagsterInstance, names: list[str]) -> list[str]:
    """`names` (the workspaces the file lists now, in its order, as the service resource reads them), each a
    partition of `instance` (a name the sensor has not added yet is added here, so a schedule's tick never asks
    for a partition Dagster does not know)."""
    register(instance, names)
    return names


def partition_changes(instance: dg.DagsterInstance, names: list[str]) -> tuple[list[str], list[str]]:
    """(added, removed): the partition keys to add for `names` and the ones to remove, the file's order kept."""
    known = instance.get_dynamic_partitions(WORKSPACES_NAME)
    listed = set(names)
    present = set(known)
    return [n for n in names if n not in present], [k for k in known if k not in listed]
