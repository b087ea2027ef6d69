"""`scanwatch demo`: the whole stack on the bundled simulator, so scanwatch can be seen working without an API key.

Arguments are declared here; the work lives in `demo_run` so `scanwatch --help` stays cheap.
"""

from __future__ import annotations

import argparse
from pathlib import Path

DEFAULT_PORTS = {"simulator": 8400, "exporter": 9817, "dagster": 3000, "prometheus": 9090}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", type=Path, default=Path("data/demo"),
                        help="folder for the demo's history, snapshot, DAGSTER_HOME, Prometheus storage and logs "
                             "(emptied at each start; default data/demo)")
    parser.add_argument("--simulator-port", type=int, default=DEFAULT_PORTS["simulator"],
                        help=f"port of the simulated service (default {DEFAULT_PORTS['simulator']})")
    parser.add_argument("--exporter-port", type=int, default=DEFAULT_PORTS["exporter"],
                        help=f"port of /metrics (default {DEFAULT_PORTS['exporter']})")
    parser.add_argument("--dagster-port", type=int, default=DEFAULT_PORTS["dagster"],
                        help=f"port of the Dagster UI (default {DEFAULT_PORTS['dagster']})")
    parser.add_argument("--prometheus-port", type=int, default=DEFAULT_PORTS["prometheus"],
                        help=f"port of Prometheus (default {DEFAULT_PORTS['prometheus']})")
    parser.add_argument("--seed", type=int, default=1, help="simulator seed: the same seed, the same workspace")
    parser.add_argument("--autopilot", type=float, default=90.0, metavar="SECONDS",
                        help="the simulator starts a round of scans every SECONDS so the numbers move (default 90)")
    parser.add_argument("--no-dagster", action="store_true", help="skip the Dagster UI (the first sync still runs)")
    parser.add_argument("--no-prometheus", action="store_true", help="skip Prometheus even when it is installed")
    parser.add_argument("--duration", type=float, default=None, metavar="SECONDS",
                        help="stop cleanly SECONDS after everything is up (default: run until Ctrl-C)")


def run(args: argparse.Namespace) -> int:
    from pipelines.commands.demo_run import Demo

    return Demo(args).run()
