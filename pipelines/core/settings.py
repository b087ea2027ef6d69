"""Where scanwatch finds the service, its credentials and its files: one settings object.

`Settings.load()` reads its variables from the environment as it needs them, never copying it whole: a
deployment following a thousand workspaces holds a thousand key variables, and every step of every run asks
for its settings (copied at each ask, they cost an unchanged workspace's run 80 ms at a thousand). The CLI,
the Dagster resources and the exporter all ask it, so a setting is spelled, defaulted and checked in one
place. Paths are cheap and always available (the exporter needs nothing else); the followed workspaces are
validated on first use, all of them at once, so a bad entry stops everything before a single request is sent
or a row is touched.

`scanwatch sync` and `scanwatch exporter` started with the same environment agree on every path
without further settings: the snapshot (a folder of one part per workspace) defaults to beside the database.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from pipelines.core.credentials import DEFAULT_WORKSPACE as DEFAULT_WORKSPACE

# ConfigError is the settings' error too: callers catch it from here (an explicit re-export).
from pipelines.core.credentials import ConfigError as ConfigError
from pipelines.core.credentials import Workspace, check_api_key, check_base_url
from pipelines.core.history_location import HistoryLocation

if TYPE_CHECKING:
    from pipelines.core.ownership import Ownership

DEFAULT_DB = "data/scanwatch.duckdb"
SNAPSHOT_NAME = "scanwatch-metrics.json"
EXPORTER_PORT = 9817
SYNC_DEADLINE_SECONDS = 4 * 3600.0  # a whole sync; a real one takes minutes even for a large workspace


@cache  # a handful of cron strings a process; each workspace's scans step asks
def _shortest_gap(cron: str) -> float:
    """The shortest of 48 gaps between the cron's ticks, from its first after 1970. Worked out once per cron
    string: a schedule with rare ticks is slow to step through (116 ms for one due on the 29th of February,
    0.2 ms for the hourly default), and each workspace's scans step asked for it again."""
    from dagster._utils.schedules import cron_string_iterator

    try:
        ticks = cron_string_iterator(0, cron, "UTC")
        previous = next(ticks)
        gaps = []
        for _ in range(48):
            tick = next(ticks)
            gaps.append((tick - previous).total_seconds())
            previous = tick
        return min(gaps)
    except Exception:  # an invalid cron is reported by the schedule itself; fall back to hourly
        return 3600.0


@dataclass(frozen=True)
class Paths:
    db: Path | None  # the DuckDB file; None when the history is a PostgreSQL database
    snapshot: Path


