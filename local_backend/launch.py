"""The `vllm serve` command line for one self-hosted model, built from a `LaunchSpec` as plain data
(vLLM itself is never imported: it is an optional extra that only GPU hosts install).

Flags follow vLLM V1's `vllm serve` (docs.vllm.ai, serving/engine args):

- `--enable-prefix-caching` is V1's default and is still emitted, so the command means the same
  on an older V0 server; disabling emits `--no-enable-prefix-caching`.
- `--enable-prompt-tokens-details` is off by default in vLLM; without it a response's
  `usage.prompt_tokens_details.cached_tokens` is missing and the ledger cannot price cache hits.
- `--api-key` is written as a reference to an environment variable (`"${VLLM_API_KEY}"` in the
  shell form), so the printed command never holds the secret. vLLM checks it on `/v1` paths only.
- `--speculative-config` takes JSON: `{"model": DRAFT, "num_speculative_tokens": N}` plus an
  optional `"method"` (`draft_model`, `eagle`, `eagle3`, `mtp`, `ngram`, ...); without one vLLM
  infers it from the draft model. Some V1 releases (about 0.9 to 0.12) reject a plain draft model
  (`method` draft_model) and serve only EAGLE/MTP/n-gram speculators; check the target version.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True, slots=True)
class SpeculativeSpec:
    model: str
    num_speculative_tokens: int
    method: str | None = None

    def __post_init__(self) -> None:
        if not self.model or self.num_speculative_tokens < 1:
            raise ValueError("speculative decoding needs a draft model and num_speculative_tokens >= 1")

    def to_json(self) -> str:
        config: dict[str, str | int] = {
            "model": self.model,
            "num_speculative_tokens": self.num_speculative_tokens,
        }
        if self.method:
            config["method"] = self.method
        return json.dumps(config)


@dataclass(frozen=True, slots=True)
class LaunchSpec:
    """How to start one vLLM server for a configured local model (`None`: vLLM's own default)."""

    model: str  # a Hugging Face id or a local path
    served_model_name: str | None = None  # the /v1/models id and the metrics' model_name label
    port: int = 8000
    host: str | None = None
    max_model_len: int | None = None
    gpu_memory_utilization: float = 0.9
    tensor_parallel_size: int = 1
    max_num_seqs: int | None = None
    prefix_caching: bool = True
    prompt_tokens_details: bool = True
    api_key_env: str | None = "VLLM_API_KEY"
    speculative: SpeculativeSpec | None = None
    extra_args: tuple[str, ...] = ()
    executable: str = "vllm"

    def __post_init__(self) -> None:
        if not self.model:
            raise ValueError("a model path or id is required")
        if not 1 <= self.port <= 65535:
            raise ValueError(f"port must be 1-65535, not {self.port}")
        if not 0 < self.gpu_memory_utilization <= 1:
            raise ValueError("gpu_memory_utilization must be in (0, 1]")
        if self.tensor_parallel_size < 1:
            raise ValueError("tensor_parallel_size must be at least 1")
        for name, value in (("max_model_len", self.max_model_len), ("max_num_seqs", self.max_num_seqs)):
            if value is not None and value < 1:
                raise ValueError(f"{name} must be positive")
        if self.api_key_env is not None and not _ENV_NAME.fullmatch(self.api_key_env):
            raise ValueError(f"api_key_env must be an environment variable name, not {self.api_key_env!r}")
        object.__setattr__(self, "extra_args", tuple(self.extra_args))


@dataclass(frozen=True, slots=True)
class EnvRef:
    """An argument whose value is read from an environment variable when the command runs."""

    name: str

    def __str__(self) -> str:
        return "${" + self.name + "}"


@dataclass(frozen=True, slots=True)
class LaunchCommand:
    parts: tuple[str | EnvRef, ...]

    @property
    def argv(self) -> list[str]:
        """The argument vector, environment references left as `${NAME}` (safe to print or log)."""
        return [str(part) for part in self.parts]

    def resolve(self, environ: Mapping[str, str]) -> list[str]:
        """The argument vector to exec, references replaced from `environ`."""
        missing = sorted({p.name for p in self.parts if isinstance(p, EnvRef) and p.name not in environ})
        if missing:
            raise ValueError(f"environment variables not set: {', '.join(missing)}")
        return [environ[part.name] if isinstance(part, EnvRef) else part for part in self.parts]

    def shell(self) -> str:
        """One line for a POSIX shell; references become `"${NAME}"` so the shell expands them."""
        return " ".join(f'"{part}"' if isinstance(part, EnvRef) else shlex.quote(part) for part in self.parts)


def launch_command(spec: LaunchSpec) -> LaunchCommand:
    parts: list[str | EnvRef] = [spec.executable, "serve", spec.model]
    if spec.served_model_name:
        parts += ["--served-model-name", spec.served_model_name]
    if spec.host:
        parts += ["--host", spec.host]
    parts += ["--port", str(spec.port)]
    if spec.max_model_len is not None:
        parts += ["--max-model-len", str(spec.max_model_len)]
    parts += ["--gpu-memory-utilization", f"{spec.gpu_memory_utilization:g}"]
    parts += ["--tensor-parallel-size", str(spec.tensor_parallel_size)]
    if spec.max_num_seqs is not None:
        parts += ["--max-num-seqs", str(spec.max_num_seqs)]
    parts.append("--enable-prefix-caching" if spec.prefix_caching else "--no-enable-prefix-caching")
    if spec.prompt_tokens_details:
        parts.append("--enable-prompt-tokens-details")
    if spec.api_key_env is not None:
        parts += ["--api-key", EnvRef(spec.api_key_env)]
    if spec.speculative is not None:
        parts += ["--speculative-config", spec.speculative.to_json()]
    parts += spec.extra_args
    return LaunchCommand(tuple(parts))


__all__ = ["EnvRef", "LaunchCommand", "LaunchSpec", "SpeculativeSpec", "launch_command"]
