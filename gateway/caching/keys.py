"""The response cache's key for a chat request, and which requests may be answered from it: pure.

**Key.** The key is the request in canonical form: JSON with sorted keys, hashed with SHA-256. It
holds every field except those that cannot change the answer. A field Tollgate has never heard of
stays in the key, so a new sampling parameter splits the cache instead of serving a wrong answer.
Left out:

- `stream` and `stream_options`: a cached answer can be replayed either way;
- `user`, `safety_identifier` and `metadata`: who asked and the client's own labels;
- `store`, `prompt_cache_key`, `prompt_cache_retention` and `prompt_cache_options`: bookkeeping and
  provider-side caching, which never change the output.

A field sent as `null` counts as absent, and so does `n: 1`, OpenAI's default. A number with no
fractional part is the same value whether it is written `0` or `0.0`. The model is the one the
client named, or the tier when a tier header forced one, so an alias re-pointed in config starts
fresh only once the old entries expire. The hash is namespaced by team (`response:{team}:{sha256}`),
and the team is also inside the hash, so no team ever reads another's answers.

**Cacheable** (`is_cacheable`): only deterministic requests, meaning `temperature` 0 or an explicit
opt-in (a header or team config; the caller decides). Also:

- never with `n` > 1: asking for several samples is asking for variety, and a stored set of
  choices would hand every caller the same "random" ones;
- never with `web_search_options` unless opted in: the answer follows the live web, so it is not
  deterministic even at temperature 0;
- tool-calling turns **are** cacheable. The tool call a model emits is a function of the messages,
  and the tool results the agent sends back are in the messages, so they are in the key. A
  replayed tool call is exactly what a temperature-0 model would have answered, and running the tool
  is the client's step, after the answer, whichever way the answer was produced.

`Cache-Control: no-store` is a header, so the caller checks it before asking this module.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from providers.types import JSON

PREFIX = "response"
IGNORED = frozenset(
    {
        "stream",
        "stream_options",
        "user",
        "safety_identifier",
        "metadata",
        "store",
        "prompt_cache_key",
        "prompt_cache_retention",
        "prompt_cache_options",
    }
)


def canonical_request(body: JSON, *, model: str | None = None, tier: str | None = None) -> bytes:
    """The bytes the key is hashed from: every output-changing field, sorted, normalised."""
    form: JSON = {}
    for name, value in body.items():
        if name in IGNORED or value is None:
            continue
        if name == "n" and value == 1 and not isinstance(value, bool):
            continue
        form[name] = _number(value)
    if model is not None:
        form["model"] = model
    if tier is not None:
        form["x-tollgate-tier"] = tier
    return orjson.dumps(form, option=orjson.OPT_SORT_KEYS)


def response_cache_key(team: str, body: JSON, *, model: str | None = None, tier: str | None = None) -> str:
    """`response:{team}:{sha256 hex}` for `body`; `model` and `tier` override what decides who answers."""
    digest = hashlib.sha256(team.encode() + b"\x00" + canonical_request(body, model=model, tier=tier))
    return f"{PREFIX}:{team}:{digest.hexdigest()}"


def is_cacheable(body: JSON, *, opt_in: bool) -> bool:
    """True when an answer to `body` may be stored and served again (rules in the module docstring)."""
    n = body.get("n")
    if isinstance(n, int) and not isinstance(n, bool) and n > 1:
        return False
    if opt_in:
        return True
    temperature = body.get("temperature")
    deterministic = isinstance(temperature, int | float) and not isinstance(temperature, bool)
    return deterministic and temperature == 0 and body.get("web_search_options") is None


def _number(value: Any) -> Any:
    """0.0 and 0 (and 1.0 and 1) are one value: clients in different languages spell them apart."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value
