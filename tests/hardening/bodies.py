"""Hypothesis strategies for hostile request bodies, as raw bytes: valid-looking requests with
fields of the wrong type, numbers beyond 64 bits, NaN and Infinity tokens, deep nesting, duplicate
keys, control characters, invalid UTF-8, non-object JSON and giant message lists.

Bodies are built as Python values and written by `encode`, which (unlike any JSON library) can
repeat keys and splice in raw tokens, so the gateway's parser sees what a broken client sends.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import strategies as st

# Models of the test config (tests/conftest.py) that answer at once from the sandbox.
MODELS = ("gpt-4o-mini", "llama", "smart", "renamed", "unpriced")


class Raw(str):
    """A token written into the body verbatim: `NaN`, `1e400`, ten thousand brackets."""


class Pairs(list[tuple[str, Any]]):
    """A JSON object as key-value pairs, so a key may appear twice."""


TWICE = "\x00twice"  # in a dict: (key, value) to write as a second `key` after the others


def encode(value: Any) -> str:
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, dict):
        pairs = [(k, v) for k, v in value.items() if k != TWICE]
        if TWICE in value:
            pairs.append(value[TWICE])
        value = Pairs(pairs)
    if isinstance(value, Pairs):
        return "{" + ",".join(f"{json.dumps(k)}:{encode(v)}" for k, v in value) + "}"
    if isinstance(value, list):
        return "[" + ",".join(encode(v) for v in value) + "]"
    # Big integers stay exact; float('nan') and float('inf') come out as NaN and Infinity.
    return json.dumps(value, ensure_ascii=False)


def nested(depth: int, inner: str = "1") -> Raw:
    return Raw("[" * depth + inner + "]" * depth)


ODD_TOKENS = st.sampled_from(
    [
        Raw("NaN"),
        Raw("Infinity"),
        Raw("-Infinity"),
        Raw("1e400"),
        Raw("-1e400"),
        Raw("18446744073709551616"),
        Raw("-9223372036854775809"),
        Raw(str(10**400)),
        Raw("1" * 5000),
        Raw("0.1e-400"),
        Raw("-0"),
        Raw("01"),
        Raw("1."),
        Raw(".5"),
        Raw("+1"),
        Raw("0x10"),
        Raw("true1"),
        Raw('"\\ud800"'),
        Raw('"\\udc00\\ud800"'),
        Raw('"tab\there"'),
        Raw('"nul\x00here"'),
        Raw('"\\u0000\\u001f\\u007f\\u2028\\u2029"'),
        Raw("{}"),
        Raw("[]"),
    ]
)
DEEP = st.integers(min_value=2, max_value=12_000).map(nested)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(),  # NaN and ±Infinity included: they are written as bare tokens
    st.text(max_size=30),
    st.text(alphabet=st.characters(max_codepoint=0x1F), max_size=10),  # control characters
    ODD_TOKENS,
    DEEP,
)
anything = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.text(max_size=12), children, max_size=4),
        st.lists(st.tuples(st.sampled_from(["a", "model", "type", "role"]), children), max_size=4).map(Pairs),
    ),
    max_leaves=12,
)


model_names = st.one_of(
    st.sampled_from(MODELS),
    st.sampled_from(MODELS),
    st.text(max_size=40),
    st.integers(min_value=200, max_value=20_000).map(lambda n: "m" * n),
    st.text(alphabet=st.characters(max_codepoint=0x1F), min_size=1, max_size=5),
)
short_texts = st.text(max_size=60)
# Now and then a prompt near or over the body limit (256 KiB in the test config).
texts = st.one_of(
    short_texts, short_texts, st.integers(min_value=0, max_value=300_000).map(lambda n: "x" * n)
)
json_schemas = st.recursive(
    st.fixed_dictionaries({"type": st.sampled_from(["string", "integer", "number", "boolean", "null"])}),
    lambda inner: (
        st.fixed_dictionaries(
            {
                "type": st.just("object"),
                "properties": st.dictionaries(st.text(max_size=8), inner, max_size=3),
            },
            optional={"required": st.lists(st.text(max_size=8), max_size=2)},
        )
        | st.fixed_dictionaries({"type": st.just("array"), "items": inner})
    ),
    max_leaves=6,
)


def _stream_options(body: dict[str, Any]) -> dict[str, Any]:
    if body.get("stream"):
        body["stream_options"] = {"include_usage": len(body["messages"]) % 2 == 0}
    return body


def giant(message: st.SearchStrategy[Any]) -> st.SearchStrategy[list[Any]]:
    """Thousands of one short message: near the body limit, sometimes over it."""
    return st.builds(lambda n, m: [m] * n, st.integers(min_value=500, max_value=9_000), message)


# --- OpenAI Chat Completions (valid; `mutated` breaks them) --------------------------------------

content_parts = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": texts}),
    st.fixed_dictionaries(
        {"type": st.just("image_url"), "image_url": st.fixed_dictionaries({"url": st.text(max_size=40)})}
    ),
)
chat_message = st.one_of(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["system", "developer", "user"]), "content": texts},
        optional={"name": short_texts},
    ),
    st.fixed_dictionaries(
        {"role": st.just("user"), "content": st.lists(content_parts, min_size=1, max_size=3)}
    ),
    st.fixed_dictionaries(
        {"role": st.just("assistant"), "content": st.one_of(st.none(), short_texts)},
        optional={
            "tool_calls": st.lists(
                st.fixed_dictionaries(
                    {
                        "id": short_texts,
                        "type": st.just("function"),
                        "function": st.fixed_dictionaries({"name": short_texts, "arguments": short_texts}),
                    }
                ),
                max_size=2,
            )
        },
    ),
    st.fixed_dictionaries({"role": st.just("tool"), "tool_call_id": short_texts, "content": short_texts}),
)
short_chat_message = st.fixed_dictionaries({"role": st.just("user"), "content": short_texts})
chat_bodies = st.fixed_dictionaries(
    {
        "model": model_names,
        "messages": st.one_of(st.lists(chat_message, min_size=1, max_size=5), giant(short_chat_message)),
    },
    optional=dict(
        temperature=st.floats(min_value=0, max_value=2),
        top_p=st.floats(min_value=0, max_value=1),
        max_tokens=st.integers(min_value=1, max_value=64),
        n=st.integers(min_value=1, max_value=2),
        seed=st.integers(min_value=-(2**63), max_value=2**63 - 1),
        stream=st.booleans(),
        stop=st.one_of(short_texts, st.lists(short_texts, max_size=4)),
        tools=st.lists(
            st.fixed_dictionaries(
                {
                    "type": st.just("function"),
                    "function": st.fixed_dictionaries(
                        {"name": st.from_regex(r"[a-z_]{1,12}", fullmatch=True), "parameters": json_schemas}
                    ),
                }
            ),
            min_size=1,
            max_size=3,
        ),
        tool_choice=st.sampled_from(["auto", "none", "required"]),
        response_format=st.sampled_from([{"type": "text"}, {"type": "json_object"}]),
        metadata=st.dictionaries(st.text(max_size=8), short_texts, max_size=3),
        user=short_texts,
    ),
).map(_stream_options)

# --- Anthropic Messages --------------------------------------------------------------------------

anthropic_block = st.one_of(
    st.fixed_dictionaries(
        {"type": st.just("text"), "text": texts}, optional={"cache_control": st.just({"type": "ephemeral"})}
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("image"),
            "source": st.one_of(
                st.fixed_dictionaries({"type": st.just("url"), "url": st.text(max_size=30)}),
                st.fixed_dictionaries(
                    {
                        "type": st.just("base64"),
                        "media_type": st.just("image/png"),
                        "data": st.just("iVBORw0KGgo="),
                    }
                ),
            ),
        }
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("tool_result"),
            "tool_use_id": short_texts,
            "content": st.one_of(
                short_texts,
                st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": short_texts}), max_size=2),
            ),
        }
    ),
)
anthropic_message = st.one_of(
    st.fixed_dictionaries(
        {
            "role": st.just("user"),
            "content": st.one_of(texts, st.lists(anthropic_block, min_size=1, max_size=3)),
        }
    ),
    st.fixed_dictionaries(
        {
            "role": st.just("assistant"),
            "content": st.one_of(
                short_texts,
                st.lists(
                    st.one_of(
                        st.fixed_dictionaries({"type": st.just("text"), "text": short_texts}),
                        st.fixed_dictionaries(
                            {
                                "type": st.just("tool_use"),
                                "id": short_texts,
                                "name": short_texts,
                                "input": st.dictionaries(st.text(max_size=5), short_texts, max_size=2),
                            }
                        ),
                    ),
                    min_size=1,
                    max_size=2,
                ),
            ),
        }
    ),
)
anthropic_bodies = st.fixed_dictionaries(
    {
        "model": model_names,
        "max_tokens": st.integers(min_value=1, max_value=64),
        "messages": st.one_of(
            st.lists(anthropic_message, min_size=1, max_size=4),
            giant(st.fixed_dictionaries({"role": st.just("user"), "content": short_texts})),
        ),
    },
    optional=dict(
        system=st.one_of(
            texts, st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": short_texts}), max_size=2)
        ),
        tools=st.lists(
            st.fixed_dictionaries(
                {"name": st.from_regex(r"[a-z_]{1,12}", fullmatch=True), "input_schema": json_schemas},
                optional={"description": short_texts},
            ),
            min_size=1,
            max_size=3,
        ),
        tool_choice=st.sampled_from([{"type": "auto"}, {"type": "any"}, {"type": "none"}]),
        metadata=st.fixed_dictionaries({"user_id": short_texts}),
        stop_sequences=st.lists(short_texts, max_size=3),
        stream=st.booleans(),
        temperature=st.floats(min_value=0, max_value=1),
        top_p=st.floats(min_value=0, max_value=1),
        top_k=st.integers(min_value=1, max_value=100),
        thinking=st.just({"type": "enabled", "budget_tokens": 1024}),
        output_config=st.just({"format": {"type": "json_schema", "schema": {"type": "object"}}}),
    ),
)

# --- Embeddings ----------------------------------------------------------------------------------

embedding_bodies = st.fixed_dictionaries(
    {
        "model": model_names,
        "input": st.one_of(
            texts,
            st.lists(st.text(min_size=1, max_size=30), min_size=1, max_size=5),
            st.lists(st.integers(min_value=0, max_value=100_000), min_size=1, max_size=5),
            st.lists(
                st.lists(st.integers(min_value=0, max_value=100_000), min_size=1, max_size=4),
                min_size=1,
                max_size=3,
            ),
            st.builds(lambda n: ["x"] * n, st.integers(min_value=2000, max_value=3000)),
        ),
    },
    optional=dict(
        dimensions=st.integers(min_value=1, max_value=4096),
        encoding_format=st.sampled_from(["float", "base64"]),
        user=short_texts,
    ),
)

# --- Breaking a valid body -----------------------------------------------------------------------

# Every field name the three dialects know, so an added field is often one the gateway reads.
FIELDS = sorted(
    {
        *("model", "messages", "max_tokens", "max_completion_tokens", "stream", "stream_options", "user"),
        *("temperature", "top_p", "top_k", "n", "seed", "stop", "stop_sequences", "logit_bias"),
        *("tools", "tool_choice", "response_format", "metadata", "system", "thinking", "output_config"),
        *("input", "dimensions", "encoding_format", "role", "content", "type", "text", "image_url", "url"),
        *("source", "input_schema", "name", "id", "tool_calls", "tool_call_id", "tool_use_id", "input"),
        *("function", "parameters", "arguments", "cache_control", "include_usage", "user_id", "format"),
    }
)
_MAX_PLACES = 64  # a giant message list repeats one object: its first few stand for all


def _places(body: Any) -> list[Any]:
    """The objects and arrays inside `body` (itself included), breadth first, at most _MAX_PLACES."""
    found: list[Any] = []
    queue = [body]
    while queue and len(found) < _MAX_PLACES:
        item = queue.pop(0)
        if isinstance(item, dict):
            found.append(item)
            queue.extend(v for k, v in item.items() if k != TWICE)
        elif isinstance(item, list) and not isinstance(item, Pairs):  # Pairs are written whole
            found.append(item)
            queue.extend(item[:8])
    return found


@st.composite
def mutated(draw: st.DrawFn, valid: st.SearchStrategy[Any]) -> Any:
    """A valid body with up to three things broken: a field of the wrong type, removed, added,
    given twice, or a value swapped for anything at all."""
    body = copy.deepcopy(draw(valid))
    for _ in range(draw(st.integers(min_value=0, max_value=3))):
        # Half the time the top level, where most fields live; otherwise anywhere inside.
        place = body if draw(st.booleans()) else draw(st.sampled_from(_places(body)))
        if isinstance(place, list):
            if not place:
                place.append(draw(anything))
                continue
            at = draw(st.integers(min_value=0, max_value=len(place) - 1))
            place[at] = draw(anything)
            continue
        keys = sorted(k for k in place if k != TWICE)
        op = draw(st.sampled_from(["retype", "retype", "drop", "add", "twice"] if keys else ["add"]))
        if op == "add":
            place[draw(st.one_of(st.sampled_from(FIELDS), st.text(max_size=20)))] = draw(anything)
        elif op == "drop":
            del place[draw(st.sampled_from(keys))]
        elif op == "retype":
            place[draw(st.sampled_from(keys))] = draw(anything)
        else:
            key = draw(st.sampled_from(keys))
            place[TWICE] = (key, draw(anything))
    return body


# --- From a value to the bytes on the wire -----------------------------------------------------

INVALID_UTF8 = (b"\xff", b"\xc3\x28", b"\xe2\x82", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\xc0\xaf")


@st.composite
def wire(draw: st.DrawFn, values: st.SearchStrategy[Any]) -> bytes:
    """Valid `values`, broken by `mutated`, then most sent as encoded; some cut short, some with bytes that are not UTF-8 spliced in, some
    with a byte order mark or trailing garbage; and now and then a body that is not an object."""
    value = draw(st.one_of(*[mutated(values)] * 5, anything))
    raw = encode(value).encode("utf-8", "surrogatepass")
    damage = draw(st.sampled_from(["none"] * 16 + ["utf8", "truncate", "bom", "trailing"]))
    if damage == "utf8" and raw:
        at = draw(st.integers(min_value=0, max_value=len(raw)))
        raw = raw[:at] + draw(st.sampled_from(INVALID_UTF8)) + raw[at:]
    elif damage == "truncate" and raw:
        raw = raw[: draw(st.integers(min_value=0, max_value=len(raw) - 1))]
    elif damage == "bom":
        raw = b"\xef\xbb\xbf" + raw
    elif damage == "trailing":
        raw += draw(st.sampled_from([b" ", b"\n", b"x", b"{}", b"\x00", b"]"]))
    return raw
