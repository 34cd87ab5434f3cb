"""Config files: the shipped example validates, and every mistake names its field and the problem."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gateway.config.defaults import embedded_config, sandboxes_needed
from gateway.config.loader import ConfigError, load_config, parse_config

ROOT = Path(__file__).resolve().parents[2]
KEYS = {"OPENAI_API_KEY": "sk-1", "ANTHROPIC_API_KEY": "sk-2", "GEMINI_API_KEY": "sk-3"}

MINIMAL = """
providers:
  openai: {type: openai, base_url: "https://api.openai.com/v1", api_key: "${KEY}"}
models:
  gpt-4o: {provider: openai, price: {input_per_mtok: "2.5", output_per_mtok: "10"}}
"""


def test_example_config_validates_with_keys_set() -> None:
    config = load_config(ROOT / "tollgate.example.yaml", environ=KEYS)
    assert {"llama-3.1-8b-instruct", "gpt-4o", "claude-sonnet-4-5", "gemini-2.5-pro"} <= set(config.models)
    assert config.providers["openai"].api_key is not None
    assert config.providers["openai"].api_key.get_secret_value() == "sk-1"
    assert "sk-1" not in repr(config)
    launch = config.models["llama-3.1-8b-instruct"].launch
    assert launch is not None and launch.model == "meta-llama/Llama-3.1-8B-Instruct"
    assert (config.server.header_timeout_seconds, config.server.max_headers) == (10, 128)


@pytest.mark.parametrize(
    ("text", "environ", "message"),
    [
        (MINIMAL, {}, "providers.openai.api_key: environment variable KEY is not set"),
        (
            MINIMAL.replace("openai, price", "nope, price"),
            {"KEY": "k"},
            "models.gpt-4o.provider: unknown provider 'nope'",
        ),
        (
            MINIMAL.replace('"2.5"', '"-1"'),
            {"KEY": "k"},
            "models.gpt-4o.price.input_per_mtok: Input should be greater than or equal to 0",
        ),
        (MINIMAL.replace("type: openai", "type: carrier-pigeon"), {"KEY": "k"}, "providers.openai"),
        (MINIMAL + "surprise: true\n", {"KEY": "k"}, "surprise: unknown key 'surprise'"),
        (MINIMAL + "aliases: {smart: gpt-5}\n", {"KEY": "k"}, "aliases.smart: unknown model 'gpt-5'"),
        (
            MINIMAL.replace("https://", "ftp://"),
            {"KEY": "k"},
            "providers.openai.base_url: String should match pattern",
        ),
        ("models: [1, 2", {}, "not valid YAML"),
    ],
)
def test_bad_config_names_the_field(text: str, environ: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(text, source="team.yaml", environ=environ)
    assert str(caught.value).startswith("team.yaml: ")
    assert message in str(caught.value)


def test_every_problem_is_listed_with_the_key_it_was_probably_meant_to_be() -> None:
    text = MINIMAL + "pricing:\n  baseline_modle: gpt-4o\nledger: {batch_sise: 3}\n"
    with pytest.raises(ConfigError) as caught:
        parse_config(text, source="team.yaml", environ={"KEY": "k"})
    lines = str(caught.value).splitlines()
    assert lines[0] == "team.yaml: 2 problems:"
    assert sorted(lines[1:]) == [
        "  - ledger.batch_sise: unknown key 'batch_sise' (did you mean 'batch_size'?)",
        "  - pricing.baseline_modle: unknown key 'baseline_modle' (did you mean 'baseline_model'?)",
    ]


def test_yaml_errors_name_the_file_and_the_line() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config("models:\n  x: [1, 2\n", source="team.yaml", environ={})
    assert str(caught.value).startswith("team.yaml: not valid YAML at line 3, column 1: ")
    assert "unicode string" not in str(caught.value)


def test_the_admin_key_can_come_from_the_environment_alone() -> None:
    config = parse_config(MINIMAL, environ={"KEY": "k", "TOLLGATE_ADMIN_KEY": "from-env"})
    assert config.auth.admin_key is not None and config.auth.admin_key.get_secret_value() == "from-env"
    named = parse_config(
        MINIMAL + "auth: {admin_key: from-file}\n", environ={"KEY": "k", "TOLLGATE_ADMIN_KEY": "from-env"}
    )
    assert named.auth.admin_key is not None and named.auth.admin_key.get_secret_value() == "from-file"


def test_the_metrics_token_can_come_from_the_environment() -> None:
    config = parse_config(MINIMAL, environ={"KEY": "k", "TOLLGATE_METRICS_TOKEN": "scrape"})
    token = config.observability.metrics_token
    assert token is not None and token.get_secret_value() == "scrape"


def test_env_default_syntax() -> None:
    config = parse_config(MINIMAL.replace("${KEY}", "${KEY:-fallback}"), environ={})
    key = config.providers["openai"].api_key
    assert key is not None and key.get_secret_value() == "fallback"


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gateway.cli.main", *args], capture_output=True, text=True, timeout=60, env=env
    )


def test_check_config_cli_ok_and_error(tmp_path: Path) -> None:
    good = run_cli("check-config", str(ROOT / "tollgate.example.yaml"), env={**KEYS, "PATH": ""})
    assert good.returncode == 0, good.stderr
    assert "OK (5 providers, 6 models, 2 aliases)" in good.stdout
    bad = tmp_path / "bad.yaml"
    bad.write_text(MINIMAL.replace("openai, price", "nope, price"))
    result = run_cli("check-config", str(bad), env={"KEY": "k", "PATH": ""})
    assert result.returncode == 1
    assert "models.gpt-4o.provider: unknown provider 'nope' (known: openai)" in result.stderr
    assert "Traceback" not in result.stderr


def test_serve_refuses_an_invalid_file_with_the_same_message(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(MINIMAL.replace("openai, price", "nope, price"))
    result = run_cli("serve", "--config", str(bad), "--port", "0", env={"KEY": "k", "PATH": ""})
    assert result.returncode == 1
    assert "models.gpt-4o.provider: unknown provider 'nope' (known: openai)" in result.stderr


def test_embedded_default_uses_sandboxes_only_where_keys_are_missing() -> None:
    assert sandboxes_needed({}) == ["openai", "vllm"]
    assert sandboxes_needed({"OPENAI_API_KEY": "sk"}) == ["vllm"]
    config = embedded_config({"OPENAI_API_KEY": "sk"}, {"vllm": "http://127.0.0.1:1"})
    assert config.providers["openai"].base_url == "https://api.openai.com/v1"
    assert config.providers["local"].base_url == "http://127.0.0.1:1/v1"
    assert config.database.url.startswith("sqlite")
