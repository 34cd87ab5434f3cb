"""SandboxServer (sync and async), the CLI, and the rule that sandbox imports no Tollgate code."""

from __future__ import annotations

import ast
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import openai

from sandbox.__main__ import _parser
from sandbox.config import SandboxConfig
from sandbox.server import SandboxServer

SANDBOX = Path(__file__).resolve().parents[2] / "sandbox"
FORBIDDEN = {"gateway", "providers", "local_backend", "pricing", "migrations", "tests"}


def test_sandbox_imports_no_tollgate_package() -> None:
    for path in SANDBOX.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            for name in names:
                assert name.split(".")[0] not in FORBIDDEN, f"{path.relative_to(SANDBOX)} imports {name}"


async def test_async_context_manager() -> None:
    async with SandboxServer(dialect="vllm", profile="instant") as sb:
        async with openai.AsyncOpenAI(base_url=sb.base_url + "/v1", api_key="x", max_retries=0) as client:
            completion = await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}]
            )
        assert completion.choices[0].message.content
        assert sb.app.stats.models["m"].prompt_tokens > 0


def test_server_stops_and_frees_its_port() -> None:
    with SandboxServer(profile="instant") as sb:
        url = sb.base_url
        assert httpx.get(url + "/v1/models").status_code == 200
    try:
        httpx.get(url + "/v1/models", timeout=0.5)
    except httpx.ConnectError:
        pass
    else:
        raise AssertionError("server still answering after stop")


def test_cli_prints_its_address_and_serves() -> None:
    command = [sys.executable, "-m", "sandbox", "--port", "0", "--dialect", "vllm",
               "--instant", "--model", "llama", "--seed", "7"]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert "dialect=vllm" in line and "profile=instant" in line
        url = line.rsplit(" ", 1)[-1].strip()
        for _ in range(200):
            try:
                models = httpx.get(url + "/v1/models", timeout=1.0).json()
                break
            except httpx.ConnectError:
                continue
        assert [m["id"] for m in models["data"]] == ["llama"]
    finally:
        process.terminate()
        process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()
    # uvicorn shuts down gracefully, then re-raises SIGTERM so the exit status says why.
    assert process.returncode in (0, -signal.SIGTERM)


def test_managed_api_dialects_default_to_the_managed_profile() -> None:
    for dialect in ("anthropic", "gemini"):
        config = SandboxConfig(dialect=dialect)
        assert (config.profile_name, config.num_seqs) == ("managed", None)
    assert SandboxConfig(dialect="anthropic").cache_minimum == 1024
    assert SandboxConfig(dialect="gemini").cache_minimum == 2048
    args = _parser().parse_args(["--dialect", "gemini", "--cache-min-tokens", "4096"])
    assert (args.dialect, args.cache_min_tokens) == ("gemini", 4096)
