"""Deterministic token counting and splitting shared by every dialect.

The rule (a stand-in for a real BPE tokenizer, about 4.2 characters a token on
English prose, close to cl100k/o200k's ~4):

* a run of letters is one token per started 6 letters ("gateway" = 2 tokens);
* a run of digits is one token per started 3 digits ("2026" = 2 tokens);
* every other non-space character (punctuation, symbols, ``_``) is one token;
* whitespace is free: it rides on the token that follows it.

Chat prompts are rendered with a ChatML-like template so a conversation has a
fixed overhead like OpenAI's: 3 tokens per message (start, role, end), 1 more
for a ``name``, and 3 to prime the reply.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from hashlib import blake2b

__all__ = [
    "Prompt",
    "Tokenizer",
    "bare_tokens",
    "count_tokens",
    "render_chat",
    "split_tokens",
]

_TOKEN = r"[^\W\d_]{1,6}|\d{1,3}|[^\w\s]|_"
_TOKEN_RE = re.compile(_TOKEN)
# Each piece is one token together with the whitespace in front of it, so the
# pieces of a text concatenate back to the text (minus trailing whitespace).
_PIECE_RE = re.compile(rf"\s*(?:{_TOKEN})")

_START = "<|im_start|>"
_END = "<|im_end|>"


def count_tokens(text: str) -> int:
    """Return the number of tokens in ``text`` under the module's rule."""
    return len(_TOKEN_RE.findall(text))


def split_tokens(text: str) -> list[str]:
    """Split ``text`` into one-token pieces that concatenate back to it."""
    pieces: list[str] = _PIECE_RE.findall(text)
    if pieces:
        tail = len(text) - sum(map(len, pieces))
        if tail:
            pieces[-1] += text[len(text) - tail :]
    return pieces


def bare_tokens(text: str) -> list[str]:
    """Return the tokens of ``text`` without their whitespace (for hashing)."""
    tokens: list[str] = _TOKEN_RE.findall(text)
    return tokens


@dataclass(frozen=True, slots=True)
class Prompt:
    """A rendered prompt: its token sequence and a stable digest of its text."""

    tokens: list[str]
    digest: int

    def __len__(self) -> int:
        return len(self.tokens)


class Tokenizer:
    """Renders chat prompts, memoising the tokens of long texts (a shared system prompt
    is tokenized once, not on every request; the regex costs ~0.2 us a token)."""

    def __init__(self, *, cache_size: int = 128, min_cached_chars: int = 512) -> None:
        self._cache: OrderedDict[str, list[str]] = OrderedDict()
        self._cache_size = cache_size
        self._min_chars = min_cached_chars

    def tokens(self, text: str) -> list[str]:
        """The tokens of ``text`` (do not mutate the returned list)."""
        if len(text) < self._min_chars:
            return bare_tokens(text)
        cached = self._cache.get(text)
        if cached is None:
            cached = self._cache[text] = bare_tokens(text)
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(text)
        return cached

    def render_chat(self, turns: Iterable[tuple[str, str, str | None]], *, preamble: str = "") -> Prompt:
        """Render ``(role, text, name)`` turns (plus a tools ``preamble``) into a Prompt."""
        tokens: list[str] = []
        hasher = blake2b(digest_size=8)
        if preamble:
            tokens.extend(self.tokens(preamble))
            hasher.update(preamble.encode())
        for role, text, name in turns:
            tokens.append(_START)
            tokens.append(role)
            if name:
                tokens.append(name)
            tokens.extend(self.tokens(text))
            tokens.append(_END)
            hasher.update(f"\x00{role}\x01{name or ''}\x02{text}".encode())
        tokens.extend((_START, "assistant", "\n"))
        return Prompt(tokens=tokens, digest=int.from_bytes(hasher.digest(), "little"))


def render_chat(turns: Iterable[tuple[str, str, str | None]], *, preamble: str = "") -> Prompt:
    """Render a chat prompt without memoising (see Tokenizer.render_chat)."""
    return Tokenizer(cache_size=0, min_cached_chars=2**62).render_chat(turns, preamble=preamble)
