"""`tollgate local launch-cmd MODEL`: print the `vllm serve` command line for a self-hosted model.

MODEL is a public model name from the YAML config (`--config`, else `$TOLLGATE_CONFIG`): the
command is built from its `launch` section and the rest of its entry (see `LaunchConfig`), so the
server serves the name, context length and batch size the gateway expects. Flags override any
setting. Without a config, or for a MODEL the config does not name, MODEL is the weights' Hugging
Face id or path and the command comes from flags alone, as before configs knew about launches.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Mapping
from typing import Any, TextIO
from urllib.parse import urlsplit

from gateway.config.loader import ConfigError
from gateway.config.loader import load_config as load_config_file
from gateway.config.providers import OpenAICompatibleProvider
from gateway.config.schema import Config, ModelConfig
from gateway.config.self_hosted import GpuConfig
from local_backend.launch import LaunchSpec, SpeculativeSpec, launch_command

COMMANDS = frozenset({"launch-cmd"})
CONFIG_ENV = "TOLLGATE_CONFIG"
_DEFAULT_DRAFT_TOKENS = 5


def add_commands(local_commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `launch-cmd` under the `local` parser's subcommands (next to `cost`)."""
    cmd = local_commands.add_parser(
        "launch-cmd",
        help="print the `vllm serve` command for a local model",
        description="Settings come from the model's entry in the config; flags override them.",
    )
    cmd.add_argument("model", metavar="MODEL", help="a model name from the config, or a HF id / path")
    cmd.add_argument("--config", help=f"YAML config file (default: ${CONFIG_ENV})")
    cmd.add_argument("--replica", type=int, default=0, metavar="N", help="which deployment's port (0)")
    cmd.add_argument("--weights", metavar="ID_OR_PATH", help="the weights to serve (config: launch.model)")
    cmd.add_argument("--served-model-name", metavar="NAME", help="id in /v1/models and in the metrics")
    cmd.add_argument("--port", type=int, help="listen port (config, else the replica's URL, else 8000)")
    cmd.add_argument("--host", help="listen address (vLLM's default: all interfaces)")
    cmd.add_argument("--max-model-len", type=int, metavar="TOKENS", help="context length")
    cmd.add_argument("--gpu-memory-utilization", type=float, metavar="SHARE", help="(0.9)")
    cmd.add_argument("--tensor-parallel-size", type=int, metavar="GPUS", help="(1)")
    cmd.add_argument("--max-num-seqs", type=int, metavar="N", help="batch slots (vLLM's default)")
    cmd.add_argument(
        "--prefix-caching", action=argparse.BooleanOptionalAction, help="automatic prefix caching (on)"
    )
    cmd.add_argument(
        "--no-prompt-tokens-details",
        dest="prompt_tokens_details",
        action="store_false",
        help="do not report cached prompt tokens in usage (the ledger then cannot price cache hits)",
    )
    cmd.add_argument("--api-key-env", metavar="VAR", help="(VLLM_API_KEY)")
    cmd.add_argument("--no-api-key", dest="no_api_key", action="store_true", help="serve without a key")
    cmd.add_argument("--speculative-model", metavar="DRAFT", help="draft model for speculative decoding")
    cmd.add_argument("--num-speculative-tokens", type=int, metavar="N", help="(5)")
    cmd.add_argument("--speculative-method", metavar="METHOD", help="draft_model, eagle3, mtp, ngram, …")
    cmd.add_argument("--no-speculative", action="store_true", help="drop the configured speculation")
    cmd.add_argument("--vllm", default="vllm", metavar="PATH", help="the vllm executable (vllm)")
    cmd.add_argument("--extra-arg", action="append", default=[], metavar="ARG", help="append ARG verbatim")
    cmd.add_argument("--argv", action="store_true", help="print the argument vector as JSON instead")


def configured_settings(config: Config, name: str, *, replica: int = 0) -> dict[str, Any]:
    """`LaunchSpec` keyword arguments for the configured model `name`, filled from its entry.

    ValueError when `name` is not self-hosted (no `launch` section and no vLLM deployment) or
    `replica` is not one of its deployments.
    """
    model = config.models[name]
    launch = model.launch
    deployments = _deployments(name, model)
    # The replicas this can start: the self-hosted deployments (a managed copy of the model is not one).
    hosted = [d for d in deployments if config.self_hosted(d[0])]
    if launch is None and not hosted:
        raise ValueError(
            f"model '{name}' is not self-hosted: it has no 'launch' section and no self-hosted deployment"
        )
    replicas = hosted or deployments
    if not 0 <= replica < len(replicas):
        raise ValueError(
            f"model '{name}' has {len(replicas)} self-hosted deployment(s); --replica {replica} is none"
        )
    provider, upstream, gpu = replicas[replica]
    settings: dict[str, Any] = {"model": upstream, "served_model_name": upstream}
    if "context_window" in model.model_fields_set:
        settings["max_model_len"] = model.context_window
    if gpu is not None:
        settings["tensor_parallel_size"] = gpu.gpus
    if model.fleet is not None:
        settings["max_num_seqs"] = model.fleet.max_num_seqs
    port = _url_port(config, provider)
    if port is not None:
        settings["port"] = port
    if launch is not None:
        given = launch.model_dump(exclude_none=True, exclude={"speculative"})
        settings.update(given)
        if launch.speculative is not None:
            settings["speculative"] = SpeculativeSpec(**launch.speculative.model_dump())
        if launch.api_key_env is None:  # an explicit null: serve without a key
            settings["api_key_env"] = None
    return settings


