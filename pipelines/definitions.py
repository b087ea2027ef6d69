"""The scanwatch code location: every definition of `pipelines/defs/`, found the way Dagster's `dg` finds a
project's (`[tool.dg]` in pyproject.toml, `root_module = "pipelines"`), so `dg check defs` and `dg dev` load
the same code location as `dagster api grpc -m pipelines.definitions` does in a deployment.

Every job runs in-process: its steps (assets, checks, the snapshot) execute one after another in the run's
own process. The multiprocess default starts a Python process per step, each importing Dagster and
scanwatch again (about 5 s apiece on a busy host), for steps that take milliseconds and, behind the `duckdb`
pool, could never run side by side anyway. In-process runs still claim the pool's slot step by step, so
runs never write DuckDB at once; on Kubernetes a run is one pod rather than one per step. Checks stay
separate asset checks rather than check specs inside the assets: the in-process executor makes their
steps cost milliseconds, and a check that fails to run then never fails its asset's materialization.
"""

from pathlib import Path

import dagster as dg


@dg.definitions
def defs() -> dg.Definitions:
    """Loaded when the code location loads (not at import), so importing this module reads no setting."""
    return dg.Definitions.merge(
        dg.load_from_defs_folder(path_within_project=Path(__file__).parent),
        dg.Definitions(executor=dg.in_process_executor),
    )
