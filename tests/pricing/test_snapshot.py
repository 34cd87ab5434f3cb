"""`python -m pricing.snapshot` writes the table the package ships: trimmed, dated, one at a time."""

from __future__ import annotations

from pathlib import Path

import orjson

from pricing import snapshot
from pricing.catalog import PriceCatalog


def test_a_snapshot_replaces_the_shipped_table_with_a_trimmed_dated_one(tmp_path: Path) -> None:
    source = tmp_path / "model_prices.json"
    source.write_bytes(
        orjson.dumps({"m": {"input_cost_per_token": 1e-06, "output_cost_per_token": 2e-06, "rpm": 10}})
    )
    (tmp_path / "prices-2020-01-01.json").write_text("{}")
    argv = ["--from", str(source), "--date", "2031-01-02", "--out", str(tmp_path)]
    assert snapshot.main(argv) == 0
    assert sorted(p.name for p in tmp_path.glob("prices-*.json")) == ["prices-2031-01-02.json"]
    written = tmp_path / "prices-2031-01-02.json"
    document = orjson.loads(written.read_bytes())
    assert document["models"] == {"m": {"input_cost_per_token": 1e-06, "output_cost_per_token": 2e-06}}
    assert (document["source"], document["date"]) == (f"file {source}", "2031-01-02")
    price = PriceCatalog.load(path=written).lookup("m")
    assert price is not None and (price.input, price.output) == (1_000_000_000, 2_000_000_000)


def test_a_bad_source_writes_nothing(tmp_path: Path) -> None:
    source = tmp_path / "model_prices.json"
    source.write_bytes(b"{}")
    assert snapshot.main(["--from", str(source), "--out", str(tmp_path)]) == 1
    assert list(tmp_path.glob("prices-*.json")) == []
