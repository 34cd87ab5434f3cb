"""Hostile bodies, as raw bytes, on the three hot endpoints of a real gateway in front of the sandbox.

Every answer is a success or a well-formed error in the endpoint's dialect (OpenAI's, or Anthropic's on
`/v1/messages`) and never a 500; and the ledger holds exactly one row per request, matched by the
`x-request-id` of every response, with no row that no response accounts for.

`make test` runs a bounded, deterministic search; `make fuzz` a random, longer one (see profiles.py).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.routes.dialects import ANTHROPIC_MESSAGES
from sandbox.server import SandboxServer
from tests.conftest import gateway_config
from tests.hardening.bodies import (
    MODELS,
    anthropic_bodies,
    chat_bodies,
    embedding_bodies,
    nested,
    wire,
)
from tests.hardening.profiles import fuzz_settings
from tests.hardening.shapes import (
    assert_anthropic_error,
    assert_no_traceback,
    assert_openai_error,
    media_type,
)
from tests.harness import GatewayServer

CHAT, MESSAGES, EMBEDDINGS = "/v1/chat/completions", "/v1/messages", "/v1/embeddings"
MAX_BODY = 256 * 1024  # the test config's server.max_body_bytes

fuzz = fuzz_settings(ci_examples=120)


class Ledger:
    """The ids of every response this module received, to compare with the ledger's rows."""

    def __init__(self, gateway: GatewayServer) -> None:
        self.gateway = gateway
        self.client = httpx.Client(base_url=gateway.base_url, timeout=30)
        self.sent: list[str] = []

    def post(self, path: str, body: bytes, **headers: str) -> httpx.Response:
        sent = {"content-type": b"application/json", **{k: v.encode() for k, v in headers.items()}}
        response = self.client.post(path, content=body, headers=sent)
        request_id = response.headers.get("x-request-id")
        assert request_id, f"no x-request-id on a {response.status_code} from {path}"
        self.sent.append(request_id)
        return response

    def assert_one_row_per_response(self) -> None:
        # A stream's row is written when its relay finishes, a moment after the client has the body.
        deadline = time.monotonic() + 5
        while True:
            rows = Counter(row["id"] for row in self.gateway.ledger_rows())
            missing = set(self.sent) - set(rows)
            if not missing or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert not missing, f"{len(missing)} responses without a ledger row, e.g. {sorted(missing)[:3]}"
        doubled = {rid: n for rid, n in rows.items() if n > 1}
        assert not doubled, f"request ids with more than one ledger row: {doubled}"
        orphans = set(rows) - set(self.sent)
        assert not orphans, f"ledger rows no response accounts for: {sorted(orphans)[:3]}"
        assert len(self.sent) == len(set(self.sent)), "a request id was reused"


@pytest.fixture(scope="module")
def ledger(
    database_url: str, openai_upstream: SandboxServer, vllm_upstream: SandboxServer
) -> Iterator[Ledger]:
    # An upstream that chokes on a body must not open a breaker for the examples after it.
    resilience = {
        "retry": {"max_attempts": 1},
        "breaker": {"consecutive_failures": 1_000_000, "min_requests": 1_000_000},
    }
    config = gateway_config(
        database_url, openai_upstream.base_url, vllm_upstream.base_url, resilience=resilience
    )
    with GatewayServer(config) as server:
        book = Ledger(server)
        yield book
        book.client.close()


def assert_well_formed(path: str, response: httpx.Response) -> None:
    """A success in the endpoint's media type, or an error in its dialect; never a 500."""
    status, headers, body = response.status_code, response.headers, response.content
    assert status != 500, f"500 from {path}: {body[:300]!r}"
    if status < 400:
        assert status == 200, status
        kind = media_type(headers)
        assert kind in ("application/json", "text/event-stream"), kind
        if kind == "application/json":
            orjson.loads(body)
        assert_no_traceback(body.decode("utf-8", "replace"))
        return
    if path == MESSAGES:
        assert_anthropic_error(status, headers, body)
    else:
        error = assert_openai_error(status, headers, body)
        assert error["code"] != "internal_error", error


# --- Hypothesis: generated bodies ----------------------------------------------------------------

headers = st.fixed_dictionaries(
    {},
    optional={
        "idempotency-key": st.text(alphabet="abc", min_size=0, max_size=3),
        "x-tollgate-timeout-ms": st.sampled_from(["0", "-5", "1e3", "99999999999999999999", "²", "50"]),
        "x-tollgate-tags": st.text(alphabet="ab, ", max_size=80).map(str.strip),
        "cache-control": st.just("no-store"),
    },
)


