"""`tollgate demo`: its arguments. The session itself (sandbox upstreams, a gateway, traffic, a
summary) is `gateway.cli.demo_session`, imported only when the command runs: `tollgate serve` must not
load the demo's HTTP client and workload."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

COMMANDS = ("demo",)


def add_commands(commands: Any) -> None:
    demo = commands.add_parser("demo", help="sandbox upstreams, a gateway and a minute of mixed traffic")
    add_arguments(demo)


def add_arguments(demo: argparse.ArgumentParser) -> None:
    demo.add_argument("--duration", type=float, default=60.0, help="seconds of traffic (default 60)")
    demo.add_argument("--concurrency", type=int, default=8, help="clients sending at once (default 8)")
    demo.add_argument("--host", default="127.0.0.1", help="gateway listen address")
    demo.add_argument("--port", type=int, default=0, help="gateway port (default: a free one)")
    demo.add_argument(
        "--instant", action="store_true", help="upstreams answer at once (default: realistic latencies)"
    )
    demo.add_argument("--seed", type=int, default=7, help="seed of the workload")
    demo.add_argument("--exit", action="store_true", help="stop after the summary instead of serving on")


def run(args: argparse.Namespace) -> int:
    from gateway.cli.demo_session import run as run_session

    return run_session(args)


def main(argv: list[str] | None = None) -> int:
    """`python -m gateway.cli.demo`: the same command before `tollgate` knows about it."""
    parser = argparse.ArgumentParser(prog="tollgate demo", description=__doc__)
    add_arguments(parser)
    logging.basicConfig(level="WARNING", format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
