"""A price table is checked before it prices anything: shape, numbers, fields; each problem one line."""

from __future__ import annotations

import orjson
import pytest

from pricing.catalog import PriceCatalog, shipped_table
from pricing.table import PriceTable, TableError, parse_table

GPT = {"input_cost_per_token": 2.5e-06, "output_cost_per_token": 1e-05, "max_input_tokens": 128000}


def tollgate_shaped(models: dict[str, object], **wrapper: object) -> bytes:
    document = {"tollgate_price_table": 1, "source": "test", "date": "2031-01-02", "models": models}
    return orjson.dumps({**document, **wrapper})


def test_litellms_table_keeps_what_tollgate_reads_and_drops_the_rest() -> None:
    data = orjson.dumps(
        {
            "sample_spec": {"input_cost_per_token": 0.0, "mode": "one of: chat, embedding"},
            "gpt-4o": {
                **GPT,
                "input_cost_per_token_batches": 1.25e-06,
                "input_cost_per_token_above_200k_tokens": 5e-06,
                "supports_vision": True,
                "output_cost_per_image": 0.04,
                "deprecation_date": "2031-01-01",
            },
            "search": {"tiered_pricing": [{"input_cost_per_query": 0.005, "max_results_range": [0, 25]}]},
        }
    )
    table = parse_table(data, source="litellm.json", date="2031-01-02")
    assert table.models["gpt-4o"] == {
        **GPT,
        "input_cost_per_token_batches": 1.25e-06,
        "input_cost_per_token_above_200k_tokens": 5e-06,
        "supports_vision": True,
    }
    assert table.models["search"] == {"tiered_pricing": []}
    assert "sample_spec" not in table.models
    assert table.dropped_fields == 2 and table.priced() == 1
    assert table.version.startswith("prices-2031-01-02+sha256:")


def test_tollgates_shape_round_trips_to_the_same_version() -> None:
    table = parse_table(tollgate_shaped({"gpt-4o": GPT}), source="ignored")
    again = parse_table(table.to_json(), source="ignored")
    assert again == table and again.source == "test" and again.version == table.version
    # The version follows the prices, not where they came from.
    relabelled = PriceTable(table.models, source="elsewhere", date=table.date)
    assert relabelled.version == table.version


def test_the_shipped_table_passes_its_own_checks() -> None:
    table = parse_table(shipped_table().read_bytes(), source="shipped")
    assert table.version == PriceCatalog.load().version
    assert table.dropped_fields == 0  # already trimmed: nothing unknown in it


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"{nope", "not JSON: "),
        (b"[1, 2]", "not a JSON object of model -> prices"),
        (orjson.dumps({"m": "x"}), "model 'm': its entry is not an object"),
        (
            orjson.dumps({"m": {**GPT, "input_cost_per_token": -1e-06}}),
            "model 'm' field 'input_cost_per_token': -1e-06 is negative",
        ),
        (
            orjson.dumps({"m": {**GPT, "output_cost_per_token": "0.00001"}}),
            "model 'm' field 'output_cost_per_token': '0.00001' is not a number",
        ),
        (
            orjson.dumps({"m": {**GPT, "max_input_tokens": 1.5}}),
            "model 'm' field 'max_input_tokens': 1.5 is not a whole number of tokens",
        ),
        (
            orjson.dumps({"m": {**GPT, "supports_vision": "yes"}}),
            "model 'm' field 'supports_vision': 'yes' is not true or false",
        ),
        (
            orjson.dumps({"m": {**GPT, "tiered_pricing": [{"range": [0], "input_cost_per_token": 1e-06}]}}),
            "model 'm' field 'tiered_pricing' band 0: 'range' must be [from, to] in tokens",
        ),
        (orjson.dumps({"m": {"mode": "image_generation"}}), "no model in it has a per-token price"),
        (
            tollgate_shaped({"m": {**GPT, "input_cost_per_tokn": 1e-06}}),
            "model 'm': unknown field 'input_cost_per_tokn'",
        ),
        (tollgate_shaped({"m": GPT}, extra=1), "unknown top-level field 'extra'"),
        (tollgate_shaped({"m": GPT}, date="02/01/2031"), "'date' must be YYYY-MM-DD, not '02/01/2031'"),
        (tollgate_shaped({"m": GPT}, tollgate_price_table=2), "tollgate_price_table 2 is not a format"),
    ],
)
def test_a_bad_table_is_refused_in_one_line(data: bytes, message: str) -> None:
    with pytest.raises(TableError) as caught:
        parse_table(data, source="new.json", date="2031-01-02")
    assert str(caught.value).startswith(message)
    assert "\n" not in str(caught.value)


def test_an_infinite_price_is_refused() -> None:
    # JSON has no infinity, but Python's json writes 1e999 for one; the parser refuses it.
    with pytest.raises(TableError, match="number is infinity"):
        parse_table(b'{"m": {"input_cost_per_token": 1e999, "output_cost_per_token": 1}}', source="x")
