"""What a request needs from the model that answers it (tools, a JSON schema, images), and what a
model is known to lack, so `auto` never routes a request to a model that cannot serve it.

A model's capabilities come from its config (`capabilities: [tools, json_schema]`, which lists
everything it has) or, when the config is silent, from LiteLLM's table (`supports_function_calling`,
`supports_response_schema`, `supports_vision`). Only an explicit "no" counts as lacking: a model the
table does not know is assumed able, because refusing traffic on a guess is worse than letting its
provider answer. A self-hosted model is rarely in the table, so its entry should say what its weights
and `vllm serve` flags allow.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final, Literal

from providers.facts import uses_of

Capability = Literal["tools", "json_schema", "vision"]
CAPABILITIES: Final[tuple[Capability, ...]] = ("tools", "json_schema", "vision")
# LiteLLM's table field for each.
TABLE_FIELDS: Final[Mapping[Capability, str]] = {
    "tools": "supports_function_calling",
    "json_schema": "supports_response_schema",
    "vision": "supports_vision",
}


def needs(body: Mapping[str, Any]) -> frozenset[str]:
    """The capabilities this chat request uses (a request's own are in `chat.facts.uses`)."""
    return uses_of(body)


def lacking(declared: Iterable[str] | None, table: Iterable[Mapping[str, Any] | None]) -> frozenset[str]:
    """What a model lacks: everything it does not declare, when it declares; else what any of its
    deployments' table entries says `false` to."""
    if declared is not None:
        return frozenset(CAPABILITIES) - frozenset(declared)
    return frozenset(
        cap
        for entry in table
        if entry is not None
        for cap, field in TABLE_FIELDS.items()
        if entry.get(field) is False
    )
