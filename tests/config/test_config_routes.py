"""`routing.routes` in the config file: each mistake is refused with the YAML path of the bad field."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gateway.config.loader import ConfigError, parse_config

BASE = """
providers:
  openai: {type: openai, base_url: "https://api.openai.com/v1", api_key: k}
models:
  small: {provider: openai}
  big: {provider: openai}
routing:
  tiers: [{name: cheap, models: [small]}, {name: strong, models: [big]}]
"""


def config_with(routes: str) -> str:
    return BASE + "  routes:\n" + routes


CODE = """    - name: code
      description: writing, debugging and reviewing code
      examples: ["implement a parser in Rust", "why does this segfault?"]
      tier: strong
"""


def test_routes_parse_with_defaults_and_without_thresholds() -> None:
    config = parse_config(
        config_with(
            CODE
            + """    - name: chat
      description: small talk
      examples: ["hi"]
      models: [small, big]
      escalate: false
"""
        )
    )
    code, chat = config.routing.routes or ()
    assert (code.tier, code.lower_below, code.raise_above, code.escalate) == ("strong", None, None, True)
    assert (chat.models, chat.escalate) == (("small", "big"), False)
    assert config.routing.thresholds == ()  # routes pick the tier: no thresholds needed


def test_unset_routes_mean_the_defaults_and_empty_means_score_only() -> None:
    assert parse_config(BASE).routing.routes is None
    with pytest.raises(ConfigError, match="2 tiers need 1 thresholds"):
        parse_config(BASE + "  routes: []\n")
    scored = parse_config(BASE + "  routes: []\n  thresholds: [0.4]\n")
    assert scored.routing.routes == ()


@pytest.mark.parametrize(
    ("routes", "message"),
    [
        (CODE.replace("tier: strong", "tier: platinum"), "routing.routes[0].tier: unknown tier 'platinum'"),
        (
            CODE.replace('["implement a parser in Rust", "why does this segfault?"]', "[]"),
            "routing.routes[0].examples:",
        ),
        (CODE.replace('"why does this segfault?"', '""'), "routing.routes[0].examples[1]:"),
        (CODE + CODE, "routing.routes[1].name: duplicate route name 'code' (also routing.routes[0])"),
        (
            CODE + "      lower_below: 1.5\n",
            "routing.routes[0].lower_below: Input should be less than or equal to 1",
        ),
        (
            CODE + "      raise_above: -0.1\n",
            "routing.routes[0].raise_above: Input should be greater than or equal",
        ),
        (
            CODE + "      lower_below: 0.8\n      raise_above: 0.2\n",
            "routing.routes[0].lower_below: 0.8 is above raise_above 0.2",
        ),
        (
            CODE.replace("tier: strong", "models: [small]\n      tier: strong"),
            "routing.routes[0]: give either",
        ),
        (CODE.replace("      tier: strong\n", ""), "routing.routes[0]: give either 'tier' or 'models'"),
        (
            CODE.replace("tier: strong", "models: [small, gpt-9]"),
            "routing.routes[0].models[1]: unknown model 'gpt-9'",
        ),
        (
            CODE.replace("tier: strong", "models: [small]") + "      raise_above: 0.5\n",
            "routing.routes[0].raise_above: moves a request between tiers, so needs 'tier'",
        ),
        (CODE + "      surprise: 1\n", "routing.routes[0].surprise: unknown key 'surprise'"),
        (
            CODE.replace("description: writing, debugging and reviewing code", "description: ''"),
            "routing.routes[0].description",
        ),
    ],
)
def test_a_bad_route_names_its_field(routes: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(config_with(routes), source="team.yaml")
    assert str(caught.value).startswith(f"team.yaml: {message}"), str(caught.value)


def test_routes_need_tiers() -> None:
    text = BASE.replace("  tiers: [{name: cheap, models: [small]}, {name: strong, models: [big]}]\n", "")
    with pytest.raises(ConfigError, match=r"routing\.routes: needs routing\.tiers"):
        parse_config(text + "  routes:\n" + CODE.replace("tier: strong", "models: [big]"))


ROOT = Path(__file__).resolve().parents[2]


def test_the_commented_example_in_the_shipped_file_is_valid() -> None:
    """Uncommented, tollgate.example.yaml's routing block validates as it stands."""
    text = (ROOT / "tollgate.example.yaml").read_text()
    block = text[text.index("# routing:") :]
    uncommented = "\n".join(line.removeprefix("# ") for line in block.splitlines())
    keys = {"OPENAI_API_KEY": "1", "ANTHROPIC_API_KEY": "2", "GEMINI_API_KEY": "3"}
    config = parse_config(text + "\n" + uncommented, environ=keys)
    assert [r.name for r in config.routing.routes or ()] == ["code", "extraction", "chit-chat"]


def test_check_config_names_the_bad_route_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(config_with(CODE.replace("tier: strong", "tier: platinum")))
    done = subprocess.run(
        [sys.executable, "-m", "gateway.cli.main", "check-config", str(bad)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert "routing.routes[0].tier: unknown tier 'platinum' (tiers: cheap, strong)" in done.stderr
