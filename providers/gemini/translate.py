"""OpenAI chat requests into Gemini `generateContent` bodies, and Gemini answers back: pure, no I/O.

Decisions:
- `temperature` (0 to 2 on both sides), `top_p`, penalties, `seed`, `n` (as `candidateCount`) map
  one to one; `top_k` passes through when sent. `logprobs` is rejected with a 400: the client would
  expect them and this adapter does not return them.
- `response_format: json_schema` becomes `responseMimeType: application/json` with
  `responseJsonSchema` (plain JSON Schema, so OpenAI schemas need no rewriting into Gemini's OpenAPI
  subset); `json_object` becomes JSON mode without a schema.
- Tools are declared with `parametersJsonSchema` for the same reason.
- A prompt Gemini blocks (`promptFeedback.blockReason`, no candidates) is not an error: it answers as
  a completion with empty content and `finish_reason: content_filter`, as a filtered answer would.
- Thought parts are never shown as content; their tokens are billed as reasoning output.
- `user`, `reasoning_effort`, `service_tier`, `store`, OpenAI `metadata` and `logit_bias` are dropped.
"""

from __future__ import annotations

from typing import Any

import orjson

from providers.errors import invalid_parameter as invalid
from providers.gemini.content import to_gemini_contents
from providers.openai_compat import to_openai_usage
from providers.types import JSON
from usage import Usage

_GENERATION = {
    "temperature": "temperature",
    "top_p": "topP",
    "top_k": "topK",
    "presence_penalty": "presencePenalty",
    "frequency_penalty": "frequencyPenalty",
    "seed": "seed",
}

FILTERED = frozenset(
    {
        "SAFETY",
        "RECITATION",
        "LANGUAGE",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "IMAGE_SAFETY",
        "IMAGE_PROHIBITED_CONTENT",
        "IMAGE_RECITATION",
    }
)


def to_gemini_request(body: JSON) -> JSON:
    """The `generateContent` body for an OpenAI chat request (the model goes in the URL)."""
    if body.get("logprobs") or body.get("top_logprobs"):
        raise invalid("logprobs are not returned by this Gemini adapter")
    system, contents = to_gemini_contents(body.get("messages"))
    request: JSON = {"contents": contents}
    if system:
        request["systemInstruction"] = system
    config = {name: body[key] for key, name in _GENERATION.items() if body.get(key) is not None}
    max_tokens = body.get("max_completion_tokens")
    max_tokens = body.get("max_tokens") if max_tokens is None else max_tokens
    if max_tokens is not None:
        config["maxOutputTokens"] = max_tokens
    stop = body.get("stop")
    if stop:
        config["stopSequences"] = [stop] if isinstance(stop, str) else list(stop)
    if isinstance(body.get("n"), int) and body["n"] > 1:
        config["candidateCount"] = body["n"]
    config.update(_response_format(body.get("response_format")))
    if config:
        request["generationConfig"] = config
    if body.get("tools"):
        declarations = [_to_declaration(tool) for tool in body["tools"]]
        request["tools"] = [{"functionDeclarations": declarations}]
        tool_config = _to_tool_config(body.get("tool_choice"))
        if tool_config:
            request["toolConfig"] = {"functionCallingConfig": tool_config}
    return request


def _response_format(response_format: Any) -> JSON:
    kind = response_format.get("type") if isinstance(response_format, dict) else None
    if kind == "json_object":
        return {"responseMimeType": "application/json"}
    if kind == "json_schema":
        schema = (response_format.get("json_schema") or {}).get("schema")
        if not isinstance(schema, dict):
            raise invalid("response_format.json_schema.schema must be a JSON schema object")
        return {"responseMimeType": "application/json", "responseJsonSchema": schema}
    if kind not in (None, "text"):
        raise invalid(f"response_format {kind!r} is not supported")
    return {}


