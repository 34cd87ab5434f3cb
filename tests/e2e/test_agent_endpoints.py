"""The endpoints SDKs and agents call besides chat, driven by the official SDKs: legacy completions,
token counting, model lookup, and reasoning models' parameters (issue 27, api-2)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pydantic
import pytest
from anthropic.types import MessageTokensCount, RawMessageStreamEvent
from openai.types import Completion, Model

from gateway.config.loader import build_config
from sandbox.server import SandboxServer
from tests.conftest import PRICE
from tests.harness import GatewayServer

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

CLAUDE_PRICE = {
    "input_per_mtok": "3",
    "output_per_mtok": "15",
    "cached_input_per_mtok": "0.30",
    "cache_write_per_mtok": "3.75",
    "cache_write_1h_per_mtok": "6",
}
ASK = [{"role": "user", "content": "Name three prime numbers."}]
EVENTS: pydantic.TypeAdapter[RawMessageStreamEvent] = pydantic.TypeAdapter(RawMessageStreamEvent)


@pytest.fixture(scope="module")
def upstreams() -> Iterator[dict[str, SandboxServer]]:
    with (
        SandboxServer(dialect="openai", profile="instant") as openai_sb,
        SandboxServer(dialect="vllm", profile="instant") as vllm_sb,
        SandboxServer(dialect="anthropic", profile="instant") as anthropic_sb,
        SandboxServer(dialect="gemini", profile="instant") as gemini_sb,
    ):
        yield {"openai": openai_sb, "vllm": vllm_sb, "anthropic": anthropic_sb, "gemini": gemini_sb}


@pytest.fixture(autouse=True)
def _reset(upstreams: dict[str, SandboxServer]) -> None:
    for server in upstreams.values():
        httpx.post(server.base_url + "/_sandbox/reset").raise_for_status()


def settings(upstreams: dict[str, SandboxServer], sqlite_url: str, spool: str) -> dict[str, Any]:
    oai = upstreams["openai"].base_url + "/v1"
    return {
        "database": {"url": sqlite_url, "auto_migrate": False},
        "ledger": {"flush_interval_ms": 5, "spool_dir": spool},
        "resilience": {
            "retry": {"max_attempts": 2, "backoff_base_seconds": 0.01, "backoff_cap_seconds": 0.02}
        },
        "providers": {
            "openai": {"type": "openai", "base_url": oai, "api_key": "sk-o"},
            # The same upstream as a generic OpenAI-compatible server: names alone say nothing there.
            "compat": {"type": "openai_compatible", "base_url": oai, "api_key": "sk-o"},
            "local": {"type": "vllm", "base_url": upstreams["vllm"].base_url + "/v1"},
            "anthropic": {
                "type": "anthropic",
                "base_url": upstreams["anthropic"].base_url,
                "api_key": "sk-a",
            },
            "gemini": {"type": "gemini", "base_url": upstreams["gemini"].base_url, "api_key": "g-k"},
        },
        "models": {
            "gpt-4o-mini": {"provider": "openai", "price": PRICE},
            "instruct": {"provider": "openai", "upstream_model": "gpt-3.5-turbo-instruct", "price": PRICE},
            "llama": {
                "provider": "local",
                "upstream_model": "meta-llama/Llama-3.1-8B-Instruct",
                "tier": "local",
                "price": {"input_per_mtok": "0.06", "output_per_mtok": "0.06"},
            },
            "o4-mini": {"provider": "openai", "price": PRICE},
            "gpt-5-mini": {"provider": "openai", "price": PRICE},
            "compat-o3": {"provider": "compat", "upstream_model": "o3", "price": PRICE, "reasoning": True},
            "compat-o3-unmarked": {"provider": "compat", "upstream_model": "o3", "price": PRICE},
            "claude": {"provider": "anthropic", "upstream_model": "claude-sonnet-4-5", "price": CLAUDE_PRICE},
            "gemini": {"provider": "gemini", "upstream_model": "gemini-2.5-flash", "price": PRICE},
        },
        "aliases": {"thinker": "o4-mini"},
    }


@pytest.fixture(scope="module")
def gateway(
    upstreams: dict[str, SandboxServer], sqlite_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayServer]:
    spool = str(tmp_path_factory.mktemp("spool"))
    config = build_config(settings(upstreams, sqlite_url, spool), environ={})
    with GatewayServer(config) as server:
        yield server


@pytest.fixture
def oai(gateway: GatewayServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=gateway.base_url + "/v1", api_key="k", max_retries=0) as client:
        yield client


@pytest.fixture
def claude_sdk(gateway: GatewayServer) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=gateway.base_url, api_key="k", max_retries=0) as client:
        yield client


def cost(prompt: int, completion: int, *, per_in: int = 3, per_out: int = 15) -> int:
    """Nano-USD at $per_in / $per_out a million tokens, rounded half up once."""
    return (prompt * per_in * 10**9 + completion * per_out * 10**9 + 500_000) // 10**6


# -- legacy completions ---------------------------------------------------------------------------


@pytest.mark.parametrize("model", ["instruct", "llama"])
def test_legacy_completion_is_relayed_priced_and_logged(
    oai: openai.OpenAI, gateway: GatewayServer, model: str
) -> None:
    raw = oai.completions.with_raw_response.create(model=model, prompt="Once upon a time", max_tokens=12)
    Completion.model_validate_json(raw.http_response.content)
    completion = raw.parse()
    assert completion.object == "text_completion" and completion.id.startswith("cmpl-")
    assert completion.choices[0].text and completion.choices[0].finish_reason in ("stop", "length")
    usage = completion.usage
    assert usage is not None and 0 < usage.completion_tokens <= 12
    row = gateway.ledger_row(raw.headers["x-request-id"])
    assert row["endpoint"] == "completions" and row["status"] == 200
    assert (row["prompt_tokens"], row["completion_tokens"]) == (usage.prompt_tokens, usage.completion_tokens)
    if model == "instruct":
        assert row["cost_nano"] == cost(usage.prompt_tokens, usage.completion_tokens)
    assert raw.headers["x-tollgate-cost-usd"] == format(row["cost_nano"] / 10**9, ".9f").rstrip("0").rstrip(
        "."
    )


@pytest.mark.parametrize("model", ["instruct", "llama"])
def test_legacy_completion_streams_with_one_ledger_row(
    oai: openai.OpenAI, gateway: GatewayServer, model: str
) -> None:
    with oai.completions.with_streaming_response.create(
        model=model,
        prompt="Once upon a time",
        max_tokens=20,
        stream=True,
        stream_options={"include_usage": True},
    ) as response:
        request_id = response.headers["x-request-id"]
        chunks = list(response.parse())
    assert all(chunk.object == "text_completion" for chunk in chunks)
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    assert text
    assert any(c.choices and c.choices[0].finish_reason for c in chunks)
    last = chunks[-1]
    assert last.choices == [] and last.usage is not None
    rows = [r for r in gateway.ledger_rows() if r["id"] == request_id]
    assert len(rows) == 1
    row = rows[0]
    assert row["stream"] is True and row["status"] == 200 and row["endpoint"] == "completions"
    assert row["completion_tokens"] == last.usage.completion_tokens
    assert row["usage_estimated"] is False
    if model == "instruct":
        assert row["cost_nano"] == cost(last.usage.prompt_tokens, last.usage.completion_tokens)


def test_stream_without_usage_hides_it_but_still_bills(oai: openai.OpenAI, gateway: GatewayServer) -> None:
    with oai.completions.with_streaming_response.create(
        model="instruct", prompt="Say hello", stream=True
    ) as response:
        request_id = response.headers["x-request-id"]
        chunks = list(response.parse())
    assert all(c.usage is None for c in chunks) and chunks[-1].choices
    row = gateway.ledger_row(request_id)
    assert row["completion_tokens"] > 0 and row["usage_estimated"] is False and row["cost_nano"] > 0


@pytest.mark.parametrize("model", ["claude", "gemini"])
def test_legacy_completion_elsewhere_is_a_clear_400(
    oai: openai.OpenAI, gateway: GatewayServer, model: str
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        oai.completions.create(model=model, prompt="hello", extra_headers={"x-request-id": f"legacy-{model}"})
    body = caught.value.body
    assert isinstance(body, dict) and body["code"] == "unsupported_endpoint"
    assert "/v1/chat/completions" in body["message"]
    row = gateway.ledger_row(f"legacy-{model}")
    assert row["status"] == 400 and row["endpoint"] == "completions" and row["cost_nano"] == 0


def test_chat_model_on_openai_completions_is_openai_s_404(oai: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        oai.completions.create(model="gpt-4o-mini", prompt="hello")
    assert "chat model" in str(caught.value)


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": "instruct"}, "prompt"),
        ({"model": "instruct", "prompt": 42}, "prompt"),
        ({"model": "instruct", "prompt": []}, "prompt"),
        ({"model": "instruct", "prompt": "x", "max_tokens": "lots"}, "max_tokens"),
        ({"model": "instruct", "prompt": "x", "logprobs": 9}, "logprobs"),
        ({"model": "instruct", "prompt": "x", "stream_options": {"include_usage": True}}, "stream_options"),
        ({"prompt": "x"}, "model"),
    ],
)
def test_bad_completion_bodies_are_openai_400s(
    gateway: GatewayServer, body: dict[str, Any], param: str
) -> None:
    response = httpx.post(gateway.base_url + "/v1/completions", json=body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["param"] == param and error["type"] == "invalid_request_error"


def test_unknown_model_on_completions_is_openai_s_404(gateway: GatewayServer) -> None:
    response = httpx.post(gateway.base_url + "/v1/completions", json={"model": "unknown-x", "prompt": "x"})
    assert response.status_code == 404 and response.json()["error"]["code"] == "model_not_found"


# -- reasoning models' parameters -----------------------------------------------------------------


def test_sandbox_refuses_max_tokens_for_a_reasoning_model_as_openai_does(
    upstreams: dict[str, SandboxServer],
) -> None:
    """Without the gateway's translation this is what a client gets: the test below would fail."""
    with openai.OpenAI(base_url=upstreams["openai"].base_url + "/v1", api_key="sk", max_retries=0) as direct:
        with pytest.raises(openai.BadRequestError) as caught:
            direct.chat.completions.create(model="o4-mini", messages=ASK, max_tokens=50)  # type: ignore[arg-type]
        assert "Unsupported parameter: 'max_tokens'" in str(caught.value)
        with pytest.raises(openai.BadRequestError) as caught:
            direct.chat.completions.create(model="gpt-5-mini", messages=ASK, temperature=0.2)  # type: ignore[arg-type]
        assert "Unsupported value: 'temperature'" in str(caught.value)


