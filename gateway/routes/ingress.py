"""How every metered endpoint opens (chat, messages, embeddings): who is calling, which tags the
request carries, and its body within the size limit. The caller and tags go on the ledger row at
once, so a request refused for its body is still a row its team can see."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from starlette.requests import Request

from gateway.accounting.record import RequestRecord
from gateway.http.headers import request_headers
from gateway.policy.principal import Principal, authenticate
from gateway.routes.body import read_body
from gateway.routes.outcome import TAGS_HEADER, parse_tags
from gateway.runtime import Runtime


@dataclass(frozen=True, slots=True)
class Inbound:
    headers: Mapping[str, str]
    principal: Principal
    raw: bytes


async def sign_in(request: Request, runtime: Runtime, record: RequestRecord) -> Inbound:
    headers = request_headers(request)
    principal = await authenticate(
        headers, admin_key=runtime.admin_key, keys=runtime.keys, open_mode=runtime.open_mode
    )
    record.team, record.key_id = principal.team, principal.key_id
    raw = await read_body(request, runtime.config.server.max_body_bytes)
    record.tags = parse_tags(headers.get(TAGS_HEADER))
    return Inbound(headers, principal, raw)