class Settings:
    """Everything scanwatch reads from its environment, each variable read where it is asked for."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        self._env: Mapping[str, str] = os.environ if env is None else env
        self._db = (self._env.get("SCANWATCH_DB") or "").strip() or DEFAULT_DB
        db = HistoryLocation(self._db).file
        beside = (db or Path(DEFAULT_DB)).with_name(SNAPSHOT_NAME)
        self.paths = Paths(db=db, snapshot=Path(self._env.get("SCANWATCH_SNAPSHOT") or beside))
        file = (self._env.get("SCANWATCH_WORKSPACES_FILE") or "").strip()
        self.workspaces_file: Path | None = Path(file) if file else None
        owners = (self._env.get("SCANWATCH_OWNERSHIP_FILE") or "").strip()
        self.ownership_file: Path | None = Path(owners) if owners else None

    @property
    def snapshot_in_history(self) -> bool:
        """Whether the metrics snapshot lives in the history's own database: a PostgreSQL history keeps it there
        unless SCANWATCH_SNAPSHOT names a folder, so run pods and the exporter share no disk."""
        return HistoryLocation(self._db).file is None and not self._env.get("SCANWATCH_SNAPSHOT")

    @cached_property
    def history(self) -> HistoryLocation:
        """The history (`SCANWATCH_DB`): a DuckDB file or a PostgreSQL URL, checked on first use."""
        return HistoryLocation.parse(self._db)

    @classmethod
    def load(cls, env: Mapping[str, str] | None = None) -> Settings:
        return cls(env)

    def get(self, variable: str, default: str = "") -> str:
        return self._env.get(variable) or default

    def _int(self, variable: str, default: int) -> int:
        value = self.get(variable).strip()
        if not value:
            return default
        try:
            return int(value)
        except ValueError:
            raise ConfigError(f"{variable} must be a whole number (got {value[:40]!r})") from None

    # Cadences of the schedules, and the opt-in scheduled scans.
    @property
    def refresh_cron(self) -> str:
        return self.get("SCANWATCH_REFRESH_CRON", "*/15 * * * *")

    @property
    def scans_cron(self) -> str:
        return self.get("SCANWATCH_SCANS_CRON", "0 * * * *")

    @property
    def scans_interval_seconds(self) -> float:
        """The shortest gap between two ticks of the scans schedule: what "once per interval" means."""
        return _shortest_gap(self.scans_cron)

    @property
    def refresh_batch(self) -> int:
        """Workspaces per run of a schedule's tick (`SCANWATCH_REFRESH_BATCH`; 1: a run per workspace)."""
        value = self._int("SCANWATCH_REFRESH_BATCH", 1)
        if value < 1:
            raise ConfigError(f"SCANWATCH_REFRESH_BATCH must be a whole number from 1 (got {value})")
        return value

    @property
    def sync_processes(self) -> int | None:
        """How many processes a CLI sync of many workspaces may run them in (`SCANWATCH_SYNC_PROCESSES`; unset:
        one per core, from 16 workspaces: 8 a process). A history that takes one writer at a time (a DuckDB
        file) is always synced by one."""
        if not self.get("SCANWATCH_SYNC_PROCESSES").strip():
            return None
        value = self._int("SCANWATCH_SYNC_PROCESSES", 1)
        if value < 1:
            raise ConfigError(f"SCANWATCH_SYNC_PROCESSES must be a whole number from 1 (got {value})")
        return value

    @property
    def scan_cron(self) -> str:
        return self.get("SCANWATCH_SCAN_CRON", "0 3 * * *")

    @property
    def scan_targets(self) -> dict[str, tuple[str, ...]]:
        """The opt-in scheduled scans' targets of each workspace: `SCANWATCH_SCAN_TARGETS` for the one workspace
        of the two variables, each entry's `scan_targets` with a workspaces file (a target belongs to one
        workspace, and only its key may start a scan of it)."""
        listed = tuple(t.strip() for t in self.get("SCANWATCH_SCAN_TARGETS").split(",") if t.strip())
        if self.workspaces_file is None:
            return {DEFAULT_WORKSPACE: listed}
        if listed:
            raise ConfigError("SCANWATCH_SCAN_TARGETS is for the one workspace of SCANWATCH_BASE_URL: with "
                              "SCANWATCH_WORKSPACES_FILE, list each workspace's targets under its entry's "
                              "scan_targets")
        from pipelines.core.workspaces_file import read_scan_targets

        return read_scan_targets(self.workspaces_file)

    # The exporter's defaults for its flags.
    @property
    def exporter_address(self) -> str:
        return self.get("SCANWATCH_EXPORTER_ADDRESS", "0.0.0.0")

    @property
    def exporter_port(self) -> int:
        return self._int("SCANWATCH_EXPORTER_PORT", EXPORTER_PORT)

    @property
    def exporter_critical_info(self) -> int:
        return self._int("SCANWATCH_EXPORTER_CRITICAL_INFO", 0)

    @property
    def exporter_max_part_bytes(self) -> int:
        from pipelines.snapshot.format import EXPORTER_PART_BYTES

        return self._int("SCANWATCH_EXPORTER_MAX_PART_BYTES", EXPORTER_PART_BYTES)

    @property
    def exporter_max_total_bytes(self) -> int:
        from pipelines.snapshot.format import EXPORTER_TOTAL_BYTES

        return self._int("SCANWATCH_EXPORTER_MAX_TOTAL_BYTES", EXPORTER_TOTAL_BYTES)

    @property
    def exporter_shard(self) -> str:
        """`I/N`: serve only the workspaces of shard I of N (the exporter checks it)."""
        return self.get("SCANWATCH_EXPORTER_SHARD", "0/1")

    @cached_property
    def workspaces(self) -> tuple[Workspace, ...]:
        """Every followed workspace, validated together: one bad entry and none is followed."""
        if self.workspaces_file is None:
            return (Workspace(
                name=DEFAULT_WORKSPACE,
                base_url=check_base_url(self.get("SCANWATCH_BASE_URL"), "SCANWATCH_BASE_URL"),
                api_key=check_api_key(self.get("SCANWATCH_API_KEY"), "SCANWATCH_API_KEY"),
            ),)
        from pipelines.core.workspaces_file import read_workspaces_file

        return read_workspaces_file(self.workspaces_file, self._env)

    @property
    def workspace_names(self) -> list[str]:
        """Names of the followed workspaces, without needing their keys (Dagster's partitions at import)."""
        if self.workspaces_file is None:
            return [DEFAULT_WORKSPACE]
        from pipelines.core.workspaces_file import read_workspace_names

        return read_workspace_names(self.workspaces_file)

    def workspace(self, name: str) -> Workspace:
        """One followed workspace, its entry alone checked when a file lists them (every step of a run asks)."""
        if self.workspaces_file is not None and "workspaces" not in self.__dict__:
            from pipelines.core.workspaces_file import read_workspace

            found = read_workspace(self.workspaces_file, name, self._env)
            if found is not None:
                return found
        for ws in self.workspaces:
            if ws.name == name:
                return ws
        where = f"in {self.workspaces_file}" if self.workspaces_file else "(no SCANWATCH_WORKSPACES_FILE is set)"
        raise ConfigError(f"no workspace named {name!r} {where}; "
                          f"followed: {', '.join(ws.name for ws in self.workspaces)}")

    @property
    def sla_days(self) -> dict[str, int]:
        """The SLA per severity from `SCANWATCH_SLA_DAYS`, checked: a sync asks before it reads anything, so a
        bad value fails in one line before the ingestion rather than at the snapshot, after it."""
        from pipelines.core.vocabulary import sla_policy

        try:
            return sla_policy(self._env)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None

    @property
    def ownership(self) -> Ownership:
        """The ownership map of `SCANWATCH_OWNERSHIP_FILE` (docs/ownership.md), read again at each ask so an
        edited map counts from the next run; no map: every project `unowned`, one SLA policy."""
        from pipelines.core.ownership import read_ownership

        return read_ownership(self.ownership_file)

    @property
    def sync_deadline_seconds(self) -> float:
        """How long one sync (a CLI sync or a Dagster run) may take: `SCANWATCH_SYNC_DEADLINE_SECONDS`."""
        raw = self.get("SCANWATCH_SYNC_DEADLINE_SECONDS").strip()
        if not raw:
            return SYNC_DEADLINE_SECONDS
        try:
            value = float(raw)
        except ValueError:
            value = -1.0
        if not 0 < value < float("inf"):
            raise ConfigError(f"SCANWATCH_SYNC_DEADLINE_SECONDS must be a number of seconds above 0 "
                              f"(got {raw[:40]!r})")
        return value

    def dagster_home(self) -> Path | None:
        """`DAGSTER_HOME` when set, checked: Dagster itself would fail later with a stack trace."""
        value = self.get("DAGSTER_HOME")
        if not value:
            return None
        home = Path(value)
        if not home.is_absolute():
            raise ConfigError(f"DAGSTER_HOME must be an absolute path (got {value[:80]!r}): set it to the full "
                              "path of a folder, or unset it to run without Dagster's run storage")
        if not home.is_dir():
            raise ConfigError(f"DAGSTER_HOME={value[:80]} is not an existing folder: create it "
                              "(mkdir -p \"$DAGSTER_HOME\") or unset it to run without Dagster's run storage")
        return home

    def writable_db(self) -> HistoryLocation:
        """The history, checked before a sync holds any lock: a DuckDB file, or the folder it will be made in,
        must be writable (a PostgreSQL server answers for itself when the sync connects)."""
        db = self.history.file
        if db is None:
            return self.history
        if db.exists():
            if db.is_dir() or not os.access(db, os.R_OK | os.W_OK):
                raise ConfigError(f"SCANWATCH_DB={db} is not a writable file: fix its permissions or point "
                                  "SCANWATCH_DB elsewhere")
            folder = db.parent
        else:
            folder = db.parent if str(db.parent) else Path(".")
            while not folder.exists() and folder != folder.parent:
                folder = folder.parent
        if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
            raise ConfigError(f"the folder of SCANWATCH_DB ({folder}) is not writable: DuckDB writes its file and "
                              "journal there; fix its permissions or point SCANWATCH_DB elsewhere")
        return self.history

    def __repr__(self) -> str:
        return f"Settings(db={HistoryLocation(self._db).masked!r}, workspaces_file={self.workspaces_file!r})"