@pytest.mark.parametrize("model", ["thinker", "o4-mini", "gpt-5-mini", "compat-o3"])
def test_max_tokens_and_temperature_are_translated_for_reasoning_models(
    oai: openai.OpenAI, gateway: GatewayServer, model: str
) -> None:
    raw = oai.chat.completions.with_raw_response.create(
        model=model,
        messages=ASK,
        max_tokens=7,
        temperature=0.2,
        top_p=0.5,  # type: ignore[arg-type]
    )
    completion = raw.parse()
    assert completion.usage is not None and completion.usage.completion_tokens <= 7
    assert raw.headers["x-tollgate-dropped-params"] == "temperature,top_p"
    row = gateway.ledger_row(raw.headers["x-request-id"])
    assert row["status"] == 200
    assert "max_tokens_renamed" in row["flags"] and "param_dropped:temperature" in row["flags"]


def test_reasoning_stream_is_translated_too(oai: openai.OpenAI) -> None:
    with oai.chat.completions.with_streaming_response.create(
        model="thinker",
        messages=ASK,
        max_tokens=5,
        temperature=0.7,
        stream=True,  # type: ignore[arg-type]
    ) as response:
        assert response.headers["x-tollgate-dropped-params"] == "temperature"
        chunks = list(response.parse())
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


