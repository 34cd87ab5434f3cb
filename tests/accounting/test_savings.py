"""Savings without a baseline are "not configured", never the whole spend shown as a loss."""

from __future__ import annotations

from gateway.accounting.spend import savings, totals
from gateway.cli.ledger import render_table
from gateway.config.defaults import embedded_config
from gateway.routes.spend import SAVINGS_NOT_CONFIGURED, present

ROW = {
    "requests": 2,
    "errors": 0,
    "prompt_tokens": 10,
    "completion_tokens": 5,
    "cost_nano": 700,
    "baseline_cost_nano": 0,
    "cache_saving_nano": 0,
}


def test_no_baseline_is_not_a_loss() -> None:
    assert savings(0, 700) is None
    assert savings(0, 0) == 0  # nothing spent, nothing lost
    assert savings(1_000, 700) == 300 and savings(500, 700) == -200  # a real baseline may show a loss
    shown = present({**ROW, "savings_nano": savings(0, 700)})
    assert shown["savings_nano"] is None and shown["savings_usd"] is None
    assert shown["savings_note"] == SAVINGS_NOT_CONFIGURED
    total = totals([{**ROW, "savings_nano": None}])
    assert total["savings_nano"] is None and total["cost_nano"] == 700
    table = render_table((), [{**present(ROW | {"savings_nano": None})}])
    assert "not configured" in table and "-0.0000007" not in table


def test_the_embedded_default_measures_savings_against_the_frontier_model() -> None:
    config = embedded_config({}, {"openai": "http://127.0.0.1:1", "vllm": "http://127.0.0.1:2"})
    assert config.pricing.baseline_model == "gpt-4o"
