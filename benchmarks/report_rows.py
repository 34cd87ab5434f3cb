"""One row of the bench's table and its verdict words: shared by the figures measured in this run
(`benchmarks.report`) and those read back from the slower benches' saved JSON (`report_saved`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MET, MISSED, INFO = "met", "MISSED", ""


@dataclass
class Row:
    figure: str
    direct: str
    gateway: str
    added: str
    target: str
    result: str
    values: dict[str, Any] = field(default_factory=dict)
    spread: str = ""  # the added figure per interleaved block: median [min, max]
    second: str = ""  # the same figure for the embedded default (its added figure where there is one)
    second_values: dict[str, Any] = field(default_factory=dict)


def verdict(ok: bool | None) -> str:
    return INFO if ok is None else MET if ok else MISSED
