"""Plan an Anthropic reply's content blocks: thinking, a short preamble, then text or a tool_use.

The preamble ("I'll use a tool" text before a ``tool_use`` block) is only
written when ``tool_choice`` is ``auto``, as Claude does; a forced tool call is
the bare ``tool_use`` block. Thinking signatures are keyed by the server seed,
so a thinking block that comes back altered fails validation, as it would
upstream.
"""

from __future__ import annotations

import base64
import hmac
from dataclasses import dataclass
from hashlib import blake2b
from typing import Literal

import orjson

from sandbox.anthropic.errors import base62
from sandbox.anthropic.request import MessagesParams
from sandbox.core.engine import Choice
from sandbox.core.textgen import TextGenerator
from sandbox.core.tokens import split_tokens

__all__ = ["OutBlock", "Output", "Signer", "plan_output", "plan_prelude", "tool_input"]

_THINK = 0x7417_0001
_PREAMBLE = 0x7417_0002
_PREAMBLE_TOKENS = 12
_STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}


@dataclass(frozen=True, slots=True)
class OutBlock:
    """One content block of the reply, with the fragments it streams as."""

    kind: Literal["thinking", "text", "tool_use"]
    pieces: tuple[str, ...]
    text: str
    tokens: int
    name: str = ""
    id: str = ""
    signature: str = ""


@dataclass(frozen=True, slots=True)
class Output:
    """The whole reply: blocks, why it stopped, and its billed output tokens."""

    blocks: tuple[OutBlock, ...]
    stop_reason: str
    stop_sequence: str | None

    @property
    def output_tokens(self) -> int:
        """Output tokens, thinking included (Anthropic bills it as output)."""
        return sum(b.tokens for b in self.blocks)

    @property
    def pieces(self) -> int:
        """Token steps over all blocks (the pacing clock; omitted thinking still takes its time)."""
        return sum(b.tokens if b.kind == "thinking" else len(b.pieces) for b in self.blocks)


class Signer:
    """Signs thinking text and checks signatures that come back in later turns."""

    def __init__(self, seed: int) -> None:
        self._key = b"sandbox-thinking-" + str(seed).encode()

    def sign(self, text: str) -> str:
        """The ``signature`` of a thinking block."""
        mac = blake2b(text.encode(), key=self._key, digest_size=48).digest()
        return base64.b64encode(b"\x12\x02" + mac).decode()

    def verify(self, text: str, signature: str) -> bool:
        """True when ``signature`` is the one ``sign`` gave ``text``."""
        return hmac.compare_digest(self.sign(text), signature)


def plan_prelude(params: MessagesParams, generator: TextGenerator, signer: Signer) -> tuple[OutBlock, ...]:
    """The blocks decided before the engine runs: thinking and a tool-call preamble."""
    digest = params.rendered.prompt.digest
    blocks: list[OutBlock] = []
    budget = params.thinking_budget
    if budget is not None:
        done = generator.complete(digest ^ _THINK, max_tokens=budget or None)
        shown = done.pieces if params.thinking_display != "omitted" else ()
        text = "".join(shown)
        blocks.append(OutBlock("thinking", shown, text, len(done.pieces), signature=signer.sign(text)))
    if params.tool is not None and params.tool_mode == "auto" and params.json_schema is None:
        left = params.max_tokens - sum(b.tokens for b in blocks)
        if left > _PREAMBLE_TOKENS * 2:
            done = generator.complete(digest ^ _PREAMBLE, max_tokens=_PREAMBLE_TOKENS)
            blocks.append(OutBlock("text", done.pieces, done.text, len(done.pieces)))
    return tuple(blocks)


def _stop_sequence(
    params: MessagesParams, choice: Choice, generator: TextGenerator, limit: int
) -> str | None:
    natural = generator.complete(params.rendered.prompt.digest, max_tokens=limit)
    if natural.text == choice.text:
        return None
    return next((s for s in params.stop if natural.text.find(s) == len(choice.text)), None)


def plan_output(
    params: MessagesParams,
    prelude: tuple[OutBlock, ...],
    choice: Choice,
    generator: TextGenerator,
    limit: int,
) -> Output:
    """Add the engine's choice (text, JSON text or a tool call) after the prelude."""
    blocks = list(prelude)
    stop_reason = _STOP_REASONS[choice.finish_reason]
    stop_sequence = None
    if params.json_schema is not None:
        blocks.append(OutBlock("text", choice.pieces, choice.text, choice.tokens))
        stop_reason = "end_turn"
    elif choice.tool_name is not None:
        call_id = "toolu_01" + base62(22)
        # The first input_json_delta is empty, as Anthropic sends it.
        pieces = ("", *split_tokens(choice.text))
        blocks.append(OutBlock("tool_use", pieces, choice.text, choice.tokens, choice.tool_name, call_id))
    elif choice.pieces:
        blocks.append(OutBlock("text", choice.pieces, choice.text, choice.tokens))
    if stop_reason == "end_turn" and params.stop and choice.tool_name is None:
        stop_sequence = _stop_sequence(params, choice, generator, limit)
        stop_reason = "stop_sequence" if stop_sequence is not None else stop_reason
    return Output(tuple(blocks), stop_reason, stop_sequence)


def tool_input(block: OutBlock) -> object:
    """The parsed ``input`` of a tool_use block."""
    return orjson.loads(block.text)