def test_chat_models_keep_their_parameters(oai: openai.OpenAI) -> None:
    raw = oai.chat.completions.with_raw_response.create(
        model="gpt-4o-mini",
        messages=ASK,
        max_tokens=7,
        temperature=0.2,  # type: ignore[arg-type]
    )
    assert raw.parse().choices[0].message.content
    assert "x-tollgate-dropped-params" not in raw.headers


def test_a_compatible_server_is_not_judged_by_name(oai: openai.OpenAI) -> None:
    """`compat-o3-unmarked` is an OpenAI-compatible provider without `reasoning: true`: its body goes
    as sent, and the upstream's own refusal comes back."""
    with pytest.raises(openai.BadRequestError) as caught:
        oai.chat.completions.create(model="compat-o3-unmarked", messages=ASK, max_tokens=7)  # type: ignore[arg-type]
    assert "max_completion_tokens" in str(caught.value)


# -- token counting -------------------------------------------------------------------------------

SYSTEM = "You are a careful assistant who answers in one sentence."
TOOL = {
    "name": "get_weather",
    "description": "Current weather in a city.",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def test_count_tokens_for_an_anthropic_model_is_anthropic_s_own_count(
    claude_sdk: anthropic.Anthropic, gateway: GatewayServer, upstreams: dict[str, SandboxServer]
) -> None:
    raw = claude_sdk.messages.with_raw_response.count_tokens(
        model="claude",
        system=SYSTEM,
        messages=ASK,
        tools=[TOOL],  # type: ignore[list-item]
    )
    counted = raw.parse()
    assert isinstance(counted, MessageTokensCount)
    assert raw.headers["x-tollgate-token-count"] == "upstream"
    # The emulator counts what it bills: the same prompt sent whole reports the same input tokens.
    with anthropic.Anthropic(base_url=upstreams["anthropic"].base_url, api_key="sk", max_retries=0) as direct:
        direct_count = direct.messages.count_tokens(
            model="claude-sonnet-4-5",
            system=SYSTEM,
            messages=ASK,
            tools=[TOOL],  # type: ignore[list-item]
        )
        sent = direct.messages.create(
            model="claude-sonnet-4-5",
            system=SYSTEM,
            messages=ASK,
            tools=[TOOL],
            max_tokens=5,  # type: ignore[list-item]
        )
    assert counted.input_tokens == direct_count.input_tokens == sent.usage.input_tokens > 0
    row = gateway.ledger_row(raw.headers["x-request-id"])
    assert row["endpoint"] == "messages.count_tokens" and row["status"] == 200
    assert (row["provider"], row["upstream_model"], row["cost_nano"]) == ("anthropic", "claude-sonnet-4-5", 0)
    assert row["attempts"] == 1


@pytest.mark.parametrize(
    ("model", "how"), [("gpt-4o-mini", "o200k_base"), ("llama", "estimated"), ("gemini", "estimated")]
)
def test_count_tokens_elsewhere_is_counted_here(
    claude_sdk: anthropic.Anthropic, gateway: GatewayServer, model: str, how: str
) -> None:
    raw = claude_sdk.messages.with_raw_response.count_tokens(model=model, system=SYSTEM, messages=ASK)
    counted = raw.parse()
    assert raw.headers["x-tollgate-token-count"] == how
    # o200k_base: "You are a careful assistant who answers in one sentence." is 11 tokens, "Name
    # three prime numbers." 5; 3 a message and 3 to prime the answer.
    assert counted.input_tokens == 11 + 5 + 3 * 3
    row = gateway.ledger_row(raw.headers["x-request-id"])
    assert row["status"] == 200 and row["attempts"] == 0 and row["cost_nano"] == 0


def test_count_tokens_bad_input_is_an_anthropic_4xx(
    claude_sdk: anthropic.Anthropic, gateway: GatewayServer
) -> None:
    with pytest.raises(anthropic.BadRequestError) as caught:
        claude_sdk.messages.count_tokens(model="claude", messages=[])
    assert caught.value.body["type"] == "error"  # type: ignore[index]
    with pytest.raises(anthropic.NotFoundError):
        claude_sdk.messages.count_tokens(model="nope", messages=ASK)  # type: ignore[arg-type]
    response = httpx.post(gateway.base_url + "/v1/messages/count_tokens", content=b"{not json")
    assert response.status_code == 400 and response.json()["type"] == "error"
    response = httpx.post(
        gateway.base_url + "/v1/messages/count_tokens",
        json={"model": "claude", "messages": [{"role": "user", "content": [{"type": "bogus"}]}]},
    )
    assert response.status_code == 400 and response.json()["error"]["type"] == "invalid_request_error"


def test_count_tokens_upstream_refusal_is_relayed_with_a_row(
    claude_sdk: anthropic.Anthropic, gateway: GatewayServer
) -> None:
    """A field Anthropic's count_tokens does not take reaches it and comes back as its 400."""
    with pytest.raises(anthropic.BadRequestError):
        claude_sdk.messages.count_tokens(
            model="claude",
            messages=ASK,
            extra_body={"stream": True},
            extra_headers={"x-request-id": "count-refused"},  # type: ignore[arg-type]
        )
    row = gateway.ledger_row("count-refused")
    assert row["status"] == 400 and row["provider"] == "anthropic"


# -- one model --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "owner"), [("gpt-4o-mini", "openai"), ("thinker", "openai"), ("llama", "local")]
)
def test_retrieve_a_model_in_openai_s_shape(oai: openai.OpenAI, name: str, owner: str) -> None:
    raw = oai.models.with_raw_response.retrieve(name)
    Model.model_validate_json(raw.http_response.content)
    model = raw.parse()
    assert (model.id, model.object, model.owned_by) == (name, "model", owner)


