"""OpenAI's Responses API: `POST /v1/responses` through the completion pipeline (same policy,
routing, caching, retries, idempotency and ledger as chat, endpoint `responses` in the ledger),
and the stored responses it leaves: `GET`/`DELETE /v1/responses/{id}` and its `input_items`,
each read only by the team that created it."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from typing import Annotated, Any, Literal

import orjson
from fastapi import APIRouter, Query, Request, Response
from sqlalchemy.exc import SQLAlchemyError
from starlette.responses import StreamingResponse

from gateway.accounting import stored_responses
from gateway.accounting.stored_responses import StoredResponse
from gateway.routes.chat import serve
from gateway.routes.reading import caller
from gateway.routes.responses_dialect import ResponseNotFound, ResponsesDialect, StoreUnavailable, read
from gateway.runtime import Runtime

router = APIRouter()

_JSON = "application/json"


async def create(request: Request) -> Response:
    """`POST /v1/responses`. A finished response is stored before the client sees it finished:
    a stream's last frame (`response.completed`) is held back until the row is written."""
    runtime: Runtime = request.app.state.runtime
    dialect = ResponsesDialect(runtime)
    response = await serve(request, dialect)
    if isinstance(response, StreamingResponse):
        response.body_iterator = _kept_before_last(response.body_iterator, dialect)
    else:
        await dialect.keep()
    return response


async def _kept_before_last(frames: AsyncIterable[Any], dialect: ResponsesDialect) -> AsyncIterator[Any]:
    held: Any = None
    try:
        async for frame in frames:
            if held is not None:
                yield held
            held = frame
        await dialect.keep()
        if held is not None:
            yield held
    finally:
        aclose = getattr(frames, "aclose", None)
        if aclose is not None:
            await aclose()


async def _owned(request: Request, response_id: str) -> tuple[Runtime, StoredResponse]:
    runtime: Runtime = request.app.state.runtime
    principal = await caller(request, runtime)
    found = await read(runtime, response_id, team=principal.team)
    if found is None:
        raise ResponseNotFound(f"Response with id '{response_id}' not found.", param="response_id")
    return runtime, found


@router.get("/v1/responses/{response_id}", summary="A stored response (OpenAI's Responses API)")
async def retrieve(request: Request, response_id: str) -> Response:
    _, found = await _owned(request, response_id)
    return Response(orjson.dumps(found.response), media_type=_JSON)


@router.delete("/v1/responses/{response_id}", summary="Delete a stored response")
async def remove(request: Request, response_id: str) -> Response:
    runtime: Runtime = request.app.state.runtime
    principal = await caller(request, runtime)
    try:
        removed = await stored_responses.remove(
            runtime.engine,
            response_id,
            team=principal.team,
            retention_days=runtime.config.ledger.retention_days,
        )
    except SQLAlchemyError as exc:
        raise StoreUnavailable("stored responses cannot be changed right now; try again") from exc
    if not removed:
        raise ResponseNotFound(f"Response with id '{response_id}' not found.", param="response_id")
    return Response(
        orjson.dumps({"id": response_id, "object": "response", "deleted": True}), media_type=_JSON
    )


@router.get("/v1/responses/{response_id}/input_items", summary="The input items of a stored response")
async def input_items(
    request: Request,
    response_id: str,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    order: Literal["asc", "desc"] = "desc",
    after: Annotated[str | None, Query(max_length=128)] = None,
) -> Response:
    _, found = await _owned(request, response_id)
    items = found.input_items if order == "asc" else list(reversed(found.input_items))
    if after is not None:
        ids = [item.get("id") for item in items]
        items = items[ids.index(after) + 1 :] if after in ids else []
    page = items[:limit]
    body = {
        "object": "list",
        "data": page,
        "first_id": page[0]["id"] if page else None,
        "last_id": page[-1]["id"] if page else None,
        "has_more": len(items) > limit,
    }
    return Response(orjson.dumps(body), media_type=_JSON)
