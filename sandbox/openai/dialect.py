"""The OpenAI-compatible endpoints (chat completions, models, embeddings) for openai and vllm."""

from __future__ import annotations

import asyncio
import hashlib
import os
import time

from sandbox.answer_fault import answered
from sandbox.config import SandboxConfig
from sandbox.core.asgi import Exchange
from sandbox.core.dialect import Dialect, Handler
from sandbox.core.engine import Engine, GenerationRequest, Run
from sandbox.core.sse import SSEWriter, StreamCut
from sandbox.core.tokens import Tokenizer
from sandbox.faults import FaultRule
from sandbox.openai.completions import OpenAICompletions
from sandbox.openai.embeddings import OpenAIEmbeddings
from sandbox.openai.errors import BAD_JSON, ApiError, error_body, fault_error
from sandbox.openai.logprobs import LogprobWriter
from sandbox.openai.models import OpenAIModels
from sandbox.openai.request import ChatParams, from_chat_request
from sandbox.openai.response import ChatWriter

__all__ = ["DEFAULT_MODELS", "OpenAIDialect"]

# Listed by /v1/models when no --model is given (any name is still accepted).
DEFAULT_MODELS = {
    "openai": ("gpt-4o-mini", "gpt-4o", "text-embedding-3-small"),
    "vllm": ("sandbox-llm",),
}
_MODEL_PREFIX = "/v1/models/"
_RATE_HEADERS = (
    ("openai-version", "2020-10-01"),
    ("openai-organization", "user-sandbox"),
    ("x-ratelimit-limit-requests", "10000"),
    ("x-ratelimit-limit-tokens", "30000000"),
    ("x-ratelimit-remaining-requests", "9999"),
    ("x-ratelimit-remaining-tokens", "29999000"),
    ("x-ratelimit-reset-requests", "6ms"),
    ("x-ratelimit-reset-tokens", "2ms"),
)


