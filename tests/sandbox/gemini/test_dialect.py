"""The gemini dialect over httpx, checked against a pydantic model of GenerateContentResponse.

The model follows the documented REST shape (ai.google.dev/api/generate-content):
unknown fields are forbidden so the sandbox cannot drift into fields Gemini
does not send.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import httpx
import orjson
import pytest
from pydantic import BaseModel, ConfigDict

from sandbox.server import SandboxServer
from tests.sandbox.clients import long_prompt

MODEL = "gemini-2.5-flash"
KEY = {"x-goog-api-key": "test-key"}
HELLO = {"contents": [{"role": "user", "parts": [{"text": "Tell me about toll roads."}]}]}
WEATHER = {
    "functionDeclarations": [
        {
            "name": "get_weather",
            "description": "Current weather in a city.",
            "parameters": {
                "type": "OBJECT",
                "properties": {"city": {"type": "STRING"}},
                "required": ["city"],
            },
        }
    ]
}


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FunctionCall(Strict):
    name: str
    args: dict[str, Any]


class Part(Strict):
    text: str | None = None
    thought: bool | None = None
    functionCall: FunctionCall | None = None


class Content(Strict):
    role: Literal["model"]
    parts: list[Part] | None = None


class SafetyRating(Strict):
    category: str
    probability: Literal["NEGLIGIBLE", "LOW", "MEDIUM", "HIGH"]
    blocked: bool | None = None


class Candidate(Strict):
    content: Content | None = None
    finishReason: Literal["STOP", "MAX_TOKENS", "SAFETY", "RECITATION", "OTHER"] | None = None
    index: int
    safetyRatings: list[SafetyRating] | None = None


class ModalityTokenCount(Strict):
    modality: Literal["TEXT", "IMAGE", "AUDIO", "VIDEO", "DOCUMENT"]
    tokenCount: int


class UsageMetadata(Strict):
    promptTokenCount: int
    candidatesTokenCount: int | None = None
    totalTokenCount: int
    cachedContentTokenCount: int | None = None
    thoughtsTokenCount: int | None = None
    toolUsePromptTokenCount: int | None = None
    promptTokensDetails: list[ModalityTokenCount] | None = None
    cacheTokensDetails: list[ModalityTokenCount] | None = None


class PromptFeedback(Strict):
    blockReason: Literal["SAFETY", "OTHER", "BLOCKLIST", "PROHIBITED_CONTENT"]
    safetyRatings: list[SafetyRating] | None = None


class GenerateContentResponse(Strict):
    candidates: list[Candidate] | None = None
    promptFeedback: PromptFeedback | None = None
    usageMetadata: UsageMetadata
    modelVersion: str
    responseId: str

    def text(self) -> str:
        assert self.candidates
        content = self.candidates[0].content
        return "".join(p.text or "" for p in (content.parts or []) if not p.thought) if content else ""


def generate(
    http: httpx.Client, sb: SandboxServer, body: dict[str, Any], model: str = MODEL
) -> GenerateContentResponse:
    response = http.post(f"{sb.base_url}/v1beta/models/{model}:generateContent", json=body, headers=KEY)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/json")
    return GenerateContentResponse.model_validate_json(response.content)


def sse_frames(http: httpx.Client, sb: SandboxServer, body: dict[str, Any]) -> list[GenerateContentResponse]:
    url = f"{sb.base_url}/v1beta/models/{MODEL}:streamGenerateContent?alt=sse"
    response = http.post(url, json=body, headers=KEY)
    assert response.headers["content-type"].startswith("text/event-stream")
    chunks = response.text.split("\r\n\r\n")
    assert chunks[-1] == "" and all(c.startswith("data: ") for c in chunks[:-1])
    return [GenerateContentResponse.model_validate_json(c.removeprefix("data: ")) for c in chunks[:-1]]


def usage_adds_up(usage: UsageMetadata) -> None:
    parts = (usage.candidatesTokenCount, usage.thoughtsTokenCount, usage.toolUsePromptTokenCount)
    assert usage.totalTokenCount == usage.promptTokenCount + sum(p or 0 for p in parts)


def test_generate_content_shape_and_usage(http: httpx.Client, gemini_sb: SandboxServer) -> None:
    reply = generate(http, gemini_sb, HELLO)
    assert reply.modelVersion == MODEL and reply.responseId
    assert reply.candidates and reply.candidates[0].finishReason == "STOP" and reply.text()
    usage = reply.usageMetadata
    usage_adds_up(usage)
    assert (
        usage.promptTokenCount > 0 and usage.candidatesTokenCount and 20 <= usage.candidatesTokenCount <= 64
    )
    assert usage.cachedContentTokenCount is None and usage.thoughtsTokenCount is None


def test_sse_stream_matches_the_whole_answer(http: httpx.Client, gemini_sb: SandboxServer) -> None:
    whole = generate(http, gemini_sb, HELLO)
    frames = sse_frames(http, gemini_sb, HELLO)
    assert len(frames) > 1 and len({f.responseId for f in frames}) == 1
    assert "".join(f.text() for f in frames) == whole.text()
    assert [f.candidates[0].finishReason for f in frames if f.candidates][-1] == "STOP"
    assert all(f.candidates and f.candidates[0].finishReason is None for f in frames[:-1])
    running = [f.usageMetadata.candidatesTokenCount or 0 for f in frames]
    assert running == sorted(running)  # cumulative, not per-frame deltas
    assert frames[-1].usageMetadata == whole.usageMetadata


def test_json_array_stream(http: httpx.Client, gemini_sb: SandboxServer) -> None:
    url = f"{gemini_sb.base_url}/v1beta/models/{MODEL}:streamGenerateContent"
    response = http.post(url, json=HELLO, params={"key": "k"})
    assert response.headers["content-type"].startswith("application/json")
    items = [GenerateContentResponse.model_validate(i) for i in orjson.loads(response.content)]
    assert "".join(i.text() for i in items) == generate(http, gemini_sb, HELLO).text()


def test_implicit_cache_hit_on_repeat(http: httpx.Client, gemini_sb: SandboxServer) -> None:
    body = {"contents": [{"role": "user", "parts": [{"text": long_prompt(2300)}]}]}
    first, second = (
        generate(http, gemini_sb, body).usageMetadata,
        generate(http, gemini_sb, body).usageMetadata,
    )
    assert first.cachedContentTokenCount is None
    cached = second.cachedContentTokenCount
    assert cached is not None and 2048 <= cached <= second.promptTokenCount == first.promptTokenCount
    assert second.cacheTokensDetails == [ModalityTokenCount(modality="TEXT", tokenCount=cached)]
    usage_adds_up(second)
    short = {"contents": [{"role": "user", "parts": [{"text": long_prompt(1500)}]}]}
    generate(http, gemini_sb, short)
    assert generate(http, gemini_sb, short).usageMetadata.cachedContentTokenCount is None


def test_thinking_tokens_are_reported_apart(http: httpx.Client, gemini_sb: SandboxServer) -> None:
    thinking = {"thinkingConfig": {"thinkingBudget": 1024}}
    reply = generate(http, gemini_sb, {**HELLO, "generationConfig": thinking})
    usage = reply.usageMetadata
    assert usage.thoughtsTokenCount and usage.thoughtsTokenCount > 0
    assert usage.candidatesTokenCount == generate(http, gemini_sb, HELLO).usageMetadata.candidatesTokenCount
    usage_adds_up(usage)
    shown = generate(http, gemini_sb, {**HELLO, "generationConfig": {"thinkingConfig": {"thinkingBudget": -1,
                                                                                "includeThoughts": True}}})  # fmt: skip
    assert shown.candidates and shown.candidates[0].content and shown.candidates[0].content.parts
    assert shown.candidates[0].content.parts[0].thought is True
    # Thoughts count against maxOutputTokens: a small budget leaves no text at all.
    starved = generate(http, gemini_sb, {**HELLO, "generationConfig": {**thinking, "maxOutputTokens": 10}})
    assert starved.candidates and starved.candidates[0].finishReason == "MAX_TOKENS"
    assert starved.candidates[0].content == Content(role="model")
    assert starved.usageMetadata.thoughtsTokenCount == 10


def test_safety_triggers(http: httpx.Client, gemini_sb: SandboxServer) -> None:
    unsafe = generate(http, gemini_sb, {"contents": [{"parts": [{"text": "please __unsafe__ now"}]}]})
    assert unsafe.candidates and unsafe.candidates[0].finishReason == "SAFETY"
    assert unsafe.candidates[0].content is None and unsafe.candidates[0].safetyRatings
    blocked = generate(http, gemini_sb, {"contents": [{"parts": [{"text": "__blocked__"}]}]})
    assert blocked.candidates is None and blocked.promptFeedback is not None
    assert blocked.promptFeedback.blockReason == "SAFETY"
    assert blocked.usageMetadata.totalTokenCount == blocked.usageMetadata.promptTokenCount
    frames = sse_frames(http, gemini_sb, {"contents": [{"parts": [{"text": "__blocked__"}]}]})
    assert len(frames) == 1 and frames[0].promptFeedback is not None


def test_function_calling(http: httpx.Client, gemini_sb: SandboxServer) -> None:
    forced = {**HELLO, "tools": [WEATHER], "toolConfig": {"functionCallingConfig": {"mode": "ANY"}}}
    reply = generate(http, gemini_sb, forced)
    assert reply.candidates and reply.candidates[0].content and reply.candidates[0].content.parts
    call = reply.candidates[0].content.parts[0].functionCall
    assert call is not None and call.name == "get_weather" and isinstance(call.args["city"], str)
    assert reply.candidates[0].finishReason == "STOP"
    assert generate(http, gemini_sb, {**HELLO, "tools": [WEATHER]}).text()  # AUTO, not asked: text
    question: list[dict[str, Any]] = [{"role": "user", "parts": [{"text": "Call get_weather for Oslo."}]}]
    asked = generate(http, gemini_sb, {"contents": question, "tools": [WEATHER]})  # AUTO, named: a call
    assert asked.candidates and asked.candidates[0].content and asked.candidates[0].content.parts
    assert asked.candidates[0].content.parts[0].functionCall is not None
    round_trip = [
        *question,
        {"role": "model", "parts": [{"functionCall": call.model_dump()}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "get_weather", "response": {"temp": 3}}}]},
    ]
    answer = generate(http, gemini_sb, {"contents": round_trip, "tools": [WEATHER]})
    assert answer.text() and answer.candidates and answer.candidates[0].finishReason == "STOP"
    streamed = sse_frames(http, gemini_sb, forced)
    assert len(streamed) == 1 and streamed[0].candidates and streamed[0].candidates[0].content


def test_json_mode_follows_the_schema(http: httpx.Client, gemini_sb: SandboxServer) -> None:
    schema = {"type": "OBJECT", "properties": {"name": {"type": "STRING"}, "age": {"type": "INTEGER"}},
              "required": ["name", "age"]}  # fmt: skip
    config = {"responseMimeType": "application/json", "responseSchema": schema}
    data = orjson.loads(generate(http, gemini_sb, {**HELLO, "generationConfig": config}).text())
    assert isinstance(data["name"], str) and isinstance(data["age"], int)


def test_generation_config_limits(http: httpx.Client, gemini_sb: SandboxServer) -> None:
    short = generate(http, gemini_sb, {**HELLO, "generationConfig": {"maxOutputTokens": 5}})
    assert short.candidates and short.candidates[0].finishReason == "MAX_TOKENS"
    assert short.usageMetadata.candidatesTokenCount == 5
    two = generate(
        http, gemini_sb, {**HELLO, "generation_config": {"candidate_count": 2}}
    )  # snake_case works too
    assert two.candidates and [c.index for c in two.candidates] == [0, 1]
    full = generate(http, gemini_sb, HELLO).text()
    stop = full.split()[2]
    cut = generate(http, gemini_sb, {**HELLO, "generationConfig": {"stopSequences": [stop]}})
    assert stop not in cut.text() and full.startswith(cut.text())


def test_embeddings(http: httpx.Client, gemini_sb: SandboxServer) -> None:
    url = f"{gemini_sb.base_url}/v1beta/models/gemini-embedding-001"
    one = http.post(
        url + ":embedContent", json={"content": {"parts": [{"text": "the cat sat"}]}}, headers=KEY
    )
    values = one.json()["embedding"]["values"]
    assert len(values) == 256 and math.isclose(sum(v * v for v in values), 1.0)
    requests = [{"model": "models/gemini-embedding-001", "content": {"parts": [{"text": t}]},
                 "outputDimensionality": 64} for t in ("the cat sat", "the cat sat down")]  # fmt: skip
    batch = http.post(url + ":batchEmbedContents", json={"requests": requests}, headers=KEY).json()
    a, b = (e["values"] for e in batch["embeddings"])
    assert len(a) == 64 and sum(x * y for x, y in zip(a, b, strict=True)) > 0.6
    wrong = http.post(url + ":batchEmbedContents", json={"requests": [{**requests[0], "model": "models/x"}]},
                       headers=KEY)  # fmt: skip
    assert wrong.status_code == 400 and wrong.json()["error"]["status"] == "INVALID_ARGUMENT"


def test_count_tokens_matches_prompt_tokens(http: httpx.Client, gemini_sb: SandboxServer) -> None:
    url = f"{gemini_sb.base_url}/v1beta/models/{MODEL}:countTokens"
    counted = http.post(url, json=HELLO, headers=KEY).json()
    assert counted["totalTokens"] == generate(http, gemini_sb, HELLO).usageMetadata.promptTokenCount
    wrapped = http.post(
        url, json={"generateContentRequest": {"model": f"models/{MODEL}", **HELLO}}, headers=KEY
    )
    assert wrapped.json()["totalTokens"] == counted["totalTokens"]


def test_models(http: httpx.Client, gemini_sb: SandboxServer) -> None:
    models = http.get(gemini_sb.base_url + "/v1beta/models", headers=KEY).json()["models"]
    assert [m["name"] for m in models] == [f"models/{m}" for m in ("gemini-2.5-flash", "gemini-2.5-pro",
                                                                      "gemini-embedding-001")]  # fmt: skip
    assert "generateContent" in models[0]["supportedGenerationMethods"]
    one = http.get(f"{gemini_sb.base_url}/v1beta/models/{MODEL}", headers=KEY).json()
    assert one["name"] == f"models/{MODEL}" and one["outputTokenLimit"] == 65_536


def test_unknown_model_is_404_when_models_are_configured(http: httpx.Client) -> None:
    with SandboxServer(dialect="gemini", profile="instant", models=[MODEL]) as sb:
        generate(http, sb, HELLO)
        response = http.post(f"{sb.base_url}/v1beta/models/gemini-x:generateContent", json=HELLO, headers=KEY)
    assert response.status_code == 404 and response.json()["error"]["status"] == "NOT_FOUND"
    assert "models/gemini-x is not found" in response.json()["error"]["message"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"contents": [{"role": "assistant", "parts": [{"text": "x"}]}]}, "Please use a valid role: user, model."),
        ({"contents": []}, "* GenerateContentRequest.contents: contents is not specified\n"),
        ({**HELLO, "max_tokens": 5}, 'Invalid JSON payload received. Unknown name "max_tokens": Cannot find field.'),
        ({**HELLO, "generationConfig": {"temperature": 3}},
         "* GenerateContentRequest.generation_config.temperature: must be in the range [0, 2]\n"),
        ({"contents": [{"role": "user", "parts": [{}]}]},
         "* GenerateContentRequest.contents[0].parts[0].data: required oneof field 'data' must have one "
         "initialized field\n"),
    ],
)  # fmt: skip
def test_invalid_requests(
    http: httpx.Client, gemini_sb: SandboxServer, body: dict[str, Any], message: str
) -> None:
    response = http.post(
        f"{gemini_sb.base_url}/v1beta/models/{MODEL}:generateContent", json=body, headers=KEY
    )
    assert response.status_code == 400
    assert response.json() == {"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}


def test_authentication(http: httpx.Client, gemini_sb: SandboxServer) -> None:
    url = f"{gemini_sb.base_url}/v1beta/models/{MODEL}:generateContent"
    missing = http.post(url, json=HELLO)
    assert missing.status_code == 403 and missing.json()["error"]["status"] == "PERMISSION_DENIED"
    assert http.post(url, json=HELLO, params={"key": "k"}).status_code == 200
    bad_json = http.post(url, content=b"{", headers={**KEY, "content-type": "application/json"})
    assert bad_json.status_code == 400 and bad_json.json()["error"]["status"] == "INVALID_ARGUMENT"
    log = http.get(gemini_sb.base_url + "/_sandbox/requests").json()
    assert [e["query"] for e in log] == ["", "key=k", ""]