@pytest.mark.parametrize(
    ("path", "bodies"),
    [(CHAT, chat_bodies), (MESSAGES, anthropic_bodies), (EMBEDDINGS, embedding_bodies)],
    ids=["chat", "messages", "embeddings"],
)
def test_generated_bodies(ledger: Ledger, path: str, bodies: st.SearchStrategy[Any]) -> None:
    @fuzz
    @given(body=wire(bodies), extra=headers)
    def send(body: bytes, extra: dict[str, str]) -> None:
        assert_well_formed(path, ledger.post(path, body, **extra))

    send()
    ledger.assert_one_row_per_response()


# --- Named cases: each malformed shape once, and every bug fuzzing found ------------------------

HI = [{"role": "user", "content": "hi"}]


def chat(**fields: Any) -> bytes:
    return orjson.dumps({"model": "gpt-4o-mini", "messages": HI, **fields})


def messages_body(**fields: Any) -> bytes:
    return orjson.dumps({"model": "gpt-4o-mini", "max_tokens": 16, "messages": HI, **fields})


def spliced(template: bytes, token: str) -> bytes:
    """`template` with the placeholder `"@"` replaced by a raw token orjson would never write."""
    return template.replace(b'"@"', token.encode())


def case(name: str, path: str, body: bytes, status: int) -> Any:
    return pytest.param(path, body, status, id=f"{path.rsplit('/', 1)[1]}: {name}")


MALFORMED = [
    # Not JSON, or not an object.
    case("empty body", CHAT, b"", 400),
    case("whitespace", CHAT, b" \n\t", 400),
    case("null", CHAT, b"null", 400),
    case("array", CHAT, b"[1,2,3]", 400),
    case("string", MESSAGES, b'"hello"', 400),
    case("number", EMBEDDINGS, b"42", 400),
    case("byte order mark", CHAT, b"\xef\xbb\xbf" + chat(), 400),
    case("invalid UTF-8", CHAT, chat(user="\u00e9").replace(b"\xc3\xa9", b"\xc3\x28"), 400),
    case("lone surrogate", MESSAGES, spliced(messages_body(system="@"), r'"\ud800"'), 400),
    case("NaN", CHAT, spliced(chat(temperature="@"), "NaN"), 400),
    case(
        "Infinity",
        EMBEDDINGS,
        spliced(b'{"model":"gpt-4o-mini","input":"x","dimensions":"@"}', "Infinity"),
        400,
    ),
    case("1e400", MESSAGES, spliced(messages_body(temperature="@"), "1e400"), 400),
    # Numbers beyond 64 bits (orjson reads them as floats).
    case("max_tokens of 2**64", CHAT, spliced(chat(max_tokens="@"), str(2**64)), 400),
    case("seed of 10**30", CHAT, spliced(chat(seed="@"), str(10**30)), 400),
    case("max_tokens of 2**64", MESSAGES, spliced(messages_body(max_tokens="@"), str(2**64)), 400),
    # Nesting past what orjson reads at all.
    case("10,000 levels", CHAT, spliced(chat(metadata="@"), nested(10_000)), 400),
    case("10,000 levels", MESSAGES, spliced(messages_body(metadata="@"), nested(10_000)), 400),
    case("10,000 levels", EMBEDDINGS, spliced(b'{"model":"gpt-4o-mini","input":"@"}', nested(10_000)), 400),
    # Shapes the validators refuse.
    case("empty messages", CHAT, chat(messages=[]), 400),
    case("messages not a list", MESSAGES, messages_body(messages={"role": "user"}), 400),
    case("role of the wrong type", CHAT, chat(messages=[{"role": 7, "content": "x"}]), 400),
    case("content part not an object", CHAT, chat(messages=[{"role": "user", "content": [5]}]), 400),
    case("body over the limit", CHAT, chat(messages=[{"role": "user", "content": "x" * MAX_BODY}]), 413),
    case("model of 100,000 characters", CHAT, chat(model="m" * 100_000), 404),
    case("model with control characters", EMBEDDINGS, b'{"model":"\\u0000\\u001b[31m","input":"x"}', 404),
    # Odd but acceptable: answered.
    case(
        "duplicate keys, refused",
        CHAT,
        b'{"model":5,"model":"gpt-4o-mini","messages":' + orjson.dumps(HI) + b"}",
        400,
    ),
    case("unknown fields", CHAT, chat(frobnicate={"a": [1, None]}, x_y=True), 200),
    case(
        "tool schema that is not JSON Schema, refused",
        CHAT,
        chat(tools=[{"type": "function", "function": {"name": "f", "parameters": "nope"}}]),
        400,
    ),
    case(
        "tool input_schema that is not JSON Schema, refused",
        MESSAGES,
        messages_body(tools=[{"name": "f", "input_schema": "nope"}]),
        400,
    ),
    case(
        "content part of an odd type",
        CHAT,
        chat(messages=[{"role": "user", "content": [{"type": "text", "text": 5}]}]),
        200,
    ),
    case("2,000 messages", CHAT, chat(messages=HI * 2000), 200),
    case("2,000 messages", MESSAGES, messages_body(messages=HI * 2000), 200),
]

