"""The Responses API as a dialect of the completion pipeline: one per request, since a response
has state the chat dialects do not (its id, the conversation it continues, and the stored result).

`parse_stored` reads the conversation a `previous_response_id` names (team-scoped) before the
request is translated; `render` and the stream encoder build the response object; `keep` stores
it when the client asked (`store`, true by default) before the client can see it finished, so a
`previous_response_id` sent right after always finds it.
"""

from __future__ import annotations

import logging
import time

import orjson
from sqlalchemy.exc import SQLAlchemyError

from gateway.accounting import stored_responses
from gateway.accounting.stored_responses import StoredResponse
from gateway.errors import GatewayError, InvalidRequest, describe
from gateway.routes.body import json_object
from gateway.routes.chat_request import parse_chat_request
from gateway.routes.dialects import StreamEncoder
from gateway.runtime import Runtime
from providers.errors import ProviderError
from providers.responses import (
    InputError,
    ResponsesStreamEncoder,
    Translated,
    check_create,
    encode_events,
    from_responses_request,
    new_id,
    output_of,
    skeleton,
)
from providers.responses.output import finished
from providers.responses.request import Conversation
from providers.types import JSON, ChatRequest, Completion, StreamChunk

log = logging.getLogger("tollgate.responses")


class ResponseNotFound(GatewayError):
    status = 404
    type = "invalid_request_error"
    code = "not_found"


class StoreUnavailable(GatewayError):
    status = 503
    type = "gateway_error"
    code = "store_unavailable"


def invalid(exc: InputError) -> InvalidRequest:
    return InvalidRequest(str(exc), param=exc.param, code=exc.code)


class ResponsesDialect:
    endpoint = "responses"

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime
        self._body: JSON = {}
        self._translated: Translated | None = None
        self._response: JSON = {}
        self.final: JSON | None = None
        self.team: str | None = None  # the caller's, once signed in: what the stored response belongs to

    def parse(self, raw: bytes) -> ChatRequest:
        raise NotImplementedError("the pipeline calls parse_stored for this dialect")

    async def parse_stored(self, raw: bytes, *, team: str | None) -> ChatRequest:
        self.team = team
        body = json_object(raw)
        try:
            check_create(body)
            history = await self._history(body.get("previous_response_id"), team)
            translated = from_responses_request(body, history=history)
        except InputError as exc:
            raise invalid(exc) from exc
        self._body, self._translated = body, translated
        self._response = skeleton(
            body, response_id=new_id("resp"), created_at=int(time.time()), model=str(body["model"])
        )
        return parse_chat_request(orjson.dumps(translated.chat))

    async def _history(self, previous: str | None, team: str | None) -> list[JSON]:
        if previous is None:
            return []
        found = await read(self._runtime, previous, team=team)
        if found is None:
            raise ResponseNotFound(
                f"Previous response with id '{previous}' not found.", param="previous_response_id"
            )
        return found.context

    def render(self, completion: Completion, chat: ChatRequest) -> bytes:
        output, finish_reason = output_of(orjson.loads(completion.body))
        self.final = finished(
            self._response,
            output=output,
            usage=completion.usage,
            finish_reason=finish_reason,
            at=int(time.time()),
        )
        return orjson.dumps(self.final)

    def encoder(self, chat: ChatRequest) -> StreamEncoder:
        return ResponsesStream(self)

    def error(self, exc: BaseException) -> tuple[int, bytes, str]:
        return describe(exc)

    def started(self) -> ResponsesStreamEncoder:
        return ResponsesStreamEncoder(self._response, clock=int(time.time()))

    async def keep(self) -> None:
        """Store the finished response (unless `store: false`); a database that fails here costs
        the client its stored state, not the answer it already paid for."""
        if self.final is None or self._translated is None or self._body.get("store") is False:
            return
        conversation = Conversation.resumed(self._translated.context)
        for i, item in enumerate(self.final["output"]):
            conversation.add(item, f"output[{i}]")
        try:
            await stored_responses.put(
                self._runtime.engine,
                team=self.team,
                response=self.final,
                input_items=self._translated.items,
                context=conversation.messages,
            )
        except SQLAlchemyError as exc:
            log.warning("response %s not stored: %s", self.final["id"], exc)


class ResponsesStream:
    """The pipeline's stream encoder interface over `ResponsesStreamEncoder`."""

    __slots__ = ("_dialect", "_encoder")

    def __init__(self, dialect: ResponsesDialect) -> None:
        self._dialect = dialect
        self._encoder = dialect.started()

    def chunk(self, chunk: StreamChunk) -> bytes:
        return encode_events(self._encoder.encode(orjson.loads(chunk.data), usage=chunk.usage))

    def end(self) -> bytes:
        events = self._encoder.finish(at=int(time.time()))
        self._dialect.final = self._encoder.final
        return encode_events(events)

    def error(self, exc: BaseException) -> bytes:
        _, body, _ = describe(exc)
        message = orjson.loads(body)["error"]["message"]
        code = exc.code if isinstance(exc, ProviderError | GatewayError) else None
        return encode_events(self._encoder.fail(message, code=code))


async def read(runtime: Runtime, response_id: str, *, team: str | None) -> StoredResponse | None:
    """The stored response of this team, or None; a database that cannot answer is a 503."""
    try:
        return await stored_responses.get(
            runtime.engine, response_id, team=team, retention_days=runtime.config.ledger.retention_days
        )
    except SQLAlchemyError as exc:
        raise StoreUnavailable("stored responses cannot be read right now; try again") from exc
