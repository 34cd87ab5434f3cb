"""`tollgate prices` and `tollgate local cost`, run through their argparse wiring."""

from __future__ import annotations

import argparse
import io

import pytest

import gateway.cli.pricing as cli_pricing
from gateway.config.loader import ConfigError, parse_config
from gateway.config.schema import Config
from pricing.catalog import PriceCatalog

CONFIG = """
providers:
  openai: {type: openai, base_url: "https://api.openai.com/v1"}
  local-vllm: {type: vllm, base_url: "http://127.0.0.1:8000/v1"}
models:
  gpt-4o: {provider: openai, upstream_model: gpt-4o-2024-11-20}
  mini: {provider: openai, upstream_model: gpt-4o-mini}
  llama: {provider: local-vllm, upstream_model: llama-3.1-8b-instruct}
pricing:
  overrides:
    gpt-4o-mini: {input_per_mtok: "0.12", output_per_mtok: "0.48"}
  baseline_model: gpt-4o
"""


@pytest.fixture(scope="module")
def catalog() -> PriceCatalog:
    return PriceCatalog.load()


def load(path: str) -> Config:
    if path == "bad.yaml":
        raise ConfigError("bad.yaml: providers: Field required")
    return parse_config(CONFIG, source=path, environ={})


def tollgate(catalog: PriceCatalog, *argv: str) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser(prog="tollgate")
    cli_pricing.add_commands(parser.add_subparsers(dest="command", required=True))
    out, err = io.StringIO(), io.StringIO()
    code = cli_pricing.run(
        parser.parse_args(cli_pricing.with_default_subcommand(list(argv))),
        load_config=load,
        catalog=catalog,
        out=out,
        err=err,
        environ={},
    )
    return code, out.getvalue(), err.getvalue()


def test_prices_shows_every_class_tier_and_where_the_price_came_from(catalog: PriceCatalog) -> None:
    code, out, _ = tollgate(catalog, "prices", "gemini-2.5-pro", "--provider", "gemini")
    assert code == 0
    assert f"catalog: {catalog.version}\n" in out
    assert "source: LiteLLM price table, key gemini/gemini-2.5-pro\n" in out
    assert "  input           $1.25\n" in out
    assert "  cached read     $0.125\n" in out
    assert "  reasoning       $10  (as output)\n" in out
    tier = out.split("above 200,000 prompt tokens (the whole request):\n")[1]
    assert "  input           $2.5\n" in tier and "  output          $15\n" in tier
    assert "  cached read     $0.25\n" in tier
    assert "context window: 1,048,576 tokens\n" in out
    assert "prompt cache minimum: 2,048 tokens\n" in out


def test_prices_shows_both_cache_write_prices(catalog: PriceCatalog) -> None:
    code, out, _ = tollgate(catalog, "prices", "claude-sonnet-4-5")
    assert code == 0
    assert "  cache write 5m  $3.75\n  cache write 1h  $6\n" in out


def test_an_unknown_price_says_so_and_fails(catalog: PriceCatalog) -> None:
    code, out, _ = tollgate(catalog, "prices", "tollgate-imaginary-model")
    assert code == 1
    assert "source: unknown" in out and "price_unknown" in out


def test_with_a_config_a_public_name_shows_each_deployment(catalog: PriceCatalog) -> None:
    code, out, _ = tollgate(catalog, "prices", "mini", "--config", "team.yaml")
    assert code == 0
    assert "mini via openai (gpt-4o-mini):\nsource: config override\n" in out
    assert "  input           $0.12\n" in out
    code, out, _ = tollgate(catalog, "prices", "gpt-4o", "--config", "team.yaml")
    assert "source: LiteLLM price table, key gpt-4o-2024-11-20\n" in out


def test_with_a_config_an_unpriced_self_hosted_model_is_unknown(catalog: PriceCatalog) -> None:
    code, out, _ = tollgate(catalog, "prices", "llama", "--config", "team.yaml")
    assert code == 1
    assert "llama via local-vllm (llama-3.1-8b-instruct):\nsource: unknown" in out


def test_a_bad_config_is_reported(catalog: PriceCatalog) -> None:
    code, _, err = tollgate(catalog, "prices", "gpt-4o", "--config", "bad.yaml")
    assert code == 1
    assert err == "invalid config: bad.yaml: providers: Field required\n"


GPU = ("--gpu-hour", "2.50", "--gpus", "1", "--input-tps", "20000", "--output-tps", "1500")


def test_local_cost_prints_the_effective_price_and_break_even(catalog: PriceCatalog) -> None:
    # $2.50/h at 60% busy: $0.05787037 in, $0.771604938 out per MTok; against gpt-4o at 3:1
    # ($4.375/MTok blended) the $1,825 a month pays off from 417,142,858 tokens a month.
    code, out, _ = tollgate(catalog, "local", "cost", *GPU, "--against", "gpt-4o")
    assert code == 0
    assert "GPU deployment: 1 x $2.50/GPU-hour = $1825/month (730 h)\n" in out
    assert "effective price (gpu:2.50x1), USD per million tokens:\n" in out
    assert "  input  $0.05787037\n  output $0.771604938\n" in out
    assert "blended 3:1 $4.375 per million tokens\n" in out
    assert "break-even: 417,142,858 tokens/month; above it self-hosting is cheaper" in out
    assert "serves up to 7,723,102,040 tokens/month" in out


def test_local_cost_takes_the_baseline_model_from_config(catalog: PriceCatalog) -> None:
    code, out, _ = tollgate(catalog, "local", "cost", *GPU, "--config", "team.yaml", "--mix", "1:1")
    assert code == 0
    assert "against gpt-4o (LiteLLM price table, key gpt-4o-2024-11-20)" in out
    assert "break-even: 292,000,000 tokens/month" in out  # $1,825 / $6.25 per MTok


def test_local_cost_says_when_a_deployment_never_pays_off(catalog: PriceCatalog) -> None:
    eight = ("--gpu-hour", "2.50", "--gpus", "8", "--input-tps", "20000", "--output-tps", "1500")
    code, out, _ = tollgate(catalog, "local", "cost", *eight, "--against", "gpt-4o-mini")
    assert code == 0
    assert "it never pays off against gpt-4o-mini at this mix" in out


def test_local_cost_names_the_missing_flags(catalog: PriceCatalog) -> None:
    code, _, err = tollgate(catalog, "local", "cost", "--gpus", "1")
    assert code == 2
    assert err == "local cost needs --gpu-hour, --input-tps, --output-tps\n"


def test_local_cost_rejects_nonsense(catalog: PriceCatalog) -> None:
    code, _, err = tollgate(catalog, "local", "cost", *GPU, "--utilisation", "1.5")
    assert code == 2 and "utilisation" in err
    with pytest.raises(SystemExit):
        tollgate(catalog, "local", "cost", "--gpu-hour", "two dollars")
    with pytest.raises(SystemExit):
        tollgate(catalog, "local", "cost", *GPU, "--mix", "3-1")
