"""The `vllm serve` command line, and `tollgate local launch-cmd` that prints it."""

from __future__ import annotations

import argparse
import io
import json
import pathlib
import shlex
import subprocess

import pytest

import gateway.cli.local as cli_local
from local_backend.launch import LaunchSpec, SpeculativeSpec, launch_command

SPEC = LaunchSpec(
    model="/models/Llama-3.1-8B-Instruct",
    served_model_name="llama-3.1-8b-instruct",
    port=8001,
    max_model_len=16384,
    gpu_memory_utilization=0.85,
    tensor_parallel_size=2,
)


def test_the_command_names_every_configured_setting() -> None:
    assert launch_command(SPEC).argv == [
        "vllm", "serve", "/models/Llama-3.1-8B-Instruct",
        "--served-model-name", "llama-3.1-8b-instruct",
        "--port", "8001",
        "--max-model-len", "16384",
        "--gpu-memory-utilization", "0.85",
        "--tensor-parallel-size", "2",
        "--enable-prefix-caching",
        "--enable-prompt-tokens-details",
        "--api-key", "${VLLM_API_KEY}",
    ]  # fmt: skip


def test_disabled_prefix_caching_is_said_explicitly() -> None:
    argv = launch_command(LaunchSpec(model="m", prefix_caching=False, prompt_tokens_details=False)).argv
    assert "--no-enable-prefix-caching" in argv
    assert "--enable-prefix-caching" not in argv
    assert "--enable-prompt-tokens-details" not in argv


def test_speculative_decoding_is_one_json_argument() -> None:
    spec = LaunchSpec(model="Qwen/Qwen3-8B", speculative=SpeculativeSpec("Qwen/Qwen3-0.6B", 5, "draft_model"))
    argv = launch_command(spec).argv
    config = json.loads(argv[argv.index("--speculative-config") + 1])
    assert config == {"model": "Qwen/Qwen3-0.6B", "num_speculative_tokens": 5, "method": "draft_model"}
    # Without a method vLLM infers it from the draft model.
    bare = SpeculativeSpec("yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", 3)
    assert json.loads(bare.to_json()) == {
        "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
        "num_speculative_tokens": 3,
    }