# Every one of these was a 500 (or, on PostgreSQL, a response with no ledger row) before its fix.
REGRESSIONS = [
    # gateway/routes/chat_request.py: `role not in ROLES` on a frozenset raised TypeError for a list role.
    case("unhashable role", CHAT, chat(messages=[{"role": ["user"], "content": "x"}]), 400),
    # orjson reads 1,024 levels but writes 254: a body between the two failed wherever it was
    # written again (response cache key, re-encoding for a renamed model, Anthropic translation).
    case("300 levels, cached", CHAT, spliced(chat(temperature=0, x="@"), nested(300)), 400),
    case(
        "300 levels, renamed model",
        EMBEDDINGS,
        spliced(b'{"model":"renamed","input":"x","x":"@"}', nested(300)),
        400,
    ),
    case("300 levels", MESSAGES, spliced(messages_body(metadata={"x": "@"}), nested(300)), 400),
    case(
        "300 levels in tool input",
        MESSAGES,
        spliced(
            messages_body(
                messages=[
                    {
                        "role": "assistant",
                        "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {"x": "@"}}],
                    }
                ]
            ),
            nested(300),
        ),
        400,
    ),
    case(
        "251 levels still served",
        CHAT,
        spliced(chat(temperature=0, model="renamed", x="@"), nested(250)),
        200,
    ),
    case("252 levels refused", CHAT, spliced(chat(temperature=0, model="renamed", x="@"), nested(251)), 400),
    # providers/anthropic/ingress.py walked fields of the wrong type: AttributeError/TypeError.
    case("metadata not an object", MESSAGES, messages_body(metadata=5), 400),
    case("tools not a list", MESSAGES, messages_body(tools=5), 400),
    case("stop_sequences not a list", MESSAGES, messages_body(stop_sequences=5), 400),
    case("system a number", MESSAGES, messages_body(system=5), 400),
    case("output_config not an object", MESSAGES, messages_body(output_config=5), 400),
    case(
        "image source not an object",
        MESSAGES,
        messages_body(messages=[{"role": "user", "content": [{"type": "image", "source": 5}]}]),
        400,
    ),
    case(
        "tool_result content a number",
        MESSAGES,
        messages_body(messages=[{"role": "user", "content": [{"type": "tool_result", "content": 5}]}]),
        400,
    ),
    case(
        "assistant block a number",
        MESSAGES,
        messages_body(messages=[{"role": "assistant", "content": [5]}]),
        400,
    ),
    # gateway/accounting/record.py: PostgreSQL refused the ledger row (NUL, or longer than the column).
    case("NUL in the model", CHAT, chat(model="gpt-4o-mini\u0000"), 404),
    case("NUL in user", CHAT, chat(user="a\u0000b"), 200),
    case("user of 1,000 characters", CHAT, chat(user="u" * 1000), 200),
    case("model of 300 characters", MESSAGES, messages_body(model="m" * 300), 404),
]


@pytest.mark.parametrize(("path", "body", "status"), MALFORMED + REGRESSIONS)
def test_named_bodies(ledger: Ledger, path: str, body: bytes, status: int) -> None:
    response = ledger.post(path, body)
    assert_well_formed(path, response)
    assert response.status_code == status, response.text[:300]


def test_an_internal_error_on_messages_names_no_detail() -> None:
    """gateway/routes/dialects.py sent `str(exc)` of any exception to an Anthropic client (a 500 said
    "'int' object has no attribute 'get'"); now it says what the OpenAI dialect says."""
    status, body, _ = ANTHROPIC_MESSAGES.error(RuntimeError("password=hunter2 at db.internal:5432"))
    assert status == 500
    error = orjson.loads(body)
    assert error == {
        "type": "error",
        "error": {"type": "api_error", "message": "internal error in the gateway"},
    }


def test_one_ledger_row_per_response(ledger: Ledger) -> None:
    """Runs after the tests above (same module, same gateway): every response they got has its row."""
    assert len(ledger.sent) > 3 * len(MODELS)
    ledger.assert_one_row_per_response()
