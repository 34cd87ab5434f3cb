"""The `tollgate` command: serve, check-config, migrate."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import gateway.cli.demo as cli_demo
import gateway.cli.keys as cli_keys
import gateway.cli.ledger as cli_ledger
import gateway.cli.pricing as cli_pricing
import gateway.cli.routing as cli_routing
from gateway.accounting.catalogs import CatalogNotFound
from gateway.accounting.export import MissingExtra
from gateway.cli import ledger_access
from gateway.cli.ledger_access import OPEN_ERRORS, LedgerUnavailable, reason
from gateway.config.loader import ConfigError, load_config
from gateway.config.schema import Config, DatabaseConfig
from gateway.errors import InvalidRequest
from gateway.observability.logs import configure_logging, log_format

CONFIG_ENV = "TOLLGATE_CONFIG"
log = logging.getLogger("tollgate")


def main(argv: list[str] | None = None) -> int:
    """Run one command. A reader that stops early (`tollgate spend | head`) or a Ctrl-C ends it
    quietly, as Unix tools do, rather than with a traceback."""
    try:
        return _run(argv)
    except KeyboardInterrupt:  # Ctrl-C: the user knows why it stopped; a traceback tells them nothing
        print(file=sys.stderr)
        return 128 + 2
    except BrokenPipeError:
        # Python flushes stdout again at exit; pointing it at /dev/null keeps that quiet too.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + 13  # what a shell reports for a command ended by SIGPIPE


def _run(argv: list[str] | None) -> int:
    parser = argparse.ArgumentParser(prog="tollgate", description="A self-hosted LLM gateway.")
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run the gateway")
    serve.add_argument(
        "--config", help=f"YAML config file (default: ${CONFIG_ENV}, else the embedded default)"
    )
    serve.add_argument("--host", help="listen address (default: from config, 127.0.0.1)")
    serve.add_argument("--port", type=int, help="listen port (default: from config, 8080)")
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    serve.add_argument(
        "--log-format",
        choices=["text", "json"],
        help="log lines as text, or one JSON object per line (default: $TOLLGATE_LOG_FORMAT, else text)",
    )
    serve.add_argument(
        "--access-log",
        action="store_true",
        help="one line per request (request id, trace id, team, model, status, latency, tokens, cost) "
        "on the tollgate.access logger",
    )
    serve.add_argument(
        "--workers",
        type=_positive_int,
        default=1,
        help="worker processes sharing the port (default 1); more than one needs Redis state",
    )
    serve.add_argument(
        "--allow-per-process-state",
        action="store_true",
        help="with --workers N and in-memory state, accept that each worker enforces its own budgets, "
        "rate limits and cache (N times looser)",
    )

    check = commands.add_parser("check-config", help="validate a config file without serving")
    check.add_argument("file")

    migrate = commands.add_parser("migrate", help="apply database migrations")
    migrate.add_argument("--config", help="YAML config file whose database to migrate")

    cli_ledger.add_commands(commands)
    cli_pricing.add_commands(commands)
    cli_keys.add_commands(commands)
    cli_routing.add_commands(commands)
    cli_demo.add_commands(commands)

    args = parser.parse_args(cli_pricing.with_default_subcommand(sys.argv[1:] if argv is None else argv))
    try:
        args.log_format = log_format(getattr(args, "log_format", None), os.environ)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    configure_logging(
        getattr(args, "log_level", "info"), args.log_format, access_log=getattr(args, "access_log", False)
    )
    if args.command == "check-config":
        return _check_config(args.file)
    if args.command == "migrate":
        return _migrate(args.config or os.environ.get(CONFIG_ENV))
    if args.command in cli_pricing.COMMANDS:
        return cli_pricing.run(args)
    if args.command in cli_routing.COMMANDS:
        return cli_routing.run(args)
    if args.command in cli_demo.COMMANDS:
        return cli_demo.run(args)
    if args.command in ("spend", "reprice", "ledger", *cli_keys.COMMANDS):
        try:
            if args.command in cli_keys.COMMANDS:
                return cli_keys.run(args, load=_offline_config)
            return cli_ledger.run(args, load=_offline_config)
        except (ConfigError, InvalidRequest, CatalogNotFound, LedgerUnavailable, MissingExtra) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        except OPEN_ERRORS as exc:  # checked at the start, the database failed part way through
            print(f"error: the database failed: {reason(exc)}", file=sys.stderr)
            return 1
    return _serve(args)


def _offline_config(path: str | None) -> Config:
    """The config for commands that read the ledger but serve nothing: the file, or the embedded
    default (whose sandbox addresses do not matter here)."""
    from gateway.config.defaults import embedded_config

    path = path or os.environ.get(CONFIG_ENV)
    if path:
        return load_config(path)
    return embedded_config(os.environ, {"openai": "http://127.0.0.1:0", "vllm": "http://127.0.0.1:0"})


def _check_config(path: str) -> int:
    try:
        config = load_config(path)
    except ConfigError as exc:
        print(f"invalid config: {exc}", file=sys.stderr)
        return 1
    print(
        f"{path}: OK ({len(config.providers)} providers, {len(config.models)} models, "
        f"{len(config.aliases)} aliases)"
    )
    return 0


def _migrate(path: str | None) -> int:
    from gateway.accounting.database import resolve_database_url

    try:
        configured = load_config(path).database.url if path else DatabaseConfig().url
    except ConfigError as exc:
        print(f"invalid config: {exc}", file=sys.stderr)
        return 1
    url = resolve_database_url(configured, os.environ)
    try:
        ledger_access.migrate(url)
    except LedgerUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"migrated {_display_url(url)} to the latest schema")
    return 0


def _serve(args: argparse.Namespace) -> int:
    from gateway.accounting.database import resolve_database_url
    from gateway.cli.sandbox_launcher import SandboxFleet
    from gateway.config.defaults import describe_upstreams, embedded_config, sandboxes_needed
    from gateway.http.guard import uvicorn_settings
    from gateway.workers import WorkerSpec, fold_orphan_spools, refusal, state_is_shared

    path = args.config or os.environ.get(CONFIG_ENV)
    try:
        # The embedded default is checked with placeholder upstreams: a refusal starts no emulators.
        config = load_config(path) if path else _offline_config(None)
    except ConfigError as exc:
        print(f"invalid config, not starting: {exc}", file=sys.stderr)
        return 1
    problem = refusal(
        config, os.environ, workers=args.workers, per_process_state=args.allow_per_process_state
    )
    if problem:
        print(f"not starting: {problem}", file=sys.stderr)
        return 2
    # uvicorn re-raises the SIGTERM it shut down on; under the default handler the process would die
    # there, skipping this function's cleanup and orphaning the embedded sandbox emulators.
    signal.signal(signal.SIGTERM, _unwind)
    with ExitStack() as stack:
        sandbox_urls: dict[str, str] = {}
        if path:
            log.info("Tollgate: config %s (%d models)", Path(path).resolve(), len(config.models))
        else:
            fleet = stack.enter_context(SandboxFleet(sandboxes_needed(os.environ)))
            sandbox_urls = fleet.urls
            config = embedded_config(os.environ, fleet.urls)
            url = resolve_database_url(config.database.url, os.environ)
            log.info(
                "Tollgate embedded default: database %s, in-memory state, upstreams: %s",
                _display_url(url),
                describe_upstreams(os.environ, fleet.urls),
            )
        url = resolve_database_url(config.database.url, os.environ)
        if config.database.auto_migrate:
            try:
                ledger_access.migrate(url)  # once, here: never raced by the workers
            except LedgerUnavailable as exc:
                print(f"not starting: {exc}", file=sys.stderr)
                return 1
            log.info("Tollgate: database schema is up to date")
        if moved := fold_orphan_spools(Path(config.ledger.spool_dir), workers=args.workers):
            log.info("Tollgate: %d spool files from retired worker slots will be replayed", moved)
        options: dict[str, Any] = {
            "host": args.host or config.server.host,
            "port": args.port if args.port is not None else config.server.port,
            "loop": "uvloop",
            "log_level": args.log_level,
            # The root handler configured above prints uvicorn's lines too, in the same format.
            "log_config": None,
            "timeout_graceful_shutdown": 10,
            **uvicorn_settings(config.server),
        }
        if args.workers > 1:
            from gateway.workers import serve_workers

            spec = WorkerSpec(
                path,
                args.workers,
                args.log_level,
                sandbox_urls,
                log_format=args.log_format,
                access_log=args.access_log,
            )
            return serve_workers(spec, options, shared_state=state_is_shared(config, os.environ))
        import uvicorn

        from gateway.app import create_app

        uvicorn.run(create_app(config, config_path=Path(path) if path else None), **options)
    return 0


def _unwind(signum: int, frame: object) -> None:
    raise SystemExit(0)


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _display_url(url: str) -> str:
    """A database URL safe for logs: the password is never printed."""
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


if __name__ == "__main__":
    sys.exit(main())
