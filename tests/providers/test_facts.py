"""Request facts: read once from the body, the one answer every stage gets to "how big is it"."""

from __future__ import annotations

import orjson

from providers.facts import BYTES_PER_TOKEN, DEFAULT_MAX_OUTPUT, RequestFacts
from providers.types import ChatRequest


def chat(**body: object) -> ChatRequest:
    full = {"model": "m", "messages": [{"role": "user", "content": "hi"}], **body}
    raw = orjson.dumps(full)
    return ChatRequest(body=full, raw=raw, model="m", stream=full.get("stream") is True)


def test_sizes_come_from_the_bytes_and_the_asked_output() -> None:
    asked = chat(max_tokens=100, max_completion_tokens=300).facts
    assert asked.max_output == 300  # max_completion_tokens wins, as OpenAI reads it
    assert asked.worst_case_output == asked.fitting_output == 300
    assert asked.prompt_tokens == len(chat(max_tokens=100, max_completion_tokens=300).raw) // BYTES_PER_TOKEN
    unset = chat().facts
    assert unset.max_output is None
    # Budgets reserve the worst case; a context window need leave no room for output nobody asked for.
    assert (unset.worst_case_output, unset.fitting_output) == (DEFAULT_MAX_OUTPUT, 0)
    assert chat(max_tokens=True).facts.max_output is None  # a boolean is not a count


def test_uses_structure_temperature_and_user() -> None:
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    image = [{"type": "image_url", "image_url": {"url": "data:,"}}]
    facts = chat(
        tools=[tool], temperature=1.5, user="u-1", messages=[{"role": "user", "content": image}], stream=True
    ).facts
    assert facts.uses == {"tools", "vision"} and facts.structured
    assert (facts.temperature, facts.user, facts.stream) == (1.5, "u-1", True)
    schema = chat(response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {}}}).facts
    assert schema.uses == {"json_schema"} and schema.structured
    plain = chat(temperature=True, user=7).facts
    assert not plain.uses and not plain.structured and plain.temperature is None and plain.user is None


def test_facts_stay_what_the_client_asked_when_the_body_is_rewritten() -> None:
    request = chat(temperature=1.5)
    request.body = {**request.body, "temperature": 0.2}
    assert request.facts.temperature == 1.5
    assert RequestFacts.read(request.body, b"", model="m").temperature == 0.2
