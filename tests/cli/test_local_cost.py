"""`tollgate local cost` starts from the config's gpu: block: flags override it, and only the figures
that neither gives are asked for, by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.conftest import Tollgate, one_line_error

CONFIG = """
providers:
  local-vllm: {type: vllm, base_url: "http://127.0.0.1:8000/v1"}
  openai: {type: openai, base_url: "https://api.openai.com/v1"}
models:
  llama:
    tier: local
    deployments:
      - provider: local-vllm
        model: llama-3.1-8b-instruct
        gpu: {gpu_hour_usd: "2.50", gpus: 1, input_tokens_per_second: 20000, output_tokens_per_second: 1500}
  gpt-4o:
    provider: openai
    price: {input_per_mtok: "2.50", output_per_mtok: "10"}
pricing: {baseline_model: gpt-4o}
"""
SECOND_GPU_MODEL = """
  qwen:
    deployments:
      - provider: local-vllm
        model: qwen
        gpu: {gpu_hour_usd: "1", input_tokens_per_second: 10000, output_tokens_per_second: 900}
"""


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "tollgate.yaml"
    path.write_text(CONFIG)
    return path


def test_the_config_gpu_block_is_enough(tollgate: Tollgate, config: Path) -> None:
    result = tollgate("local", "cost", "--config", str(config))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[:2] == [
        "from the config: the gpu: block of llama (deployment on local-vllm)",
        "GPU deployment: 1 x $2.50/GPU-hour = $1825/month (730 h)",
    ]
    # $2.50/h at the default 60% busy against the config's baseline gpt-4o at 3:1 (the same figures
    # tests/pricing/test_cli.py derives from flags).
    assert "  input  $0.05787037\n  output $0.771604938\n" in result.stdout
    assert "break-even: 417,142,858 tokens/month; above it self-hosting is cheaper" in result.stdout


def test_a_flag_overrides_one_figure_of_the_block(tollgate: Tollgate, config: Path) -> None:
    result = tollgate(
        "local", "cost", "llama", "--gpus", "2", "--utilisation", "0.3", "--config", str(config)
    )
    assert result.returncode == 0, result.stderr
    assert "GPU deployment: 2 x $2.50/GPU-hour = $3650/month (730 h)\n" in result.stdout
    assert "output tokens/s; utilisation 0.3\n" in result.stdout


def test_the_config_from_the_environment_is_read_too(tollgate: Tollgate, config: Path) -> None:
    result = tollgate("local", "cost", TOLLGATE_CONFIG=str(config))
    assert result.returncode == 0 and "the gpu: block of llama" in result.stdout, result.stderr


def test_without_config_or_flags_the_missing_figures_are_named(tollgate: Tollgate) -> None:
    line = one_line_error(tollgate("local", "cost", "--gpu-hour", "2", "--gpus", "1"), code=2)
    assert line == (
        "local cost needs --input-tps, --output-tps (no config was given): give them, or name a model "
        "whose gpu: block has them: `tollgate local cost MODEL --config FILE`"
    )


def test_a_config_without_a_gpu_block_says_so(tollgate: Tollgate, tmp_path: Path) -> None:
    path = tmp_path / "managed.yaml"
    path.write_text("providers: {}\nmodels: {}\n")
    line = one_line_error(tollgate("local", "cost", "--config", str(path)), code=2)
    assert line.startswith(
        "local cost needs --gpu-hour, --gpus, --input-tps, --output-tps (the config has no"
    )


def test_a_model_without_a_gpu_block_names_those_with_one(tollgate: Tollgate, config: Path) -> None:
    line = one_line_error(tollgate("local", "cost", "gpt-4o", "--config", str(config)), code=2)
    assert line == "model 'gpt-4o' has no gpu: block (models with one: llama)"
    line = one_line_error(tollgate("local", "cost", "mistral", "--config", str(config)), code=2)
    assert line == "no model 'mistral' in the config (models with a gpu: block: llama)"


def test_several_gpu_models_ask_which(tollgate: Tollgate, config: Path) -> None:
    config.write_text(CONFIG.replace("  gpt-4o:\n", SECOND_GPU_MODEL.lstrip("\n") + "  gpt-4o:\n"))
    line = one_line_error(tollgate("local", "cost", "--config", str(config)), code=2)
    assert line == (
        "the config prices several models by GPU (llama, qwen): name one, e.g. `tollgate local cost llama`"
    )
    result = tollgate("local", "cost", "qwen", "--config", str(config))
    assert result.returncode == 0 and "1 x $1/GPU-hour" in result.stdout, result.stderr
