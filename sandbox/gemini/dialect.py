"""The Gemini API (generativelanguage.googleapis.com): generate, stream, count, embed and list models.

Paths are ``/v1beta/models/{model}:{method}`` (``/v1/`` works too). The key
comes in ``x-goog-api-key``, ``?key=`` or a bearer token (any value; missing
is a 403 PERMISSION_DENIED). Implicit caching reports
``cachedContentTokenCount`` for a repeated prefix of at least the minimum
(2,048 tokens by default) through the shared prefix cache. Thinking
(``thinkingBudget`` > 0 or -1, or a ``thinkingLevel``) adds
``thoughtsTokenCount``, and the thoughts count against ``maxOutputTokens``.

Deterministic triggers, anywhere in the prompt's text:

* ``__unsafe__``: the candidate is blocked, ``finishReason: "SAFETY"`` with no content;
* ``__blocked__``: the prompt is blocked, ``promptFeedback.blockReason: "SAFETY"`` and no candidates.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import orjson

from sandbox.config import SandboxConfig
from sandbox.core.asgi import Exchange
from sandbox.core.dialect import Dialect, Handler, HeaderList
from sandbox.core.engine import Engine
from sandbox.core.errors import ApiError
from sandbox.core.textgen import Completion
from sandbox.core.tokens import Tokenizer
from sandbox.faults import FaultRule
from sandbox.gemini.embeddings import GeminiEmbeddings
from sandbox.gemini.errors import error_body, fault_error, invalid
from sandbox.gemini.models import GeminiModels
from sandbox.gemini.request import field, parse_generate, render_contents, unknown_fields
from sandbox.gemini.response import ResponseWriter
from sandbox.gemini.stream import stream_response

__all__ = ["GeminiDialect"]

_PREFIXES = ("/v1beta/models/", "/v1/models/")
_JSON = b"application/json; charset=UTF-8"
_THOUGHTS = 0x7417_0003
_NO_KEY = (
    "Method doesn't allow unregistered callers (callers without established identity). Please use "
    "API Key or other form of API consumer identity to call this API."
)


def _split(path: str) -> tuple[str, str] | None:
    """``(model, method)`` of a model path (method is "" for the model itself), or None."""
    for prefix in _PREFIXES:
        if path.startswith(prefix):
            model, _, method = path[len(prefix) :].partition(":")
            return (model, method) if model else None
    return None


class GeminiDialect(Dialect):
    """Serves the Gemini API's wire format on top of the shared engine."""

    crash_message = "An internal error has occurred."

    def __init__(self, config: SandboxConfig, engine: Engine) -> None:
        self.config = config
        self.engine = engine
        self.tokenizer = Tokenizer()
        self.embeddings = GeminiEmbeddings(config, engine.profile, self.check_model)
        self.models = GeminiModels(config, self.check_model)
        self._methods = {
            "generateContent": lambda ex, m: self.generate(ex, m, stream=False),
            "streamGenerateContent": lambda ex, m: self.generate(ex, m, stream=True),
            "countTokens": self.count_tokens,
            "embedContent": self.embeddings.embed,
            "batchEmbedContents": self.embeddings.batch,
        }

    def routes(self) -> dict[tuple[str, str], Handler]:
        """The fixed endpoints: the model lists."""
        return {
            ("GET", "/v1beta/models"): self.models.list_models,
            ("GET", "/v1/models"): self.models.list_models,
        }

    def resolve(self, method: str, path: str) -> Handler | None:
        """``POST .../models/{model}:{method}`` and ``GET .../models/{model}``."""
        parts = _split(path)
        if parts is None:
            return None
        model, action = parts
        if method == "GET" and not action:
            return lambda ex: self.models.get_model(ex, model)
        handler = self._methods.get(action) if method == "POST" else None
        return None if handler is None else (lambda ex: handler(ex, model))

    def request_facts(self, ex: Exchange, payload: object) -> tuple[str | None, bool]:
        """The model and the stream flag come from the path."""
        parts = _split(ex.path)
        return (parts[0], parts[1] == "streamGenerateContent") if parts else (None, False)

    def authenticate(self, ex: Exchange) -> None:
        """A key in ``x-goog-api-key``, ``?key=`` or ``Authorization: Bearer`` is required."""
        bearer = (ex.header(b"authorization") or "").removeprefix("Bearer ").strip()
        if not (ex.header(b"x-goog-api-key") or ex.query("key") or bearer):
            raise ApiError(403, _NO_KEY, type="PERMISSION_DENIED")

    def error(self, error: ApiError) -> bytes:
        """Google's error body."""
        return error_body(error)

    def fault_error(self, rule: FaultRule, model: str | None) -> ApiError:
        """Google's error for a fault (a stream_error is a 500 INTERNAL)."""
        return fault_error(rule)

    def malformed_json(self) -> ApiError:
        """The 400 for a body that is not JSON."""
        return invalid("Invalid JSON payload received. Unexpected token.")

    async def not_found(self, ex: Exchange, *, known: bool) -> None:
        """404 NOT_FOUND (405 for a known path with the wrong method)."""
        if known:
            raise ApiError(405, "Method not allowed.", type="INVALID_ARGUMENT")
        raise ApiError(404, f"Method not found: {ex.method} {ex.path}.", type="NOT_FOUND")

    def check_model(self, model: str, method: str) -> None:
        """Reject a model that is not served (only when models are configured)."""
        if self.config.models and model not in self.config.models:
            raise ApiError(
                404,
                f"models/{model} is not found for API version v1beta, or is not supported for "
                f"{method}. Call ListModels to see the list of available models and their supported "
                "methods.",
                type="NOT_FOUND",
            )

    @staticmethod
    def _headers(started: float) -> HeaderList:
        elapsed = int((time.monotonic() - started) * 1000)
        return [("server-timing", f"gfet4t7; dur={elapsed}"), ("vary", "Origin, X-Origin, Referer")]

    async def generate(self, ex: Exchange, model: str, *, stream: bool) -> None:
        """``:generateContent`` and ``:streamGenerateContent``."""
        started = time.monotonic()
        self.check_model(model, "generateContent")
        params = parse_generate(
            ex.payload, model=model, tokenizer=self.tokenizer, max_model_len=self.config.model_len
        )
        thoughts: Completion | None = None
        generation = params.generation
        limit = params.max_output_tokens
        if params.thinking_budget is not None and not params.blocked:
            cap = min(b for b in (params.thinking_budget, limit or 2**31) if b > 0)
            thoughts = self.engine.generator.complete(generation.prompt.digest ^ _THOUGHTS, max_tokens=cap)
            if limit is not None:
                generation = replace(generation, max_tokens=max(limit - len(thoughts.pieces), 0))
        async with self.engine.run(generation) as run:
            writer = ResponseWriter(model=model, params=params, plan=run.plan, thoughts=thoughts)
            offset = writer.thought_tokens
            if stream:
                sse = ex.query("alt") == "sse"
                await stream_response(ex, writer, run, offset=offset, sse=sse, headers=self._headers(started))
                return
            longest = max((len(c.pieces) for c in run.plan.choices), default=1)
            await run.until_token(offset + max(longest - 1, 0))
            body = writer.response()
            run.finish()
        await ex.respond(200, body, content_type=_JSON, headers=self._headers(started))

    async def count_tokens(self, ex: Exchange, model: str) -> None:
        """``:countTokens`` of ``contents`` or of a whole ``generateContentRequest``."""
        self.check_model(model, "countTokens")
        body: Any = ex.payload
        if not isinstance(body, Mapping):
            raise invalid("Invalid JSON payload received. Expected an object.")
        unknown_fields(body, {"contents", "generateContentRequest"})
        inner = field(body, "generateContentRequest")
        if inner is not None and field(body, "contents") is not None:
            raise invalid(
                "* CountTokensRequest: contents and generate_content_request are mutually exclusive\n"
            )
        prompt, _ = render_contents(inner if isinstance(inner, Mapping) else body, self.tokenizer)
        details = [{"modality": "TEXT", "tokenCount": len(prompt)}]
        reply = {"totalTokens": len(prompt), "promptTokensDetails": details}
        await ex.respond(200, orjson.dumps(reply), content_type=_JSON)