def test_the_shell_line_expands_the_key_from_the_environment_and_quotes_the_rest() -> None:
    spec = LaunchSpec(
        model="my models/llama", speculative=SpeculativeSpec("draft", 4), api_key_env="LOCAL_KEY"
    )
    line = launch_command(spec).shell()
    assert '--api-key "${LOCAL_KEY}"' in line
    assert "'my models/llama'" in line
    # A real shell gives vLLM the secret and the JSON unchanged, and the line never holds the secret.
    printed = subprocess.run(
        ["sh", "-c", f"printf '%s\\n' {line.removeprefix('vllm serve ')}"],
        env={"LOCAL_KEY": "s3cret"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert printed[0] == "my models/llama"
    assert printed[printed.index("--api-key") + 1] == "s3cret"
    assert json.loads(printed[printed.index("--speculative-config") + 1])["num_speculative_tokens"] == 4
    assert "s3cret" not in line


def test_resolve_fills_references_for_exec() -> None:
    command = launch_command(LaunchSpec(model="m"))
    argv = command.resolve({"VLLM_API_KEY": "k"})
    assert argv[argv.index("--api-key") + 1] == "k"
    with pytest.raises(ValueError, match="VLLM_API_KEY"):
        command.resolve({})
    assert "--api-key" not in launch_command(LaunchSpec(model="m", api_key_env=None)).argv


def test_extra_args_host_and_batch_size_pass_through() -> None:
    spec = LaunchSpec(model="m", host="0.0.0.0", max_num_seqs=64, extra_args=("--enforce-eager",))
    argv = launch_command(spec).argv
    assert argv[argv.index("--host") + 1] == "0.0.0.0"
    assert argv[argv.index("--max-num-seqs") + 1] == "64"
    assert argv[-1] == "--enforce-eager"


@pytest.mark.parametrize(
    "bad",
    [
        {"model": ""},
        {"model": "m", "port": 0},
        {"model": "m", "gpu_memory_utilization": 1.5},
        {"model": "m", "tensor_parallel_size": 0},
        {"model": "m", "max_model_len": 0},
        {"model": "m", "api_key_env": "${KEY}"},
    ],
)
def test_nonsense_specs_are_refused(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        LaunchSpec(**bad)  # type: ignore[arg-type]


def parse(*argv: str) -> argparse.Namespace:
    """The parser as `tollgate` builds it: `local` with its subcommands, `launch-cmd` among them."""
    parser = argparse.ArgumentParser(prog="tollgate")
    commands = parser.add_subparsers(dest="command", required=True)
    local = commands.add_parser("local")
    cli_local.add_commands(local.add_subparsers(dest="local_command", required=True))
    return parser.parse_args(["local", *argv])


def run(*argv: str, environ: dict[str, str] | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli_local.run(parse(*argv), out=out, err=err, environ=environ or {})
    return code, out.getvalue(), err.getvalue()


def test_launch_cmd_prints_a_shell_line() -> None:
    code, out, _ = run(
        "launch-cmd", "Qwen/Qwen3-8B", "--port", "8002", "--served-model-name", "qwen3-8b",
        "--tensor-parallel-size", "2", "--speculative-model", "Qwen/Qwen3-0.6B",
        "--num-speculative-tokens", "4", "--no-prefix-caching",
    )  # fmt: skip
    assert code == 0
    assert out.startswith("vllm serve Qwen/Qwen3-8B --served-model-name qwen3-8b --port 8002 ")
    assert '--api-key "${VLLM_API_KEY}"' in out
    assert "--no-enable-prefix-caching" in out
    words = shlex.split(out.replace('"${VLLM_API_KEY}"', "KEY"))
    assert json.loads(words[words.index("--speculative-config") + 1]) == {
        "model": "Qwen/Qwen3-0.6B",
        "num_speculative_tokens": 4,
    }


def test_launch_cmd_prints_argv_as_json_and_refuses_bad_flags() -> None:
    code, out, _ = run("launch-cmd", "m", "--argv", "--no-api-key")
    assert code == 0
    assert json.loads(out)[:3] == ["vllm", "serve", "m"]
    code, out, err = run("launch-cmd", "m", "--gpu-memory-utilization", "2")
    assert (code, out) == (2, "")
    assert "gpu_memory_utilization" in err


CONFIG = """
providers:
  vllm-a: {type: vllm, base_url: "http://10.0.0.5:8001/v1"}
  vllm-b: {type: openai_compatible, base_url: "http://10.0.0.6:8002/v1", self_hosted: true}
  openai: {type: openai, base_url: "https://api.openai.com/v1", api_key: sk-test}
models:
  llama-local:
    tier: local
    context_window: 16384
    deployments:
      - {provider: vllm-a, model: llama-3.1-8b-instruct, gpu: {gpu_hour_usd: 2, gpus: 2, input_tokens_per_second: 9000, output_tokens_per_second: 1500}}
      # A managed copy of the same model: not a replica, so --replica counts past it.
      - {provider: openai, model: meta-llama/Llama-3.1-8B-Instruct-Turbo}
      - {provider: vllm-b, model: llama-3.1-8b-instruct}
    fleet: {max_num_seqs: 128}
    launch:
      model: /models/Llama-3.1-8B-Instruct
      gpu_memory_utilization: 0.85
      speculative: {model: yuhuili/EAGLE3-LLaMA3.1-Instruct-8B, num_speculative_tokens: 3, method: eagle3}
  qwen-local:
    provider: vllm-a
    upstream_model: Qwen/Qwen3-8B
  gpt:
    provider: openai
    upstream_model: gpt-4o
"""


@pytest.fixture
def config_file(tmp_path: pathlib.Path) -> str:
    path = tmp_path / "tollgate.yaml"
    path.write_text(CONFIG)
    return str(path)


def argv_of(out: str) -> list[str]:
    return shlex.split(out.replace('"${VLLM_API_KEY}"', "${VLLM_API_KEY}"))


def test_launch_cmd_builds_the_command_from_the_configured_model(config_file: str) -> None:
    code, out, err = run("launch-cmd", "llama-local", "--config", config_file)
    assert (code, err) == (0, "")
    argv = argv_of(out)
    assert argv[:3] == ["vllm", "serve", "/models/Llama-3.1-8B-Instruct"]
    # The server serves the name the gateway sends, on the port the gateway calls, with the context
    # window, batch slots and GPUs the config prices and routes by.
    assert argv[argv.index("--served-model-name") + 1] == "llama-3.1-8b-instruct"
    assert argv[argv.index("--port") + 1] == "8001"
    assert argv[argv.index("--max-model-len") + 1] == "16384"
    assert argv[argv.index("--max-num-seqs") + 1] == "128"
    assert argv[argv.index("--tensor-parallel-size") + 1] == "2"
    assert argv[argv.index("--gpu-memory-utilization") + 1] == "0.85"
    assert "--enable-prefix-caching" in argv
    assert json.loads(argv[argv.index("--speculative-config") + 1]) == {
        "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
        "num_speculative_tokens": 3,
        "method": "eagle3",
    }


def test_flags_override_the_config_and_replica_picks_the_port(config_file: str) -> None:
    code, out, _ = run(
        "launch-cmd", "llama-local", "--replica", "1", "--max-model-len", "8192",
        "--no-prefix-caching", "--num-speculative-tokens", "5", "--gpu-memory-utilization", "0.7",
        environ={"TOLLGATE_CONFIG": config_file},
    )  # fmt: skip
    assert code == 0
    argv = argv_of(out)
    assert argv[argv.index("--port") + 1] == "8002"  # vllm-b's URL: the second self-hosted deployment
    assert argv[2] == "/models/Llama-3.1-8B-Instruct"
    assert argv[argv.index("--max-model-len") + 1] == "8192"
    assert argv[argv.index("--gpu-memory-utilization") + 1] == "0.7"
    assert "--no-enable-prefix-caching" in argv
    speculative = json.loads(argv[argv.index("--speculative-config") + 1])
    assert speculative["num_speculative_tokens"] == 5
    assert speculative["model"] == "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"  # the rest stays configured
    code, out, _ = run("launch-cmd", "llama-local", "--config", config_file, "--no-speculative")
    assert "--speculative-config" not in argv_of(out)


def test_a_vllm_model_without_a_launch_section_serves_its_upstream_id(config_file: str) -> None:
    code, out, _ = run("launch-cmd", "qwen-local", "--config", config_file, "--argv", "--no-api-key")
    assert code == 0
    argv = json.loads(out)
    assert argv[:3] == ["vllm", "serve", "Qwen/Qwen3-8B"]
    assert argv[argv.index("--served-model-name") + 1] == "Qwen/Qwen3-8B"
    assert "--max-model-len" not in argv  # context_window left at its default: the model's own
    assert "--api-key" not in argv


def test_managed_models_and_missing_replicas_are_refused(config_file: str) -> None:
    code, out, err = run("launch-cmd", "gpt", "--config", config_file)
    assert (code, out) == (2, "")
    assert "not self-hosted" in err
    code, _, err = run("launch-cmd", "llama-local", "--config", config_file, "--replica", "2")
    assert code == 2
    assert "2 self-hosted deployment(s); --replica 2" in err


def test_an_unconfigured_model_falls_back_to_flags_and_says_so(config_file: str) -> None:
    code, out, err = run("launch-cmd", "mistralai/Mistral-7B-Instruct-v0.3", "--config", config_file)
    assert code == 0
    assert out.startswith("vllm serve mistralai/Mistral-7B-Instruct-v0.3 --port 8000 ")
    assert "not a model in" in err


def test_a_bad_config_file_is_reported(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("models: {x: {provider: p, launch: {gpu_memory_utilization: 3}}}\nproviders: {}\n")
    code, out, err = run("launch-cmd", "x", "--config", str(path))
    assert (code, out) == (1, "")
    assert "gpu_memory_utilization" in err
