"""A command that fails the way a driver's text can leak: libpq's "failed to resolve host" quoting the piece of
a password it read as a host, and a log line echoing the URL. For tests of the CLI's last filter only."""

from __future__ import annotations

import argparse
import logging
import os
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", default=None)


def run(args: argparse.Namespace) -> int:
    given = args.db or os.environ["SCANWATCH_DB"]
    logging.basicConfig(stream=sys.stderr, force=True)
    logging.getLogger("a.driver").error("connecting to %s", given)
    raise RuntimeError("failed to resolve host 'horse@127.0.0.1': [Errno -2] Name or service not known")