def flag_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The settings the flags give (flags left out give nothing, so the config's stand)."""
    given = {
        "served_model_name": args.served_model_name,
        "port": args.port,
        "host": args.host,
        "max_model_len": args.max_model_len,
        "gpu_memory_utilization": args.gpu_memory_utilization,
        "tensor_parallel_size": args.tensor_parallel_size,
        "max_num_seqs": args.max_num_seqs,
        "prefix_caching": args.prefix_caching,
        "api_key_env": args.api_key_env,
        "model": args.weights,
    }
    settings = {key: value for key, value in given.items() if value is not None}
    if not args.prompt_tokens_details:
        settings["prompt_tokens_details"] = False
    if args.no_api_key:
        settings["api_key_env"] = None
    return settings


def launch_spec(args: argparse.Namespace, config: Config | None = None) -> tuple[LaunchSpec, bool]:
    """The spec for `args.model`: the config's settings with the flags on top; and whether the
    config knew the model."""
    known = config is not None and args.model in config.models
    settings: dict[str, Any] = {"model": args.model}
    if config is not None and known:
        settings = configured_settings(config, args.model, replica=args.replica)
    settings |= flag_settings(args)
    speculative: SpeculativeSpec | None = settings.pop("speculative", None)
    if args.no_speculative:
        speculative = None
    elif any(
        v is not None for v in (args.speculative_model, args.num_speculative_tokens, args.speculative_method)
    ):
        # A flag changes one setting of the configured speculation and keeps the others.
        tokens = args.num_speculative_tokens
        if tokens is None:
            tokens = speculative.num_speculative_tokens if speculative else _DEFAULT_DRAFT_TOKENS
        speculative = SpeculativeSpec(
            model=args.speculative_model or (speculative.model if speculative else ""),
            num_speculative_tokens=tokens,
            method=args.speculative_method or (speculative.method if speculative else None),
        )
    extra = tuple(settings.pop("extra_args", ())) + tuple(args.extra_arg)
    spec = LaunchSpec(**settings, speculative=speculative, extra_args=extra, executable=args.vllm)
    return spec, known


def run(
    args: argparse.Namespace,
    *,
    out: TextIO | None = None,
    err: TextIO | None = None,
    load_config: Callable[[str], Config] = load_config_file,
    environ: Mapping[str, str] | None = None,
) -> int:
    """Print the command; 0 on success, 1 for an unreadable config, 2 when the settings do not make
    a valid launch spec."""
    out, err = out or sys.stdout, err or sys.stderr
    path = args.config or (os.environ if environ is None else environ).get(CONFIG_ENV)
    try:
        config = load_config(path) if path else None
    except ConfigError as exc:
        err.write(f"invalid config: {exc}\n")
        return 1
    try:
        spec, known = launch_spec(args, config)
        command = launch_command(spec)
    except (ValueError, TypeError) as exc:
        err.write(f"local launch-cmd: {exc}\n")
        return 2
    if config is not None and not known:
        err.write(f"note: '{args.model}' is not a model in {path}; the command comes from flags alone\n")
    out.write((json.dumps(command.argv) if args.argv else command.shell()) + "\n")
    return 0


def _deployments(name: str, model: ModelConfig) -> list[tuple[str, str, GpuConfig | None]]:
    """(provider, upstream model id, GPUs) of each deployment, the `provider` shorthand included
    (its upstream id defaults to the public name, as in the model registry)."""
    if model.deployments:
        return [(d.provider, d.model, d.gpu) for d in model.deployments]
    assert model.provider is not None  # the config model requires one of the two
    return [(model.provider, model.upstream_model or name, None)]


def _url_port(config: Config, name: str) -> int | None:
    """The port of a self-hosted provider's base URL: where the gateway will look for this replica."""
    provider = config.providers.get(name)
    if not isinstance(provider, OpenAICompatibleProvider) or not provider.on_premises:
        return None
    try:
        return urlsplit(provider.base_url).port
    except ValueError:
        return None
