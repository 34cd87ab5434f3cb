"""The catalog reads the price table the package ships (LiteLLM's, trimmed and dated): exact prices,
lazy, and with no need of litellm."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

import pricing.catalog
from pricing.catalog import PriceCatalog, shipped_table
from pricing.cost import cost_breakdown, cost_nano
from pricing.price import Tier
from usage import Usage

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def catalog() -> PriceCatalog:
    return PriceCatalog.load()


def test_the_version_names_the_shipped_tables_date_and_its_prices_digest(catalog: PriceCatalog) -> None:
    shipped = shipped_table()
    document = orjson.loads(shipped.read_bytes())
    digest = hashlib.sha256(orjson.dumps(document["models"], option=orjson.OPT_SORT_KEYS)).hexdigest()
    assert shipped.name == f"prices-{document['date']}.json"
    assert catalog.version == f"prices-{document['date']}+sha256:{digest[:8]}"
    assert document["source"].startswith("litellm ")  # where the copy was taken from
    assert len(catalog) > 4000  # 4,877 models in litellm 1.110.2's table; `sample_spec` is not one


def test_gpt_4o(catalog: PriceCatalog) -> None:
    # $2.50 in, $1.25 cached read, $10 out per MTok.
    price = catalog.lookup("gpt-4o")
    assert price is not None
    assert (price.input, price.cached_input, price.output) == (2_500_000_000, 1_250_000_000, 10_000_000_000)
    assert price.source == "litellm:gpt-4o"
    assert catalog.context_window("gpt-4o") == 128_000


def test_claude_sonnet_4_5_has_both_cache_write_prices(catalog: PriceCatalog) -> None:
    price = catalog.lookup("claude-sonnet-4-5")
    assert price is not None
    assert (price.input, price.cache_write, price.cache_write_1h, price.cached_input, price.output) == (
        3_000_000_000,
        3_750_000_000,
        6_000_000_000,
        300_000_000,
        15_000_000_000,
    )
    assert catalog.cache_min_tokens("claude-sonnet-4-5") == 1024
    # 1,800 in + 220 out at $3 / $15: the worked example, priced from the table.
    assert cost_nano(Usage(prompt_tokens=1800, completion_tokens=220), price) == 8_700_000


def test_gemini_2_5_pro_by_provider_has_its_long_context_tier(catalog: PriceCatalog) -> None:
    price = catalog.lookup("gemini-2.5-pro", provider="gemini")
    assert price is not None and price.source == "litellm:gemini/gemini-2.5-pro"
    assert price.tiers == (
        Tier(above_tokens=200_000, input=2_500_000_000, output=15_000_000_000, cached_input=250_000_000),
    )
    # 250,000 in (50,000 cached) + 2,000 out, all at the >200k tier:
    # 200,000 x $2.50 + 50,000 x $0.25 + 2,000 x $15 = $0.50 + $0.0125 + $0.03 = $0.5425.
    assert (
        cost_nano(Usage(prompt_tokens=250_000, completion_tokens=2_000, cached_tokens=50_000), price)
        == 542_500_000
    )
    assert catalog.context_window("gemini-2.5-pro", provider="gemini") == 1_048_576


def test_a_provider_specific_key_wins_over_the_bare_one(catalog: PriceCatalog) -> None:
    # The bare key is Anthropic's own price; Vertex AI's adds a >200k tier, 1h writes included.
    vertex = catalog.lookup("claude-sonnet-4-5", provider="vertex_ai")
    assert vertex is not None and vertex.source == "litellm:vertex_ai/claude-sonnet-4-5"
    # 250,000 in: 50,000 read, 100,000 written (40,000 for 1h), 100,000 fresh; 1,000 out, at the tier:
    #   100,000 x $6 + 50,000 x $0.60 + 60,000 x $7.50 + 40,000 x $12 = $1.56 in; 1,000 x $22.50 out.
    cost = cost_breakdown(
        Usage(
            prompt_tokens=250_000,
            completion_tokens=1_000,
            cached_tokens=50_000,
            cache_write_tokens=100_000,
            cache_write_1h_tokens=40_000,
        ),
        vertex,
    )
    assert (cost.input_nano, cost.output_nano, cost.total_nano) == (1_560_000_000, 22_500_000, 1_582_500_000)
    # A provider LiteLLM has no key for falls back to the bare model.
    assert catalog.lookup("claude-sonnet-4-5", provider="anthropic") == catalog.lookup("claude-sonnet-4-5")


def test_text_embedding_3_small_is_input_only(catalog: PriceCatalog) -> None:
    price = catalog.lookup("text-embedding-3-small")
    assert price is not None and (price.input, price.output) == (20_000_000, 0)
    # 10,000 tokens x $0.02/MTok = $0.0002.
    assert cost_nano(Usage(prompt_tokens=10_000, completion_tokens=0), price) == 200_000


def test_a_dated_model_uses_its_own_key_when_the_table_has_one(catalog: PriceCatalog) -> None:
    price = catalog.lookup("gpt-4o-2024-11-20")
    assert price is not None and price.source == "litellm:gpt-4o-2024-11-20"


def test_an_unknown_date_falls_back_to_the_undated_model(catalog: PriceCatalog) -> None:
    assert catalog.resolve("gpt-4o-2031-01-01") == "gpt-4o"
    assert catalog.resolve("claude-sonnet-4-5-20311231") == "claude-sonnet-4-5"
    price = catalog.lookup("gpt-4o-2031-01-01")
    assert price is not None and price.source == "litellm:gpt-4o"


def test_an_unknown_model_has_no_price(catalog: PriceCatalog) -> None:
    assert catalog.lookup("tollgate-imaginary-model") is None
    assert catalog.context_window("tollgate-imaginary-model") is None
    assert catalog.cache_min_tokens("tollgate-imaginary-model") is None
    assert catalog.lookup("sample_spec") is None


def test_loading_the_catalog_does_not_import_litellm() -> None:
    code = (
        "import sys\n"
        "from pricing.catalog import PriceCatalog\n"
        "catalog = PriceCatalog.load()\n"
        "assert catalog.lookup('gpt-4o') is not None\n"
        "print(sorted(name for name in sys.modules if name.split('.')[0] == 'litellm'))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True, timeout=30
    )
    assert result.stdout.strip() == "[]"


def test_entries_are_converted_lazily_once_each(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = pricing.catalog.to_price
    monkeypatch.setattr(pricing.catalog, "to_price", lambda key, entry: calls.append(key) or real(key, entry))
    catalog = PriceCatalog.load()
    assert calls == []
    catalog.lookup("gpt-4o")
    catalog.lookup("gpt-4o")
    catalog.lookup("gpt-4o-2031-01-01")
    assert calls == ["gpt-4o"]


def test_the_shipped_table_prices_models_with_litellm_uninstalled() -> None:
    """An install without the extra: litellm can be neither imported nor found as a distribution."""
    code = (
        "import importlib.abc, importlib.metadata, sys\n"
        "class NoLiteLLM(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'litellm': raise ModuleNotFoundError(name)\n"
        "sys.meta_path.insert(0, NoLiteLLM())\n"
        "def missing(name): raise importlib.metadata.PackageNotFoundError(name)\n"
        "importlib.metadata.distribution = missing\n"
        "from pricing.catalog import PriceCatalog\n"
        "from gateway.accounting.estimate import count_tokens\n"
        "price = PriceCatalog.load().lookup('gpt-4o')\n"
        "print(price.input, price.output, count_tokens('hello world'))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.split() == ["2500000000", "10000000000", "2"]


@pytest.mark.parametrize("content", [None, b"{not json", b"[1, 2]"])
def test_an_unusable_table_gives_an_empty_catalog(tmp_path: Path, content: bytes | None) -> None:
    path = tmp_path / "prices.json"
    if content is not None:
        path.write_bytes(content)
    catalog = PriceCatalog.load(path=path)
    assert catalog.version == "file-prices.json+unreadable"
    assert catalog.lookup("gpt-4o") is None


def test_a_table_file_is_read_exactly(tmp_path: Path) -> None:
    table = {
        "sample_spec": {"input_cost_per_token": 0.0, "output_cost_per_token": 0.0},
        # 7.5e-08 $/token is $0.075/MTok: exact as 75,000,000 nano-USD per MTok, no float residue.
        "cheap": {"input_cost_per_token": 7.5e-08, "output_cost_per_token": 3e-07, "max_input_tokens": 32000},
        # Float noise written into the file itself is absorbed by rounding to whole nano per MTok.
        "noisy": {"input_cost_per_token": 1.0000000000000001e-07, "output_cost_per_token": 5e-07},
        "qwen-like": {
            "output_cost_per_reasoning_token": 4e-06,
            "tiered_pricing": [
                {"input_cost_per_token": 4e-07, "output_cost_per_token": 1.2e-06, "range": [0, 256000.0]},
                {"input_cost_per_token": 1.2e-06, "output_cost_per_token": 3.6e-06, "range": [256000.0, 1e6]},
            ],
        },
        "an-image-model": {"input_cost_per_token": 5e-06, "mode": "image_generation"},
        "embedder": {"input_cost_per_token": 1e-07, "mode": "embedding"},
    }
    data = orjson.dumps(table)
    path = tmp_path / "prices.json"
    path.write_bytes(data)
    catalog = PriceCatalog.load(path=path)
    assert catalog.version.startswith("prices-")
    assert len(catalog) == 5  # sample_spec is not a model
    cheap = catalog.lookup("cheap")
    assert cheap is not None and (cheap.input, cheap.output) == (75_000_000, 300_000_000)
    assert catalog.context_window("cheap") == 32_000
    noisy = catalog.lookup("noisy")
    assert noisy is not None and noisy.input == 100_000_000
    qwen = catalog.lookup("qwen-like")
    assert qwen is not None
    assert (qwen.input, qwen.output, qwen.reasoning) == (400_000_000, 1_200_000_000, 4_000_000_000)
    assert qwen.tiers == (Tier(above_tokens=256_000, input=1_200_000_000, output=3_600_000_000),)
    assert catalog.lookup("an-image-model") is None  # output priced per image, not per token
    embedder = catalog.lookup("embedder")
    assert embedder is not None and embedder.output == 0