class OpenAIDialect(Dialect):
    """Serves the OpenAI wire format; ``vllm`` switches to vLLM's variant of it."""

    crash_message = "The server had an error while processing your request."

    def __init__(self, config: SandboxConfig, engine: Engine) -> None:
        self.config = config
        self.engine = engine
        self.vllm = config.dialect == "vllm"
        digest = hashlib.blake2b(str(config.seed).encode(), digest_size=5).hexdigest()
        self.fingerprint = "fp_" + digest
        self.tokenizer = Tokenizer()
        self.embeddings = OpenAIEmbeddings(config, engine.profile, self.check_model)
        self.models = OpenAIModels(config, self.served_models, self.check_model)
        self.completions = OpenAICompletions(config, engine, self.tokenizer, self.check_model, self._headers)

    def routes(self) -> dict[tuple[str, str], Handler]:
        """The endpoints this dialect answers, by (method, path)."""
        return {
            ("POST", "/v1/chat/completions"): self.chat,
            ("GET", "/v1/models"): self.models.list_models,
            ("POST", "/v1/embeddings"): self.embeddings.handle,
            ("POST", "/v1/completions"): self.completions.handle,
        }

    def served_models(self) -> tuple[str, ...]:
        """The configured models, or the dialect's defaults when any name is accepted."""
        return self.config.models or DEFAULT_MODELS[self.config.dialect]

    def check_model(self, model: str) -> None:
        """Reject a model that is not served (only when models are configured)."""
        if self.config.models and model not in self.config.models:
            if self.vllm:
                raise ApiError(404, f"The model `{model}` does not exist.")
            raise ApiError(
                404,
                f"The model `{model}` does not exist or you do not have access to it.",
                code="model_not_found",
            )

    def resolve(self, method: str, path: str) -> Handler | None:
        """``GET /v1/models/{model}``."""
        if method == "GET" and path.startswith(_MODEL_PREFIX):
            model = path[len(_MODEL_PREFIX) :]
            return lambda ex: self.models.retrieve_model(ex, model)
        return None

    def error(self, error: ApiError) -> bytes:
        """The body of an error answer in this flavour."""
        return error_body(error, vllm=self.vllm)

    def fault_error(self, rule: FaultRule, model: str | None) -> ApiError:
        """OpenAI's error for a status or stream_error fault."""
        return fault_error(rule, model=model)

    def malformed_json(self) -> ApiError:
        """OpenAI's 400 for a body that is not JSON."""
        return ApiError(400, BAD_JSON)

    async def not_found(self, ex: Exchange, *, known: bool) -> None:
        """404 (405 for a known path), as FastAPI's own answer on vLLM."""
        if not self.vllm:
            await super().not_found(ex, known=known)
        detail = b"Method Not Allowed" if known else b"Not Found"
        await ex.respond(405 if known else 404, b'{"detail":"' + detail + b'"}')

    def _headers(self, started: float) -> list[tuple[str, str]]:
        if self.vllm:
            return []
        elapsed = str(int((time.monotonic() - started) * 1000))
        request_id = "req_" + os.urandom(16).hex()
        return [("x-request-id", request_id), ("openai-processing-ms", elapsed), *_RATE_HEADERS]

    async def chat(self, ex: Exchange) -> None:
        """``POST /v1/chat/completions``, whole or streamed."""
        started = time.monotonic()
        params = from_chat_request(
            ex.payload,
            tokenizer=self.tokenizer,
            max_model_len=self.config.model_len,
            vllm=self.config.dialect == "vllm",
        )
        self.check_model(params.generation.model)
        generation = params.generation
        writer = ChatWriter(
            vllm=self.vllm,
            model=params.generation.model,
            fingerprint=self.fingerprint,
            service_tier=params.service_tier,
            include_usage=params.include_usage,
            include_obfuscation=params.include_obfuscation,
            prompt_tokens_details=self.config.prompt_tokens_details,
            logprobs=self._logprobs(params, generation, ex.fault),
        )
        async with self.engine.run(generation) as run:
            if ex.fault is not None and ex.fault.kind == "answer":
                run.plan = answered(run.plan, ex.fault)
            if params.stream:
                await self._stream(ex, params, writer, run, started)
                return
            await run.until_done()
            body = writer.completion(run.plan)
            run.finish()
        await ex.respond(200, body, headers=self._headers(started))

    def _logprobs(
        self, params: ChatParams, generation: GenerationRequest, fault: FaultRule | None
    ) -> LogprobWriter | None:
        if params.top_logprobs is None:
            return None
        prompt = generation.prompt.digest
        seed = LogprobWriter.seed_of(self.config.seed, prompt, generation.seed)
        mean = fault.mean_logprob if fault is not None and fault.kind == "answer" else None
        return LogprobWriter(params.top_logprobs, vllm=self.vllm, seed=seed, mean=mean)

    async def _stream(
        self, ex: Exchange, params: ChatParams, writer: ChatWriter, run: Run, started: float
    ) -> None:
        plan = run.plan
        error = fault_error(ex.fault, model=params.generation.model) if ex.fault else None
        sse = SSEWriter(ex, ex.fault, error_event=self.error(error) if error else b"")
        # vLLM sends its headers at once and the first chunk after prefill; OpenAI's
        # headers arrive with the first token.
        if self.vllm:
            await ex.start_stream()
        watcher = None if run.instant else asyncio.ensure_future(ex.disconnected())
        try:
            await run.until_token(0)
            if not ex.started:
                await ex.start_stream(headers=self._headers(started))
            for choice in plan.choices:
                await sse.event(writer.first_chunk(choice))
                if not choice.pieces:
                    empty = writer.piece_chunk(choice, "", last=True)
                    await sse.event(empty if self.vllm else writer.finish_chunk(choice))
            step = 4 if run.instant else 1
            longest = max((len(c.pieces) for c in plan.choices), default=0)
            for pos in range(0, longest, step):
                if pos:
                    await run.until_token(pos)
                if watcher is not None and watcher.done():
                    run.finish(aborted=True)
                    return
                for choice in plan.choices:
                    if pos >= len(choice.pieces):
                        continue
                    last = pos + step >= len(choice.pieces)
                    text = "".join(choice.pieces[pos : pos + step])
                    chunk = writer.piece_chunk(choice, text, last=last, start=pos, stop=pos + step)
                    await sse.event(chunk)
                    if last and not self.vllm:
                        await sse.event(writer.finish_chunk(choice))
            if params.include_usage:
                await sse.event(writer.usage_chunk(plan))
            await sse.close()
            run.finish()
        except StreamCut:
            run.finish(aborted=True)
        finally:
            if watcher is not None:
                watcher.cancel()
