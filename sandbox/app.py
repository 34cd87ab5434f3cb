"""The sandbox ASGI app: dialect choice, routing, the request log, fault injection and the lifespan."""

from __future__ import annotations

import asyncio
import contextlib
import logging

import orjson

from sandbox.anthropic.batches import AnthropicBatches
from sandbox.anthropic.dialect import AnthropicDialect
from sandbox.config import SandboxConfig
from sandbox.control import Control, RequestLog
from sandbox.core.asgi import Exchange, Receive, Scope, Send
from sandbox.core.dialect import Dialect, Handler
from sandbox.core.engine import Engine
from sandbox.core.errors import ApiError
from sandbox.core.prefix_cache import CachePolicy, PrefixCache
from sandbox.core.stats import EngineStats
from sandbox.core.textgen import TextGenerator
from sandbox.faults import FaultBook, FaultRule, parse_header
from sandbox.gemini.dialect import GeminiDialect
from sandbox.openai.batches import OpenAIBatches
from sandbox.openai.dialect import OpenAIDialect
from sandbox.vllm.ops import VllmOps

__all__ = ["SandboxApp", "create_app"]

logger = logging.getLogger("sandbox")

# How hits are reported: OpenAI in 128-token steps, the others per 16-token block
# (Anthropic's own breakpoint accounting bypasses the shared cache).
_STEP_TOKENS = {"openai": 128}
# A random fault (--fault-rate) is what the API answers when it is overloaded.
_RANDOM_STATUS = {"anthropic": 529}


def _dialect(config: SandboxConfig, engine: Engine) -> Dialect:
    if config.dialect == "anthropic":
        return AnthropicDialect(config, engine)
    if config.dialect == "gemini":
        return GeminiDialect(config, engine)
    return OpenAIDialect(config, engine)


class SandboxApp:
    """An upstream emulator as a raw ASGI application; its state is public for tests."""

    def __init__(self, config: SandboxConfig) -> None:
        self.config = config
        self.vllm = config.dialect == "vllm"
        self.cache = PrefixCache(capacity_blocks=config.cache_blocks)
        self.stats = EngineStats()
        for model in config.models:
            self.stats.model(model)
        self.engine = Engine(
            profile=config.latency,
            policy=CachePolicy(
                min_prompt_tokens=config.cache_minimum,
                step_tokens=_STEP_TOKENS.get(config.dialect, 16),
            ),
            cache=self.cache,
            generator=TextGenerator(config.seed),
            stats=self.stats,
            max_num_seqs=config.num_seqs,
        )
        self.faults = FaultBook(
            fault_rate=config.fault_rate,
            seed=config.seed,
            random_status=_RANDOM_STATUS.get(config.dialect, 503),
        )
        self.log = RequestLog(config.request_log_size)
        self.dialect = _dialect(config, self.engine)
        # The managed APIs' batch endpoints (vLLM and Gemini have none here).
        self.batches = (
            OpenAIBatches(config, self)
            if config.dialect == "openai"
            else AnthropicBatches(config, self)
            if config.dialect == "anthropic"
            else None
        )
        resets = [self.dialect.reset, *([self.batches.reset] if self.batches is not None else [])]
        self.control = Control(self.log, self.faults, self.cache, on_reset=resets)
        self.vllm_ops = VllmOps(self.stats, self.cache) if self.vllm else None
        self.routes: dict[tuple[str, str], Handler] = dict(self.dialect.routes())
        if self.batches is not None:
            self.routes.update(self.batches.routes())
        if self.vllm_ops is not None:
            self.routes.update(self.vllm_ops.routes())
        self.control_routes = self.control.routes()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await self._http(Exchange(scope, receive, send))
        elif scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return

    async def _http(self, ex: Exchange) -> None:
        await ex.read_body()
        if ex.path.startswith("/_sandbox/"):
            control = self.control_routes.get((ex.method, ex.path))
            if control is None:
                await ex.respond(404, b'{"error":{"message":"unknown sandbox control path"}}')
            else:
                await control(ex)
            return
        self.log.record(ex)
        try:
            await self._serve(ex)
        except ApiError as error:
            await self._error(ex, error)
        except Exception:
            logger.exception("sandbox: %s %s failed", ex.method, ex.path)
            await self._error(ex, ApiError(500, self.dialect.crash_message))

    async def _error(self, ex: Exchange, error: ApiError) -> None:
        if not ex.started:
            body, headers = self.dialect.error_response(error)
            await ex.respond(error.status, body, headers=headers)

    async def _serve(self, ex: Exchange) -> None:
        handler = (
            self.routes.get((ex.method, ex.path))
            or (self.batches.resolve(ex.method, ex.path) if self.batches is not None else None)
            or self.dialect.resolve(ex.method, ex.path)
        )
        if handler is None:
            known = any(path == ex.path for _, path in self.routes)
            await self.dialect.not_found(ex, known=known)
            return
        self.dialect.authenticate(ex)
        payload: object = None
        malformed = False
        multipart = (ex.header(b"content-type") or "").startswith("multipart/")
        if ex.body and not multipart:
            try:
                payload = orjson.loads(ex.body)
            except orjson.JSONDecodeError:
                malformed = True
        model, stream = self.dialect.request_facts(ex, payload)
        rule = self._fault(ex, model, stream=stream)
        if rule is not None:
            if rule.kind == "status":
                raise self.dialect.fault_error(rule, model)
            if rule.kind == "reset":
                await ex.abort(reset=True)
                return
            if rule.kind == "timeout":
                # A hung upstream still notices its client leave (as a real server's request does
                # when the connection closes), so a test's abandoned calls do not sleep on.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(rule.seconds):
                        await ex.disconnected()
                        return
            else:
                ex.fault = rule
        if malformed:
            raise self.dialect.malformed_json()
        ex.payload = payload
        await handler(ex)

    def _fault(self, ex: Exchange, model: str | None, *, stream: bool) -> FaultRule | None:
        header = ex.header(b"x-sandbox-fault")
        if header is not None:
            try:
                rule = parse_header(header)
            except ValueError as exc:
                raise ApiError(400, f"invalid x-sandbox-fault header: {exc}") from exc
            if rule.kind not in ("drop_after", "stream_error") or stream:
                return rule
        return self.faults.take(ex.path, model, stream=stream)


def create_app(config: SandboxConfig | None = None) -> SandboxApp:
    """Build a sandbox ASGI app (openai dialect, managed profile, seed 0 by default)."""
    return SandboxApp(config or SandboxConfig())
