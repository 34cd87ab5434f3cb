"""The Anthropic Messages API: ``/v1/messages`` (whole or streamed), count_tokens and models.

Requests need a key, ``x-api-key`` or ``Authorization: Bearer`` (any value;
the official SDK 2.x sends the latter; missing is a 401), and
``anthropic-version`` (any value; missing is a 400). Every answer carries a
``request-id`` header. Prompt caching follows the request's ``cache_control``
breakpoints (see breakpoint_cache). Tool use: ``tool_choice`` ``any``/``tool``
forces a ``tool_use`` block; with ``auto`` (the default) the sandbox calls a
tool when the last user turn names it verbatim (e.g. "use get_weather").
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import orjson

from sandbox.anthropic.breakpoint_cache import BreakpointCache
from sandbox.anthropic.errors import error_body, fault_error, invalid, request_id
from sandbox.anthropic.models import AnthropicModels
from sandbox.anthropic.output import Output, Signer, plan_output, plan_prelude
from sandbox.anthropic.request import MAX_OUTPUT_TOKENS, parse_messages
from sandbox.anthropic.response import MessageWriter
from sandbox.config import SandboxConfig
from sandbox.core.asgi import Exchange
from sandbox.core.dialect import Dialect, Handler, HeaderList
from sandbox.core.engine import Engine, GenerationRequest, Run, ToolCallSpec
from sandbox.core.errors import ApiError
from sandbox.core.sse import SSEWriter, StreamCut
from sandbox.core.tokens import Tokenizer
from sandbox.faults import FaultRule

__all__ = ["AnthropicDialect"]

_MAX_BODY_BYTES = 32 * 1024 * 1024
_MODEL_PREFIX = "/v1/models/"
# (limit, remaining) per anthropic-ratelimit-* family.
_LIMITS = {"requests": (4000, 3999), "input-tokens": (2_000_000, 1_999_000),
           "output-tokens": (400_000, 399_000), "tokens": (2_400_000, 2_398_000)}  # fmt: skip


class AnthropicDialect(Dialect):
    """Serves Anthropic's wire format on top of the shared engine."""

    crash_message = "Internal server error"

    def __init__(self, config: SandboxConfig, engine: Engine) -> None:
        self.config = config
        self.engine = engine
        self.tokenizer = Tokenizer()
        self.cache = BreakpointCache(min_tokens=config.cache_minimum)
        self.signer = Signer(config.seed)
        self.models = AnthropicModels(config, MAX_OUTPUT_TOKENS, self.check_model)

    def routes(self) -> dict[tuple[str, str], Handler]:
        """The fixed endpoints."""
        return {
            ("POST", "/v1/messages"): self.messages,
            ("POST", "/v1/messages/count_tokens"): self.count_tokens,
            ("GET", "/v1/models"): self.models.list_models,
        }

    def resolve(self, method: str, path: str) -> Handler | None:
        """``GET /v1/models/{model_id}``."""
        if method == "GET" and path.startswith(_MODEL_PREFIX):
            model = path[len(_MODEL_PREFIX) :]
            return lambda ex: self.models.retrieve_model(ex, model)
        return None

    def authenticate(self, ex: Exchange) -> None:
        """A key (``x-api-key`` or a bearer token) and ``anthropic-version`` are required."""
        bearer = (ex.header(b"authorization") or "").removeprefix("Bearer ").strip()
        if not ex.header(b"x-api-key") and not bearer:
            raise ApiError(401, "x-api-key header is required", type="authentication_error")
        if not ex.header(b"anthropic-version"):
            raise invalid("anthropic-version: header is required")

    def error(self, error: ApiError) -> bytes:
        """The error body (with a fresh request id)."""
        return error_body(error, request_id())

    def error_response(self, error: ApiError) -> tuple[bytes, HeaderList]:
        """Body and headers share one request id."""
        rid = request_id()
        return error_body(error, rid), [*error.headers, ("request-id", rid)]

    def fault_error(self, rule: FaultRule, model: str | None) -> ApiError:
        """Anthropic's error for a fault (a stream_error is an overloaded_error)."""
        return fault_error(rule)

    def malformed_json(self) -> ApiError:
        """The 400 for a body that is not JSON."""
        return invalid("There was an error parsing the body of your request. Please send valid JSON.")

    async def not_found(self, ex: Exchange, *, known: bool) -> None:
        """404 not_found_error (405 for a known path with the wrong method)."""
        if known:
            raise ApiError(405, "Method Not Allowed", type="invalid_request_error")
        raise ApiError(404, "Not Found", type="not_found_error")

    def reset(self) -> None:
        """Forget every cached prompt prefix."""
        self.cache.clear()

    def check_model(self, model: str) -> None:
        """Reject a model that is not served (only when models are configured)."""
        if self.config.models and model not in self.config.models:
            raise ApiError(404, f"model: {model}", type="not_found_error")

    @staticmethod
    def _headers(rid: str) -> HeaderList:
        reset = (datetime.now(UTC) + timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
        headers = [("request-id", rid), ("anthropic-organization-id", "00000000-0000-4000-8000-5a4db0c5a4db")]
        for family, (limit, remaining) in _LIMITS.items():
            prefix = f"anthropic-ratelimit-{family}-"
            headers += [(prefix + "limit", str(limit)), (prefix + "remaining", str(remaining))]
            headers.append((prefix + "reset", reset))
        return headers

    async def messages(self, ex: Exchange) -> None:
        """``POST /v1/messages``."""
        if len(ex.body) > _MAX_BODY_BYTES:
            raise ApiError(
                413, "Request exceeds the maximum allowed number of bytes.", type="request_too_large"
            )
        params = parse_messages(
            ex.payload,
            tokenizer=self.tokenizer,
            max_model_len=self.config.model_len,
            signature_ok=self.signer.verify,
        )
        self.check_model(params.model)
        rendered = params.rendered
        prelude = plan_prelude(params, self.engine.generator, self.signer)
        limit = max(params.max_tokens - sum(b.tokens for b in prelude), 0)
        cache = self.cache.apply(params.model, rendered.ends, rendered.hashes, rendered.breakpoints)
        schema = params.json_schema
        generation = GenerationRequest(
            model=params.model,
            prompt=rendered.prompt,
            max_tokens=limit,
            stop=params.stop,
            tool=ToolCallSpec("", schema) if schema is not None else params.tool,
            cached_tokens=cache.read,
        )
        writer = MessageWriter(model=params.model, prompt_tokens=len(rendered.prompt), cache=cache)
        rid = request_id()
        async with self.engine.run(generation) as run:
            output = plan_output(params, prelude, run.plan.choices[0], self.engine.generator, limit)
            if params.stream:
                await self._stream(ex, writer, output, run, rid)
                return
            await run.until_token(max(output.pieces - 1, 0))
            body = writer.message(output)
            run.finish()
        await ex.respond(200, body, headers=self._headers(rid))

    async def _stream(self, ex: Exchange, writer: MessageWriter, output: Output, run: Run, rid: str) -> None:
        error = error_body(fault_error(ex.fault), rid) if ex.fault else b""
        sse = SSEWriter(ex, ex.fault, error_event=error, error_name="error")
        watcher = None if run.instant else asyncio.ensure_future(ex.disconnected())
        step = 4 if run.instant else 1
        pos = 0
        try:
            await run.until_token(0)
            await ex.start_stream(headers=self._headers(rid))
            await sse.event(writer.start(), name="message_start")
            if not output.blocks:
                await sse.event(writer.PING, name="ping")
            for index, block in enumerate(output.blocks):
                await sse.event(writer.block_start(index, block), name="content_block_start")
                if index == 0:
                    await sse.event(writer.PING, name="ping")
                for i in range(0, len(block.pieces), step):
                    await run.until_token(pos)
                    if watcher is not None and watcher.done():
                        run.finish(aborted=True)
                        return
                    fragment = "".join(block.pieces[i : i + step])
                    pos += len(block.pieces[i : i + step])
                    await sse.event(writer.block_delta(index, block, fragment), name="content_block_delta")
                if block.kind == "thinking":
                    pos += block.tokens - len(block.pieces)  # omitted thinking still takes its time
                    await sse.event(writer.signature_delta(index, block), name="content_block_delta")
                await sse.event(writer.block_stop(index), name="content_block_stop")
            await sse.event(writer.message_delta(output), name="message_delta")
            await sse.event(writer.STOP, name="message_stop")
            await sse.close(b"")
            run.finish()
        except StreamCut:
            run.finish(aborted=True)
        finally:
            if watcher is not None:
                watcher.cancel()

    async def count_tokens(self, ex: Exchange) -> None:
        """``POST /v1/messages/count_tokens``: the prompt's input tokens, nothing cached or generated."""
        params = parse_messages(
            ex.payload, tokenizer=self.tokenizer, max_model_len=self.config.model_len, count_only=True
        )
        self.check_model(params.model)
        body = orjson.dumps({"input_tokens": len(params.rendered.prompt)})
        await ex.respond(200, body, headers=[("request-id", request_id())])
