"""The `tollgate` command: serve, check-config, migrate."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from contextlib import ExitStack
from pathlib import Path

from gateway import cli_demo, cli_keys, cli_ledger, cli_pricing, cli_routing
from gateway.config import Config, DatabaseConfig
from gateway.config_loader import ConfigError, load_config
from gateway.errors import InvalidRequest

CONFIG_ENV = "TOLLGATE_CONFIG"
log = logging.getLogger("tollgate")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tollgate", description="A self-hosted LLM gateway.")
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run the gateway")
    serve.add_argument(
        "--config", help=f"YAML config file (default: ${CONFIG_ENV}, else the embedded default)"
    )
    serve.add_argument("--host", help="listen address (default: from config, 127.0.0.1)")
    serve.add_argument("--port", type=int, help="listen port (default: from config, 8080)")
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])

    check = commands.add_parser("check-config", help="validate a config file without serving")
    check.add_argument("file")

    migrate = commands.add_parser("migrate", help="apply database migrations")
    migrate.add_argument("--config", help="YAML config file whose database to migrate")

    cli_ledger.add_commands(commands)
    cli_pricing.add_commands(commands)
    cli_keys.add_commands(commands)
    cli_routing.add_commands(commands)
    cli_demo.add_commands(commands)

    args = parser.parse_args(argv)
    logging.basicConfig(
        level=getattr(args, "log_level", "info").upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # A line per upstream call or per migration step drowns the lines operators need.
    for noisy in ("httpx", "httpcore", "alembic"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
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
    if args.command in ("spend", "reprice", *cli_keys.COMMANDS):
        try:
            if args.command in cli_keys.COMMANDS:
                return cli_keys.run(args, load=_offline_config)
            return cli_ledger.run(args, load=_offline_config)
        except (ConfigError, InvalidRequest) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    return _serve(args)


def _offline_config(path: str | None) -> Config:
    """The config for commands that read the ledger but serve nothing: the file, or the embedded
    default (whose sandbox addresses do not matter here)."""
    from gateway.defaults import embedded_config

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
    from gateway.database import resolve_database_url, run_migrations

    try:
        configured = load_config(path).database.url if path else DatabaseConfig().url
    except ConfigError as exc:
        print(f"invalid config: {exc}", file=sys.stderr)
        return 1
    url = resolve_database_url(configured, os.environ)
    run_migrations(url)
    print(f"migrated {_display_url(url)} to the latest schema")
    return 0


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from gateway.app import create_app
    from gateway.database import resolve_database_url, run_migrations
    from gateway.defaults import describe_upstreams, embedded_config, sandboxes_needed
    from gateway.sandbox_launcher import SandboxFleet

    path = args.config or os.environ.get(CONFIG_ENV)
    with ExitStack() as stack:
        if path:
            try:
                config = load_config(path)
            except ConfigError as exc:
                print(f"invalid config, not starting: {exc}", file=sys.stderr)
                return 1
            log.info("Tollgate: config %s (%d models)", Path(path).resolve(), len(config.models))
        else:
            fleet = stack.enter_context(SandboxFleet(sandboxes_needed(os.environ)))
            config = embedded_config(os.environ, fleet.urls)
            url = resolve_database_url(config.database.url, os.environ)
            log.info(
                "Tollgate embedded default: database %s, in-memory state, upstreams: %s",
                _display_url(url),
                describe_upstreams(os.environ, fleet.urls),
            )
        url = resolve_database_url(config.database.url, os.environ)
        if config.database.auto_migrate:
            run_migrations(url)
            log.info("Tollgate: database schema is up to date")
        uvicorn.run(
            create_app(config, config_path=Path(path) if path else None),
            host=args.host or config.server.host,
            port=args.port if args.port is not None else config.server.port,
            loop="uvloop",
            http="httptools",
            access_log=False,
            log_level=args.log_level,
            timeout_graceful_shutdown=10,
        )
    return 0


def _display_url(url: str) -> str:
    """A database URL safe for logs: the password is never printed."""
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


if __name__ == "__main__":
    sys.exit(main())
