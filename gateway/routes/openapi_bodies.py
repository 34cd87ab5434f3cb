"""The fast-lane POST routes in the OpenAPI document. They are plain Starlette routes (no pydantic
models, `gateway.http.hot_path`), so FastAPI leaves them out; without them a schemathesis run over
`/openapi.json` never sends a chat completion. Bodies are described as the parsers check them
(`chat_request`, `dialects`, `embedding_request`, `providers.responses`): the required fields and
the shapes refused at ingress, the rest left open (`additionalProperties`), as OpenAI and
Anthropic accept more."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

JSON = dict[str, Any]

_ERROR: JSON = {
    "description": "an error in the dialect's shape (OpenAI's, or Anthropic's on /v1/messages)",
    "content": {"application/json": {"schema": {"type": "object"}}},
}
_TOOL: JSON = {
    "type": "object",
    "required": ["type", "function"],
    "properties": {
        "type": {"enum": ["function"]},
        "function": {
            "type": "object",
            "required": ["name"],
            "properties": {"name": {"type": "string", "minLength": 1}, "parameters": {"type": "object"}},
        },
    },
}
_RESPONSE_FORMAT: JSON = {
    "type": "object",
    "required": ["type"],
    "properties": {"type": {"enum": ["text", "json_object", "json_schema"]}},
}
_CHAT: JSON = {
    "type": "object",
    "required": ["model", "messages"],
    "properties": {
        "model": {"type": "string", "minLength": 1},
        "messages": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["role", "content"],
                "properties": {
                    "role": {"enum": ["system", "developer", "user", "assistant"]},
                    "content": {"type": "string"},
                },
            },
        },
        "stream": {"type": "boolean"},
        "temperature": {"type": "number", "minimum": 0, "maximum": 2},
        "top_p": {"type": "number", "minimum": 0, "maximum": 1},
        "max_tokens": {"type": "integer", "minimum": 1},
        "n": {"type": "integer", "minimum": 1, "maximum": 128},
        "stop": {"type": "array", "items": {"type": "string"}, "maxItems": 4},
        "tools": {"type": "array", "items": _TOOL},
        "response_format": _RESPONSE_FORMAT,
        "user": {"type": "string"},
    },
}
_MESSAGES: JSON = {
    "type": "object",
    "required": ["model", "max_tokens", "messages"],
    "properties": {
        "model": {"type": "string", "minLength": 1},
        "max_tokens": {"type": "integer", "minimum": 1},
        "messages": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["role", "content"],
                "properties": {"role": {"enum": ["user", "assistant"]}, "content": {"type": "string"}},
            },
        },
        "system": {"type": "string"},
        "stream": {"type": "boolean"},
        "temperature": {"type": "number", "minimum": 0, "maximum": 1},
    },
}
_EMBEDDINGS: JSON = {
    "type": "object",
    "required": ["model", "input"],
    "properties": {
        "model": {"type": "string", "minLength": 1},
        "input": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]},
        "encoding_format": {"enum": ["float", "base64"]},
    },
}
_COMPLETIONS: JSON = {
    "type": "object",
    "required": ["model", "prompt"],
    "properties": {
        "model": {"type": "string", "minLength": 1},
        "prompt": {
            "oneOf": [
                {"type": "string"},
                {"type": "array", "minItems": 1, "items": {"type": "string"}},
                {"type": "array", "minItems": 1, "items": {"type": "integer"}},
            ]
        },
        "max_tokens": {"type": "integer", "minimum": 0},
        "temperature": {"type": "number", "minimum": 0, "maximum": 2},
        "top_p": {"type": "number", "minimum": 0, "maximum": 1},
        "n": {"type": "integer", "minimum": 1, "maximum": 128},
        "logprobs": {"type": "integer", "minimum": 0, "maximum": 5},
        "echo": {"type": "boolean"},
        "stop": {"type": "array", "items": {"type": "string"}, "maxItems": 4},
        "stream": {"type": "boolean"},
        "suffix": {"type": "string"},
        "user": {"type": "string"},
    },
}
_COUNT_TOKENS: JSON = {
    "type": "object",
    "required": ["model", "messages"],
    "properties": {
        "model": _MESSAGES["properties"]["model"],
        "messages": _MESSAGES["properties"]["messages"],
        "system": {"type": "string"},
    },
}
_RESPONSES: JSON = {
    "type": "object",
    "required": ["model", "input"],
    "properties": {
        "model": {"type": "string", "minLength": 1},
        "input": {
            "oneOf": [
                {"type": "string"},
                {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "required": ["role", "content"],
                        "properties": {
                            "type": {"enum": ["message"]},
                            "role": {"enum": ["system", "developer", "user", "assistant"]},
                            "content": {"type": "string"},
                        },
                    },
                },
            ]
        },
        "instructions": {"type": "string"},
        "previous_response_id": {"type": "string"},
        "stream": {"type": "boolean"},
        "store": {"type": "boolean"},
        "max_output_tokens": {"type": "integer", "minimum": 16},
        "temperature": {"type": "number", "minimum": 0, "maximum": 2},
        "top_p": {"type": "number", "minimum": 0, "maximum": 1},
        "tools": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["type", "name"],
                "properties": {
                    "type": {"enum": ["function"]},
                    "name": {"type": "string", "minLength": 1},
                    "parameters": {"type": "object"},
                },
            },
        },
        "tool_choice": {"enum": ["auto", "none", "required"]},
        "metadata": {"type": "object", "maxProperties": 16, "additionalProperties": {"type": "string"}},
    },
}
BODIES: dict[str, tuple[str, JSON]] = {
    "/v1/chat/completions": ("Create a chat completion (OpenAI's API)", _CHAT),
    "/v1/messages": ("Create a message (Anthropic's Messages API)", _MESSAGES),
    "/v1/embeddings": ("Create embeddings (OpenAI's API)", _EMBEDDINGS),
    "/v1/completions": ("Create a completion (OpenAI's legacy text completions)", _COMPLETIONS),
    "/v1/messages/count_tokens": ("Count message tokens (Anthropic's Messages API)", _COUNT_TOKENS),
    "/v1/responses": ("Create a response (OpenAI's Responses API)", _RESPONSES),
}


def _operation(summary: str, schema: JSON) -> JSON:
    return {
        "post": {
            "summary": summary,
            "operationId": summary.split(" (")[0].lower().replace(" ", "_"),
            "requestBody": {"required": True, "content": {"application/json": {"schema": schema}}},
            "responses": {
                "200": {
                    "description": "the answer: JSON, or an event stream when `stream` is true",
                    "content": {"application/json": {"schema": {"type": "object"}}, "text/event-stream": {}},
                },
                "400": _ERROR,
                "default": _ERROR,
            },
        }
    }


def with_hot_routes(openapi: Callable[[], JSON]) -> Callable[[], JSON]:
    """FastAPI's `app.openapi` with the fast-lane routes added to its paths (once; FastAPI caches
    the document it returns)."""

    def document() -> JSON:
        schema = openapi()
        paths = schema.setdefault("paths", {})
        for path, (summary, body) in BODIES.items():
            paths.setdefault(path, _operation(summary, body))
        return schema

    return document
