"""`scanwatch simulator`: serve the fake service and print its address and a working key.

Import-light on purpose: the dispatcher imports this module to build `--help`; the server, world and
Starlette are imported only inside `run`.
"""

from __future__ import annotations

import argparse

from simulator.config import SCALES


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8400, help="port (default 8400; 0 = any free port)")
    parser.add_argument("--seed", type=int, default=1, help="world seed: same seed, same world (default 1)")
    parser.add_argument("--scale", choices=SCALES, default="small",
                        help="world size: small for the demo, large for benchmarks, 200k (~200k visible issues) for one"
                             " large workspace's memory, xlarge (~400k) for the scale curve (default small)")
    parser.add_argument("--clock", choices=("real", "driven"), default="real",
                        help="real: wall time; driven: time moves only through /_sim/clock (default real)")
    parser.add_argument("--control", action="store_true", help="expose the /_sim/ control surface (loopback use)")
    parser.add_argument("--rate-limit", type=int, default=120, help="requests per window per key (default 120)")
    parser.add_argument("--rate-window", type=float, default=60.0, help="rate-limit window in seconds (default 60)")
    parser.add_argument("--scan-seconds", type=float, default=30.0, help="time from queued to done (default 30)")
    parser.add_argument("--autopilot", type=float, default=0.0, metavar="SECONDS",
                        help="real clock: start a round of scans every SECONDS so dashboards move (default off)")
    parser.add_argument("--workspaces", type=int, default=1, metavar="N",
                        help="independent Pro workspaces, each with its own key and world (default 1)")
    parser.add_argument("--access-log", action="store_true", help="log one line per request (never the key)")
    parser.add_argument("--reading", action="append", default=[], metavar="NAME[=false]",
                        help="where the contract is loose, serve another reading (repeatable): "
                             "failed_scan_moves_last_scan, failed_scan_reused, marks_switch_directly, replay_errors")


def run(args: argparse.Namespace) -> int:
    import logging
    import signal
    import threading

    from .config import SimConfig, parse_readings
    from .server import ServerThread, build_runtime

    cfg = SimConfig(seed=args.seed, scale=args.scale, clock=args.clock, control=args.control, host=args.host,
                    port=args.port, rate_limit=args.rate_limit, rate_window=args.rate_window,
                    scan_seconds=args.scan_seconds, autopilot=args.autopilot, access_log=args.access_log,
                    pro_workspaces=args.workspaces)
    try:
        cfg.readings = parse_readings(args.reading)
    except ValueError as exc:
        print(f"scanwatch simulator: --reading: {exc}")
        return 2
    if cfg.access_log:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    try:
        server = ServerThread(build_runtime(cfg))
    except OSError as exc:
        print(f"scanwatch simulator: cannot listen on {cfg.host}:{cfg.port}: {exc.strerror}")
        return 1
    stop = threading.Event()
    # Ctrl-C and SIGTERM stop it cleanly even when it was started from a script's background job, which
    # starts with SIGINT ignored: the demo, the exporter and a sync answer both signals the same way. Set
    # before the address is printed, so a signal sent as soon as it is read is not lost.
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        server.start()
        world = server.rt.world
        print(f"base URL: {server.base_url}", flush=True)
        print(f"API key:  {world.keys['pro']}", flush=True)
        for n in range(2, cfg.pro_workspaces + 1):
            print(f"API key {n}: {world.keys[f'pro_{n}']}", flush=True)
        print(f"world:    seed {cfg.seed}, scale {cfg.scale}, {world.stats()['issues']} issues, clock {cfg.clock}"
              + (f", control at http://{server.host}:{server.port}/_sim/" if cfg.control else ""), flush=True)
        while not stop.wait(cfg.autopilot if cfg.autopilot > 0 and cfg.clock == "real" else 3600):
            if cfg.autopilot > 0 and cfg.clock == "real":
                for workspace_id in world.pro_workspace_ids:
                    summary = world.run_round(fraction=0.5, workspace_id=workspace_id)
                    print(f"autopilot: round {summary['round']}: {summary['scans']} scans, {summary['new']} new, "
                          f"{summary['fixed']} fixed, {summary['reopened']} reopened", flush=True)
            if not server.thread.is_alive():
                return 1
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        server.stop()
    return 0