def test_retrieve_an_unknown_model_is_openai_s_404(oai: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        oai.models.retrieve("no-such-model")
    body = caught.value.body
    assert (
        isinstance(body, dict)
        and body["code"] == "model_not_found"
        and body["type"] == "invalid_request_error"
    )


def test_new_routes_are_in_the_openapi_document(gateway: GatewayServer) -> None:
    paths = httpx.get(gateway.base_url + "/openapi.json").json()["paths"]
    for path, required in (
        ("/v1/completions", ["model", "prompt"]),
        ("/v1/messages/count_tokens", ["model", "messages"]),
    ):
        schema = paths[path]["post"]["requestBody"]["content"]["application/json"]["schema"]
        assert schema["required"] == required
    assert "get" in paths["/v1/models/{model_id}"]


# -- Anthropic dialect fidelity ------------------------------------------------------------------

CONTEXT = "Toll roads and their history across Europe. " * 300


def cached_request(ttl: str, tag: str) -> dict[str, Any]:
    """A prompt long enough to cache, its prefix its own (`tag`), so each test writes rather than reads."""
    text = f"[{tag}] {CONTEXT}"
    return {
        "model": "claude",
        "max_tokens": 50,
        "system": [{"type": "text", "text": text, "cache_control": {"type": "ephemeral", "ttl": ttl}}],
        "messages": [{"role": "user", "content": f"Summarise ({ttl})."}],
    }


def test_messages_keep_the_cache_write_split_and_price_1h_writes_at_2x(
    claude_sdk: anthropic.Anthropic, gateway: GatewayServer
) -> None:
    raw = claude_sdk.messages.with_raw_response.create(**cached_request("1h", "split"))
    message = raw.parse()
    usage = message.usage
    assert usage.cache_creation is not None
    written = usage.cache_creation_input_tokens or 0
    assert written > 1000 and usage.cache_creation.ephemeral_1h_input_tokens == written
    assert usage.cache_creation.ephemeral_5m_input_tokens == 0
    row = gateway.ledger_row(raw.headers["x-request-id"])
    assert row["cache_write_tokens"] == row["cache_write_1h_tokens"] == written
    # $6/MTok for 1h writes (2x the $3 input), $3 for the rest of the prompt.
    expected = (
        written * 6 * 10**9 + usage.input_tokens * 3 * 10**9 + usage.output_tokens * 15 * 10**9 + 500_000
    ) // 10**6
    assert row["cost_nano"] == expected


def test_a_1h_write_costs_more_than_a_5m_one(claude_sdk: anthropic.Anthropic, gateway: GatewayServer) -> None:
    five = claude_sdk.messages.with_raw_response.create(**cached_request("5m", "five"))
    hour = claude_sdk.messages.with_raw_response.create(**cached_request("1h", "hour"))
    assert five.parse().usage.cache_creation.ephemeral_5m_input_tokens > 1000  # type: ignore[union-attr]
    rows = [gateway.ledger_row(r.headers["x-request-id"]) for r in (five, hour)]
    assert rows[0]["cache_write_1h_tokens"] == 0 and rows[1]["cache_write_1h_tokens"] > 1000
    assert rows[1]["input_cost_nano"] > rows[0]["input_cost_nano"] * 1.5


def test_a_stream_from_anthropic_is_relayed_with_its_own_counts(
    claude_sdk: anthropic.Anthropic, gateway: GatewayServer
) -> None:
    request = {**cached_request("1h", "stream"), "stream": True}
    with claude_sdk.messages.with_streaming_response.create(**request) as response:
        request_id = response.headers["x-request-id"]
        events = list(response.parse())
    for event in events:
        EVENTS.validate_python(event.model_dump())
    start = events[0]
    assert start.type == "message_start" and start.message.id.startswith("msg_")
    # The prompt's counts at the start, as Anthropic sends them (re-encoded chunks said 0).
    assert start.message.usage.input_tokens > 0
    assert (start.message.usage.cache_creation_input_tokens or 0) > 1000
    # The provider's own events, pings included (the SDK hides those): its bytes, not a re-encoding.
    wire = httpx.post(
        gateway.base_url + "/v1/messages", json={**cached_request("1h", "wire"), "stream": True}, timeout=30
    ).content
    assert b"event: ping\n" in wire and b'"ephemeral_1h_input_tokens"' in wire.split(b"\n\n")[0]
    delta = next(e for e in events if e.type == "message_delta")
    row = gateway.ledger_row(request_id)
    assert row["completion_tokens"] == delta.usage.output_tokens
    assert row["prompt_tokens"] == (
        start.message.usage.input_tokens
        + (start.message.usage.cache_creation_input_tokens or 0)
        + (start.message.usage.cache_read_input_tokens or 0)
    )
    assert row["cache_write_1h_tokens"] > 1000


def test_a_stream_from_elsewhere_is_still_anthropic_shaped(claude_sdk: anthropic.Anthropic) -> None:
    with claude_sdk.messages.stream(model="gpt-4o-mini", max_tokens=50, messages=ASK) as stream:  # type: ignore[arg-type]
        final = stream.get_final_message()
    assert final.id.startswith("msg_") and final.usage.output_tokens > 0 and final.usage.input_tokens > 0


def overload(upstreams: dict[str, SandboxServer]) -> None:
    rule = {"kind": "status", "status": 529, "count": -1}
    httpx.post(upstreams["anthropic"].base_url + "/_sandbox/faults", json=rule).raise_for_status()


def test_overloaded_anthropic_is_529_on_messages(
    claude_sdk: anthropic.Anthropic, gateway: GatewayServer, upstreams: dict[str, SandboxServer]
) -> None:
    overload(upstreams)
    with pytest.raises(anthropic.APIStatusError) as caught:
        claude_sdk.messages.create(
            model="claude",
            max_tokens=10,
            messages=ASK,
            extra_headers={"x-request-id": "overloaded-messages"},  # type: ignore[arg-type]
        )
    assert caught.value.status_code == 529
    assert caught.value.body["error"]["type"] == "overloaded_error"  # type: ignore[index]
    row = gateway.ledger_row("overloaded-messages")
    assert row["status"] == 529 and row["error_type"] == "upstream_overloaded" and row["attempts"] == 2


def test_overloaded_anthropic_is_503_on_the_openai_side(
    oai: openai.OpenAI, upstreams: dict[str, SandboxServer]
) -> None:
    overload(upstreams)
    with pytest.raises(openai.InternalServerError) as caught:
        oai.chat.completions.create(model="claude", messages=ASK)  # type: ignore[arg-type]
    assert caught.value.status_code == 503
    assert caught.value.body["code"] == "upstream_overloaded"  # type: ignore[index]