def _to_declaration(tool: Any) -> JSON:
    if (
        not isinstance(tool, dict)
        or tool.get("type") != "function"
        or not isinstance(tool.get("function"), dict)
    ):
        raise invalid("only tools of type 'function' can be sent to Gemini")
    function = tool["function"]
    declaration: JSON = {"name": function.get("name")}
    if function.get("description"):
        declaration["description"] = function["description"]
    if function.get("parameters"):
        declaration["parametersJsonSchema"] = function["parameters"]
    return declaration


def _to_tool_config(choice: Any) -> JSON | None:
    if choice is None or choice == "auto":
        return None
    if choice == "required":
        return {"mode": "ANY"}
    if choice == "none":
        return {"mode": "NONE"}
    if isinstance(choice, dict) and isinstance(choice.get("function"), dict):
        return {"mode": "ANY", "allowedFunctionNames": [choice["function"].get("name")]}
    raise invalid(f"tool_choice {choice!r} is not supported")


def from_gemini_response(obj: Any, *, id: str, created: int, model: str) -> JSON:
    """An OpenAI `chat.completion` for a `GenerateContentResponse`; one choice per candidate."""
    response_id = str(obj.get("responseId") or id)
    choices = []
    for position, candidate in enumerate(obj.get("candidates") or ()):
        texts, calls = read_parts(candidate, call_prefix=f"call_{response_id}_{position}")
        message: JSON = {"role": "assistant", "content": "".join(texts) if texts or not calls else None}
        if calls:
            message["tool_calls"] = calls
        finish = to_finish_reason(candidate.get("finishReason"), tool_calls=bool(calls))
        index = candidate.get("index", position)
        choices.append({"index": index, "message": message, "finish_reason": finish, "logprobs": None})
    if not choices:
        # The prompt itself was blocked (promptFeedback.blockReason): a filtered, empty answer.
        message = {"role": "assistant", "content": ""}
        choices.append({"index": 0, "message": message, "finish_reason": "content_filter", "logprobs": None})
    return {
        "id": response_id,
        "object": "chat.completion",
        "created": created,
        "model": str(obj.get("modelVersion") or model),
        "choices": choices,
        "usage": to_openai_usage(from_gemini_usage(obj.get("usageMetadata"))),
    }


def read_parts(candidate: JSON, *, call_prefix: str, first_call: int = 0) -> tuple[list[str], list[JSON]]:
    """A candidate's visible text and its function calls as OpenAI tool calls (thoughts left out)."""
    texts: list[str] = []
    calls: list[JSON] = []
    for part in (candidate.get("content") or {}).get("parts") or ():
        if "functionCall" in part:
            call = part["functionCall"]
            arguments = orjson.dumps(call.get("args") or {}).decode()
            tool_call: JSON = {
                "id": call.get("id") or f"{call_prefix}_{first_call + len(calls)}",
                "type": "function",
                "function": {"name": call.get("name") or "", "arguments": arguments},
            }
            if part.get("thoughtSignature"):
                tool_call["extra_content"] = {"google": {"thought_signature": part["thoughtSignature"]}}
            calls.append(tool_call)
        elif part.get("text") and not part.get("thought"):
            texts.append(part["text"])
    return texts, calls


def to_finish_reason(reason: Any, *, tool_calls: bool) -> str:
    if reason in FILTERED:
        return "content_filter"
    if reason == "MAX_TOKENS":
        return "length"
    return "tool_calls" if tool_calls else "stop"


def from_gemini_usage(meta: Any) -> Usage:
    """`promptTokenCount` already holds the cached share; thoughts are billed as output."""
    if not isinstance(meta, dict):
        return Usage()
    thoughts = int(meta.get("thoughtsTokenCount") or 0)
    return Usage(
        prompt_tokens=int(meta.get("promptTokenCount") or 0) + int(meta.get("toolUsePromptTokenCount") or 0),
        completion_tokens=int(meta.get("candidatesTokenCount") or 0) + thoughts,
        cached_tokens=int(meta.get("cachedContentTokenCount") or 0),
        reasoning_tokens=thoughts,
        raw=meta,
    )
