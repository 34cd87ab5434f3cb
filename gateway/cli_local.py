"""`tollgate local launch-cmd MODEL`: print the `vllm serve` command line for a self-hosted model.

The launch spec comes from flags for now; `launch_spec(args)` is the one place that builds it, so
reading it from a model's config entry later changes only that function.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TextIO

from local_backend.launch import LaunchSpec, SpeculativeSpec, launch_command

COMMANDS = frozenset({"launch-cmd"})


def add_commands(local_commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `launch-cmd` under the `local` parser's subcommands (next to `cost`)."""
    cmd = local_commands.add_parser("launch-cmd", help="print the `vllm serve` command for a local model")
    cmd.add_argument("model", metavar="MODEL", help="Hugging Face model id or local path")
    cmd.add_argument("--served-model-name", metavar="NAME", help="id in /v1/models and in the metrics")
    cmd.add_argument("--port", type=int, default=8000, help="listen port (8000)")
    cmd.add_argument("--host", help="listen address (vLLM's default: all interfaces)")
    cmd.add_argument("--max-model-len", type=int, metavar="TOKENS", help="context length (model's own)")
    cmd.add_argument("--gpu-memory-utilization", type=float, default=0.9, metavar="SHARE", help="(0.9)")
    cmd.add_argument("--tensor-parallel-size", type=int, default=1, metavar="GPUS", help="(1)")
    cmd.add_argument("--max-num-seqs", type=int, metavar="N", help="batch slots (vLLM's default)")
    cmd.add_argument(
        "--no-prefix-caching", dest="prefix_caching", action="store_false", help="turn prefix caching off"
    )
    cmd.add_argument(
        "--no-prompt-tokens-details",
        dest="prompt_tokens_details",
        action="store_false",
        help="do not report cached prompt tokens in usage (the ledger then cannot price cache hits)",
    )
    cmd.add_argument("--api-key-env", default="VLLM_API_KEY", metavar="VAR", help="(VLLM_API_KEY)")
    cmd.add_argument("--no-api-key", dest="api_key_env", action="store_const", const=None)
    cmd.add_argument("--speculative-model", metavar="DRAFT", help="draft model for speculative decoding")
    cmd.add_argument("--num-speculative-tokens", type=int, default=5, metavar="N", help="(5)")
    cmd.add_argument("--speculative-method", metavar="METHOD", help="draft_model, eagle3, mtp, ngram, …")
    cmd.add_argument("--vllm", default="vllm", metavar="PATH", help="the vllm executable (vllm)")
    cmd.add_argument("--extra-arg", action="append", default=[], metavar="ARG", help="append ARG verbatim")
    cmd.add_argument("--argv", action="store_true", help="print the argument vector as JSON instead")


def launch_spec(args: argparse.Namespace) -> LaunchSpec:
    speculative = None
    if args.speculative_model:
        speculative = SpeculativeSpec(
            model=args.speculative_model,
            num_speculative_tokens=args.num_speculative_tokens,
            method=args.speculative_method,
        )
    return LaunchSpec(
        model=args.model,
        served_model_name=args.served_model_name,
        port=args.port,
        host=args.host,
        max_model_len=args.max_model_len,
        gpu_memory_utilization=args.gpu_memory_utilization,
        tensor_parallel_size=args.tensor_parallel_size,
        max_num_seqs=args.max_num_seqs,
        prefix_caching=args.prefix_caching,
        prompt_tokens_details=args.prompt_tokens_details,
        api_key_env=args.api_key_env,
        speculative=speculative,
        extra_args=tuple(args.extra_arg),
        executable=args.vllm,
    )


def run(args: argparse.Namespace, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Print the command; 0 on success, 2 when the flags do not make a valid launch spec."""
    out, err = out or sys.stdout, err or sys.stderr
    try:
        command = launch_command(launch_spec(args))
    except ValueError as exc:
        err.write(f"local launch-cmd: {exc}\n")
        return 2
    out.write((json.dumps(command.argv) if args.argv else command.shell()) + "\n")
    return 0
