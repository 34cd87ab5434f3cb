"""``POST /v1/completions``, the legacy text completions endpoint, as api.openai.com and vLLM answer it.

OpenAI serves it for its instruct and base models only (gpt-3.5-turbo-instruct, davinci-002,
babbage-002): a chat model's name gets the 404 it sends ("This is a chat model and not supported in
the v1/completions endpoint"). vLLM serves any model on it. Both default ``max_tokens`` to 16, take
``prompt`` as a string, a list of strings or token ids, and answer ``text_completion`` objects, whole
or as chunks (``finish_reason`` null until the last; with ``stream_options.include_usage``, ``usage``
null on every chunk and a final ``choices: []`` chunk with the usage).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from hashlib import blake2b
from typing import Any

import orjson

from sandbox.config import SandboxConfig
from sandbox.core.asgi import Exchange
from sandbox.core.engine import Engine, GenerationRequest, Plan
from sandbox.core.sse import SSEWriter, StreamCut
from sandbox.core.tokens import Prompt, Tokenizer
from sandbox.openai.errors import ApiError, error_body, fault_error
from sandbox.openai.request import int_option, require_model, stop_sequences

__all__ = ["OpenAICompletions", "is_chat_only"]

DEFAULT_MAX_TOKENS = 16
_COMPLETION_MODELS = ("davinci", "babbage")


def is_chat_only(model: str) -> bool:
    """Whether api.openai.com refuses this model on /v1/completions (all but instruct and base ones)."""
    name = model.lower()
    return "instruct" not in name and not name.startswith(_COMPLETION_MODELS)


@dataclass(frozen=True, slots=True)
class CompletionParams:
    generation: GenerationRequest
    prompts: int
    echo: tuple[str, ...]
    stream: bool
    include_usage: bool


def _prompts(value: object) -> list[str]:
    if value is None:
        raise ApiError(
            400, "Missing required parameter: 'prompt'.", param="prompt", code="missing_required_parameter"
        )
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and value and all(isinstance(p, str) for p in value):
        return list(value)
    if (
        isinstance(value, list)
        and value
        and all(isinstance(t, int) and not isinstance(t, bool) for t in value)
    ):
        return [" ".join(str(t) for t in value)]
    if isinstance(value, list) and value and all(isinstance(p, list) for p in value):
        return [" ".join(str(t) for t in p) for p in value]
    raise ApiError(
        400,
        "Invalid type for 'prompt': expected a string, an array of strings, an array of integers "
        "or an array of arrays of integers.",
        param="prompt",
        code="invalid_type",
    )


def from_completion_request(body: object, *, tokenizer: Tokenizer, max_model_len: int) -> CompletionParams:
    model = require_model(body)
    assert isinstance(body, Mapping)
    texts = _prompts(body.get("prompt"))
    tokens: list[str] = []
    for text in texts:
        tokens += tokenizer.tokens(text)
    digest = int.from_bytes(blake2b("\x00".join(texts).encode(), digest_size=8).digest(), "little")
    max_tokens = int_option(body, "max_tokens", 0, max_model_len)
    max_tokens = DEFAULT_MAX_TOKENS if max_tokens is None else max_tokens
    if len(tokens) + max_tokens > max_model_len:
        raise ApiError(
            400,
            f"This model's maximum context length is {max_model_len} tokens, however you requested "
            f"{len(tokens) + max_tokens} tokens ({len(tokens)} in your prompt; {max_tokens} for the "
            "completion). Please reduce your prompt; or completion length.",
            param="prompt",
            code="context_length_exceeded",
        )
    stream = body.get("stream") is True
    options = body.get("stream_options")
    if options is not None and not stream:
        raise ApiError(
            400,
            "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
            param="stream_options",
        )
    n = int_option(body, "n", 1, 128) or 1
    seed = body.get("seed")
    generation = GenerationRequest(
        model=model,
        prompt=Prompt(tokens=tokens, digest=digest),
        n=n * len(texts),
        max_tokens=max_tokens,
        stop=stop_sequences(body.get("stop")),
        seed=seed if isinstance(seed, int) and not isinstance(seed, bool) else None,
    )
    echo = tuple(texts[i // n] for i in range(n * len(texts))) if body.get("echo") is True else ()
    return CompletionParams(
        generation=generation,
        prompts=len(texts),
        echo=echo,
        stream=stream,
        include_usage=isinstance(options, Mapping) and options.get("include_usage") is True,
    )


class OpenAICompletions:
    """The endpoint for one dialect flavour (``vllm`` or ``openai``)."""

    def __init__(
        self,
        config: SandboxConfig,
        engine: Engine,
        tokenizer: Tokenizer,
        check_model: Callable[[str], None],
        headers: Callable[[float], list[tuple[str, str]]],
    ) -> None:
        self.config = config
        self.engine = engine
        self.tokenizer = tokenizer
        self.vllm = config.dialect == "vllm"
        self._check_model = check_model
        self._headers = headers

    async def handle(self, ex: Exchange) -> None:
        started = time.monotonic()
        params = from_completion_request(
            ex.payload, tokenizer=self.tokenizer, max_model_len=self.config.model_len
        )
        model = params.generation.model
        self._check_model(model)
        if not self.vllm and is_chat_only(model):
            raise ApiError(
                404,
                "This is a chat model and not supported in the v1/completions endpoint. Did you mean "
                "to use v1/chat/completions?",
                param="model",
            )
        writer = _Writer(model=model, vllm=self.vllm, include_usage=params.include_usage, echo=params.echo)
        async with self.engine.run(params.generation) as run:
            if params.stream:
                await self._stream(ex, writer, run.plan, run, started)
                return
            await run.until_done()
            body = writer.whole(run.plan)
            run.finish()
        await ex.respond(200, body, headers=self._headers(started))

    async def _stream(self, ex: Exchange, writer: _Writer, plan: Plan, run: Any, started: float) -> None:
        error = fault_error(ex.fault, model=writer.model) if ex.fault else None
        sse = SSEWriter(ex, ex.fault, error_event=error_body(error, vllm=self.vllm) if error else b"")
        watcher = None if run.instant else asyncio.ensure_future(ex.disconnected())
        try:
            await run.until_token(0)
            await ex.start_stream(headers=self._headers(started))
            for choice in plan.choices:
                if writer.echo:
                    await sse.event(writer.chunk(choice.index, writer.echo[choice.index], None))
            step = 4 if run.instant else 1
            longest = max((len(c.pieces) for c in plan.choices), default=0)
            for pos in range(0, longest, step):
                if pos:
                    await run.until_token(pos)
                if watcher is not None and watcher.done():
                    run.finish(aborted=True)
                    return
                for choice in plan.choices:
                    if pos < len(choice.pieces):
                        text = "".join(choice.pieces[pos : pos + step])
                        await sse.event(writer.chunk(choice.index, text, None))
            for choice in plan.choices:
                await sse.event(writer.chunk(choice.index, "", choice.finish_reason))
            if writer.include_usage:
                await sse.event(writer.usage_chunk(plan))
            await sse.close()
            run.finish()
        except StreamCut:
            run.finish(aborted=True)
        finally:
            if watcher is not None:
                watcher.cancel()


class _Writer:
    def __init__(self, *, model: str, vllm: bool, include_usage: bool, echo: tuple[str, ...]) -> None:
        self.model = model
        self.vllm = vllm
        self.include_usage = include_usage
        self.echo = echo
        self.id = "cmpl-" + (os.urandom(16).hex() if vllm else _base62(29))
        self.created = int(time.time())

    def _head(self) -> dict[str, Any]:
        return {"id": self.id, "object": "text_completion", "created": self.created, "model": self.model}

    def _usage(self, plan: Plan) -> dict[str, Any]:
        usage: dict[str, Any] = {
            "prompt_tokens": plan.prompt_tokens,
            "completion_tokens": plan.completion_tokens,
            "total_tokens": plan.prompt_tokens + plan.completion_tokens,
        }
        if self.vllm:
            usage["prompt_tokens_details"] = None
        return usage

    def _choice(self, index: int, text: str, finish: str | None) -> dict[str, Any]:
        choice: dict[str, Any] = {"text": text, "index": index, "logprobs": None, "finish_reason": finish}
        if self.vllm:
            choice.update(stop_reason=None, prompt_logprobs=None)
        return choice

    def whole(self, plan: Plan) -> bytes:
        body = self._head()
        prefix = self.echo or ("",) * len(plan.choices)
        body["choices"] = [
            self._choice(c.index, prefix[c.index] + c.text, c.finish_reason) for c in plan.choices
        ]
        body["usage"] = self._usage(plan)
        if self.vllm:
            body["kv_transfer_params"] = None
        else:
            body["system_fingerprint"] = None
        return orjson.dumps(body)

    def chunk(self, index: int, text: str, finish: str | None) -> bytes:
        body = self._head()
        body["choices"] = [self._choice(index, text, finish)]
        if self.include_usage and not self.vllm:
            body["usage"] = None
        return orjson.dumps(body)

    def usage_chunk(self, plan: Plan) -> bytes:
        body = self._head()
        body["choices"] = []
        body["usage"] = self._usage(plan)
        return orjson.dumps(body)


_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def _base62(length: int) -> str:
    return "".join(_ALPHABET[b % 62] for b in os.urandom(length))
