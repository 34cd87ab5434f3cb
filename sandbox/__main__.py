"""Command line: ``python -m sandbox --port 9000 --dialect openai|vllm|anthropic|gemini [options]``."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import uvicorn

from sandbox.app import create_app
from sandbox.config import DIALECTS, SandboxConfig
from sandbox.core.latency import PROFILES
from sandbox.server import bind_socket, uvicorn_config


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m sandbox", description="Tollgate's upstream LLM API emulator."
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9000, help="0 picks a free port")
    parser.add_argument("--dialect", choices=DIALECTS, default="openai")
    parser.add_argument(
        "--profile",
        choices=sorted(PROFILES),
        help="latency model (default: local for vllm, managed for the others)",
    )
    parser.add_argument("--instant", action="store_true", help="same as --profile instant")
    parser.add_argument("--seed", type=int, default=0, help="seed of every generated text")
    parser.add_argument(
        "--model",
        action="append",
        default=[],
        dest="models",
        help="a served model (repeatable); without any, every model name is accepted",
    )
    parser.add_argument(
        "--fault-rate", type=float, default=0.0, help="share of random overloads (503; 529 on anthropic)"
    )
    parser.add_argument(
        "--prompt-tokens-details",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="vllm: report prefix-cache hits as usage.prompt_tokens_details.cached_tokens",
    )
    parser.add_argument("--cache-blocks", type=int, default=16_384, help="prefix cache size")
    parser.add_argument(
        "--cache-min-tokens",
        type=int,
        help="shortest cached prompt prefix (default: 0 vllm, 1024 openai/anthropic, 2048 gemini)",
    )
    parser.add_argument("--max-num-seqs", type=int, help="concurrent requests before queueing")
    parser.add_argument("--max-model-len", type=int, help="context window in tokens")
    parser.add_argument("--log-level", default="warning")
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the flags, bind the port, say where we are and serve until interrupted."""
    args = _parser().parse_args(argv)
    config = SandboxConfig(
        dialect=args.dialect,
        profile="instant" if args.instant else args.profile,
        seed=args.seed,
        models=tuple(args.models),
        fault_rate=args.fault_rate,
        prompt_tokens_details=args.prompt_tokens_details,
        cache_blocks=args.cache_blocks,
        max_num_seqs=args.max_num_seqs,
        max_model_len=args.max_model_len,
        cache_min_tokens=args.cache_min_tokens,
    )
    sock = bind_socket(args.host, args.port)
    host, port = sock.getsockname()[:2]
    models = ", ".join(config.models) or "any"
    print(
        f"sandbox: dialect={config.dialect} profile={config.profile_name} "
        f"models={models} listening on http://{host}:{port}",
        flush=True,
    )
    server = uvicorn.Server(uvicorn_config(create_app(config), log_level=args.log_level))
    server.run(sockets=[sock])


if __name__ == "__main__":
    main()
