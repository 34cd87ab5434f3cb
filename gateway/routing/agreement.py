"""Whether two answers to the same request agree, judged without a model where that is sound (no I/O).

In order: tool calls compare structurally (names and parsed arguments, key and call order ignored);
JSON content compares parsed (objects and arrays, key order ignored); short answers (a letter, a
number, a yes) compare normalised (case, whitespace, punctuation; numbers by value); anything
longer by token overlap (F1 of the two bags of words) against a threshold, which is the weakest of
the four, and where a judge model (`routing.shadow.judge_model`) may be asked instead.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

import orjson

from gateway.routing.verdict import MISSING, parse_json

Method = Literal["tool_calls", "json", "short", "overlap"]
# Normalised answers up to this many words count as short: compared whole, not by overlap.
SHORT_WORDS: Final = 4
_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True, slots=True)
class Agreement:
    agreed: bool
    method: Method
    similarity: float | None = None


def compare(first: Mapping[str, Any], second: Mapping[str, Any], *, threshold: float = 0.6) -> Agreement:
    """How the first choices of two OpenAI-shaped answers compare."""
    a, b = _message(first), _message(second)
    calls_a, calls_b = _calls(a), _calls(b)
    if calls_a or calls_b:
        return Agreement(calls_a == calls_b, "tool_calls")
    text_a, text_b = _text(a.get("content")), _text(b.get("content"))
    parsed_a, parsed_b = parse_json(text_a), parse_json(text_b)
    if isinstance(parsed_a, dict | list) and isinstance(parsed_b, dict | list):
        return Agreement(parsed_a == parsed_b, "json")
    norm_a, norm_b = normalise(text_a), normalise(text_b)
    if len(norm_a.split()) <= SHORT_WORDS and len(norm_b.split()) <= SHORT_WORDS:
        return Agreement(_same_short(text_a, text_b, norm_a, norm_b), "short")
    similarity = overlap(norm_a, norm_b)
    return Agreement(similarity >= threshold, "overlap", similarity)


def needs_judge(agreement: Agreement) -> bool:
    """Only the overlap figure is worth a second opinion; the other three are exact."""
    return agreement.method == "overlap"


def normalise(text: str) -> str:
    """Lower case, accents and punctuation gone, whitespace collapsed: "B) " and "b" are one answer."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(_WORD.findall(folded))


def overlap(a: str, b: str) -> float:
    """Token F1 of two normalised texts: 1.0 for the same words, 0.0 for none shared."""
    bag_a, bag_b = Counter(a.split()), Counter(b.split())
    if not bag_a and not bag_b:
        return 1.0
    common = sum((bag_a & bag_b).values())
    if common == 0:
        return 0.0
    precision, recall = common / sum(bag_a.values()), common / sum(bag_b.values())
    return 2 * precision * recall / (precision + recall)


def _same_short(a: str, b: str, norm_a: str, norm_b: str) -> bool:
    """Two numbers by value ("3.50" and "3.5", "1,000" and "1000", but "-3" is not "3"), anything
    else normalised."""
    number_a, number_b = _number(a), _number(b)
    if number_a is not None and number_b is not None:
        return number_a == number_b
    return norm_a == norm_b


def _number(text: str) -> float | None:
    try:
        return float(text.strip().rstrip(".").replace(",", ""))
    except ValueError:
        return None


def _message(answer: Mapping[str, Any]) -> Mapping[str, Any]:
    choices = answer.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], Mapping):
        message = choices[0].get("message")
        if isinstance(message, Mapping):
            return message
    return {}


def _calls(message: Mapping[str, Any]) -> list[tuple[str, bytes]]:
    """Each call as (name, canonical arguments), sorted: parallel calls may come in any order."""
    calls = message.get("tool_calls")
    if not isinstance(calls, list):
        return []
    out = []
    for call in calls:
        function = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(function, Mapping):
            continue
        arguments = function.get("arguments")
        parsed = parse_json(arguments) if isinstance(arguments, str) else MISSING
        canonical = (
            orjson.dumps(parsed, option=orjson.OPT_SORT_KEYS)
            if parsed is not MISSING
            else str(arguments).encode()
        )
        out.append((str(function.get("name")), canonical))
    return sorted(out)


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            p["text"] for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str)
        )
    return ""
