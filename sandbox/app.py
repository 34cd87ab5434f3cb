"""The sandbox ASGI app: routing, the request log, fault injection and the lifespan."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

import orjson

from sandbox.asgi import Exchange, Receive, Scope, Send
from sandbox.config import SandboxConfig
from sandbox.control import Control, RequestLog
from sandbox.engine import Engine
from sandbox.faults import FaultBook, FaultRule, parse_header
from sandbox.openai_dialect import OpenAIDialect
from sandbox.openai_errors import ApiError, fault_error
from sandbox.prefix_cache import CachePolicy, PrefixCache
from sandbox.stats import EngineStats
from sandbox.textgen import TextGenerator
from sandbox.vllm_metrics import VllmOps

__all__ = ["SandboxApp", "create_app"]

logger = logging.getLogger("sandbox")

Handler = Callable[[Exchange], Awaitable[None]]

# vLLM reports every cached 16-token block; OpenAI caches prompts of 1,024+
# tokens and reports hits in 128-token steps.
_POLICIES = {
    "vllm": CachePolicy(min_prompt_tokens=0, step_tokens=16),
    "openai": CachePolicy(min_prompt_tokens=1024, step_tokens=128),
}
_BAD_JSON = (
    "We could not parse the JSON body of your request. (HINT: This likely means you aren't "
    "using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was "
    "sent was not valid JSON. If you have trouble figuring out how to fix this, please "
    "contact us through our help center at help.openai.com.)"
)
_MODEL_PREFIX = "/v1/models/"


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
            policy=_POLICIES[config.dialect],
            cache=self.cache,
            generator=TextGenerator(config.seed),
            stats=self.stats,
            max_num_seqs=config.num_seqs,
        )
        self.faults = FaultBook(fault_rate=config.fault_rate, seed=config.seed)
        self.log = RequestLog(config.request_log_size)
        self.dialect = OpenAIDialect(config, self.engine)
        self.control = Control(self.log, self.faults, self.cache)
        self.vllm_ops = VllmOps(self.stats, self.cache) if self.vllm else None
        self.routes: dict[tuple[str, str], Handler] = dict(self.dialect.routes())
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
            if not ex.started:
                await ex.respond(error.status, self.dialect.error(error), headers=error.headers)
        except Exception:
            logger.exception("sandbox: %s %s failed", ex.method, ex.path)
            if not ex.started:
                crash = ApiError(500, "The server had an error while processing your request.")
                await ex.respond(500, self.dialect.error(crash))

    def _handler(self, ex: Exchange) -> Handler | None:
        handler = self.routes.get((ex.method, ex.path))
        if handler is None and ex.method == "GET" and ex.path.startswith(_MODEL_PREFIX):
            model = ex.path[len(_MODEL_PREFIX) :]
            return lambda exchange: self.dialect.retrieve_model(exchange, model)
        return handler

    async def _not_found(self, ex: Exchange) -> None:
        known = any(path == ex.path for _, path in self.routes)
        status = 405 if known else 404
        if self.vllm:  # FastAPI's own answer
            detail = b"Method Not Allowed" if known else b"Not Found"
            await ex.respond(status, b'{"detail":"' + detail + b'"}')
            return
        error = ApiError(status, f"Invalid URL ({ex.method} {ex.path})")
        await ex.respond(status, self.dialect.error(error))

    async def _serve(self, ex: Exchange) -> None:
        handler = self._handler(ex)
        if handler is None:
            await self._not_found(ex)
            return
        payload: object = None
        malformed = False
        if ex.body:
            try:
                payload = orjson.loads(ex.body)
            except orjson.JSONDecodeError:
                malformed = True
        model = stream = None
        if isinstance(payload, dict):
            model, stream = payload.get("model"), payload.get("stream")
        rule = self._fault(ex, model if isinstance(model, str) else None, stream=bool(stream))
        if rule is not None:
            if rule.kind == "status":
                raise fault_error(rule, model=model if isinstance(model, str) else None)
            if rule.kind == "reset":
                await ex.abort(reset=True)
                return
            if rule.kind == "timeout":
                await asyncio.sleep(rule.seconds)
            else:
                ex.fault = rule
        if malformed:
            raise ApiError(400, _BAD_JSON)
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
