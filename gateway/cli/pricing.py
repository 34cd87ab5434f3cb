"""`tollgate prices` and `tollgate local cost`: what Tollgate charges for a model and why, and the
volume at which a GPU deployment beats a managed model. `prices update` and `prices list` (newer
price tables in the database) live in gateway/cli/price_catalog.py."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping
from decimal import Decimal, InvalidOperation
from typing import TextIO

import gateway.cli.local as cli_local
import gateway.cli.price_catalog as cli_catalog
from gateway.config.loader import ConfigError
from gateway.config.loader import load_config as load_config_file
from gateway.config.schema import Config, DatabaseConfig, PricingConfig
from gateway.models import ModelRegistry, price_book
from local_backend.cost_model import HOURS_PER_MONTH, GpuDeployment, break_even
from pricing.book import PriceBook
from pricing.catalog import PriceCatalog
from pricing.money import format_usd
from pricing.price import Price

CONFIG_ENV = "TOLLGATE_CONFIG"
COMMANDS = frozenset({"prices", "local"})
_PRICES_COMMANDS = ("show", *sorted(cli_catalog.COMMANDS))
_CLASSES = (  # label, Rates attribute, Price attribute whose absence means a fallback, fallback
    ("input", "input", "input", ""),
    ("cached read", "cached_input", "cached_input", "as input"),
    ("cache write 5m", "cache_write", "cache_write", "as input"),
    ("cache write 1h", "cache_write_1h", "cache_write_1h", "as a 5m write"),
    ("output", "output", "output", ""),
    ("reasoning", "reasoning", "reasoning", "as output"),
)


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    config_help = f"YAML config file (default: ${CONFIG_ENV}; without one, the price table only)"
    prices = commands.add_parser(
        "prices", help="what Tollgate charges for a model and why (`prices MODEL`); newer price tables"
    )
    prices_commands = prices.add_subparsers(
        dest="prices_command", required=True, metavar="{MODEL,show,update,list}"
    )
    show = prices_commands.add_parser("show", help="what a model costs, and why (`prices MODEL` for short)")
    show.add_argument("model", help="a public model name from the config, or any upstream model id")
    show.add_argument("--provider", help="LiteLLM provider name (gemini, vertex_ai, azure, …)")
    show.add_argument("--config", help=config_help)
    cli_catalog.add_commands(
        prices_commands, f"YAML config whose database to use (default: ${CONFIG_ENV}, else ./tollgate.db)"
    )

    local = commands.add_parser("local", help="the self-hosted fleet")
    local_commands = local.add_subparsers(dest="local_command", required=True)
    cost = local_commands.add_parser("cost", help="GPU $/hour -> $/MTok, and break-even against a model")
    cost.add_argument("--config", help=config_help)
    cost.add_argument("--gpu-hour", type=_usd, metavar="USD", help="price of one GPU-hour")
    cost.add_argument("--gpus", type=int, metavar="N", help="GPUs in the deployment")
    cost.add_argument("--input-tps", type=_positive, metavar="X", help="prefill tokens/s, whole deployment")
    cost.add_argument("--output-tps", type=_positive, metavar="Y", help="decode tokens/s, whole deployment")
    cost.add_argument("--utilisation", type=_positive, default=Decimal("0.6"), help="busy share (0.6)")
    cost.add_argument("--against", metavar="MODEL", help="managed model (default: pricing.baseline_model)")
    cost.add_argument("--provider", help="LiteLLM provider name of the --against model")
    cost.add_argument("--mix", type=_mix, default=(3, 1), metavar="IN:OUT", help="token mix (3:1)")
    cli_local.add_commands(local_commands)


def with_default_subcommand(argv: list[str]) -> list[str]:
    """`tollgate prices MODEL` means `tollgate prices show MODEL`, as it did before `update` existed."""
    if len(argv) >= 2 and argv[0] == "prices" and argv[1] not in (*_PRICES_COMMANDS, "-h", "--help"):
        return [argv[0], "show", *argv[1:]]
    return argv


def run(
    args: argparse.Namespace,
    *,
    load_config: Callable[[str], Config] = load_config_file,
    catalog: PriceCatalog | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
    environ: Mapping[str, str] | None = None,
) -> int:
    """Run `prices` or `local cost`; 0 on success, 1 when a price is unknown or the config bad."""
    out, err = out or sys.stdout, err or sys.stderr
    if args.command == "local" and args.local_command in cli_local.COMMANDS:
        return cli_local.run(args, out=out, err=err)
    environ = os.environ if environ is None else environ
    path = args.config or environ.get(CONFIG_ENV)
    try:
        config = load_config(path) if path else None
    except ConfigError as exc:
        err.write(f"invalid config: {exc}\n")
        return 1
    database = config.database if config else DatabaseConfig()
    pricing = config.pricing if config else PricingConfig()
    if args.command == "prices" and args.prices_command in cli_catalog.COMMANDS:
        return cli_catalog.run(args, database, pricing, out=out, err=err, environ=environ)
    if catalog is None:
        catalog = cli_catalog.catalog_in_force(database, pricing, environ=environ, err=err)
    book = PriceBook(catalog) if config is None else price_book(config, catalog=catalog)
    if args.command == "prices":
        return _prices(args, config, book, out)
    return _local_cost(args, config, book, out, err)


def _prices(args: argparse.Namespace, config: Config | None, book: PriceBook, out: TextIO) -> int:
    out.write(f"catalog: {book.version}\n")
    model = ModelRegistry(config, prices=book).resolve(args.model) if config else None
    if model is None or config is None:
        price = book.lookup(args.model, provider=args.provider)
        _describe(out, book, args.model, args.provider, price)
        return 0 if price else 1
    unknown = 0
    for deployment in model.deployments:
        target = deployment.target
        out.write(f"\n{args.model} via {target.provider} ({target.upstream_model}):\n")
        kind = config.providers[target.provider].type
        _describe(out, book, target.upstream_model, kind, deployment.price)
        unknown += deployment.price is None
    return 1 if unknown else 0


def _describe(out: TextIO, book: PriceBook, model: str, provider: str | None, price: Price | None) -> None:
    if price is None:
        out.write(f"source: unknown — no price for {model}; its requests are logged as price_unknown\n")
        return
    out.write(f"source: {_source_label(price.source)}\nUSD per million tokens:\n")
    out.writelines(_rate_lines(price, 0))
    for tier in price.tiers:
        out.write(f"above {tier.above_tokens:,} prompt tokens (the whole request):\n")
        out.writelines(_rate_lines(price, tier.above_tokens + 1))
    window = book.catalog.context_window(model, provider=provider)
    minimum = book.catalog.cache_min_tokens(model, provider=provider)
    if window is not None:
        out.write(f"context window: {window:,} tokens\n")
    if minimum is not None:
        out.write(f"prompt cache minimum: {minimum:,} tokens\n")


def _rate_lines(price: Price, prompt_tokens: int) -> list[str]:
    rates = price.rates_for(prompt_tokens)
    tier = price.tier_for(prompt_tokens)
    lines = []
    for label, rate_name, own_name, fallback in _CLASSES:
        own = getattr(price, own_name) is not None or (tier and getattr(tier, own_name) is not None)
        note = f"  ({fallback})" if fallback and not own else ""
        lines.append(f"  {label:<15} ${format_usd(getattr(rates, rate_name))}{note}\n")
    return lines


def _source_label(source: str) -> str:
    if source.startswith("litellm:"):
        return f"LiteLLM price table, key {source.removeprefix('litellm:')}"
    if source.startswith("gpu:"):
        return f"GPU cost model ({source})"
    return "config override" if source == "config" else source


def _local_cost(
    args: argparse.Namespace, config: Config | None, book: PriceBook, out: TextIO, err: TextIO
) -> int:
    missing = [flag for flag, value in _gpu_flags(args) if value is None]
    if missing:
        err.write(f"local cost needs {', '.join(missing)}\n")
        return 2
    try:
        deployment = GpuDeployment.of(
            gpu_hour_usd=args.gpu_hour,
            gpus=args.gpus,
            input_tokens_per_second=args.input_tps,
            output_tokens_per_second=args.output_tps,
            utilisation=args.utilisation,
        )
    except ValueError as exc:
        err.write(f"local cost: {exc}\n")
        return 2
    price = deployment.price()
    out.write(
        f"GPU deployment: {deployment.gpus} x ${deployment.gpu_hour_usd}/GPU-hour = "
        f"${format_usd(deployment.monthly_cost_nano())}/month ({HOURS_PER_MONTH} h)\n"
        f"throughput: {deployment.input_tokens_per_second} input, {deployment.output_tokens_per_second} "
        f"output tokens/s; utilisation {deployment.utilisation}\n"
        f"effective price ({price.source}), USD per million tokens:\n"
        f"  input  ${format_usd(price.input)}\n  output ${format_usd(price.output)}\n"
    )
    against = args.against or (config.pricing.baseline_model if config else None)
    if against is None:
        return 0
    managed = _managed_price(against, args.provider, config, book)
    if managed is None:
        out.write(f"no price known for {against}: no break-even\n")
        return 1
    inputs, outputs = args.mix
    result = break_even(deployment, managed, input_share=inputs, output_share=outputs)
    out.write(
        f"against {against} ({_source_label(managed.source)}): input ${format_usd(managed.input)}, "
        f"output ${format_usd(managed.output)}; blended {inputs}:{outputs} "
        f"${format_usd(result.managed_nano_per_mtok)} per million tokens\n"
    )
    capacity = f"{result.capacity_tokens_per_month:,} tokens/month"
    if result.tokens_per_month is None:
        out.write(f"break-even: never ({against} costs nothing)\n")
    elif result.reachable:
        out.write(
            f"break-even: {result.tokens_per_month:,} tokens/month; above it self-hosting is cheaper "
            f"(this deployment serves up to {capacity})\n"
        )
    else:
        out.write(
            f"break-even: {result.tokens_per_month:,} tokens/month, beyond this deployment's "
            f"capacity of {capacity}: it never pays off against {against} at this mix\n"
        )
    return 0


def _gpu_flags(args: argparse.Namespace) -> list[tuple[str, object]]:
    return [
        ("--gpu-hour", args.gpu_hour),
        ("--gpus", args.gpus),
        ("--input-tps", args.input_tps),
        ("--output-tps", args.output_tps),
    ]


def _managed_price(model: str, provider: str | None, config: Config | None, book: PriceBook) -> Price | None:
    registered = ModelRegistry(config, prices=book).resolve(model) if config else None
    if registered is not None:
        return registered.deployments[0].price
    return book.lookup(model, provider=provider)


def _usd(text: str) -> Decimal:
    """A non-negative decimal, parsed exactly (money never goes through a float)."""
    try:
        value = Decimal(text)
    except InvalidOperation:
        value = Decimal("NaN")
    if not value.is_finite() or value < 0:
        raise argparse.ArgumentTypeError(f"not a non-negative number: {text!r}")
    return value


def _positive(text: str) -> Decimal:
    value = _usd(text)
    if value == 0:
        raise argparse.ArgumentTypeError(f"must be greater than zero: {text!r}")
    return value


def _mix(text: str) -> tuple[int, int]:
    inputs, _, outputs = text.partition(":")
    if not (inputs.isdigit() and outputs.isdigit()) or int(inputs) + int(outputs) == 0:
        raise argparse.ArgumentTypeError(f"a mix is IN:OUT, e.g. 3:1, not {text!r}")
    return int(inputs), int(outputs)
