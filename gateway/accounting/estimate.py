"""Token counts for when the upstream reported no usage (a broken stream, a client that left):
such rows are billed from these and marked `usage_estimated`.

Prompts are counted with tiktoken's o200k_base encoding, built from the copy the package ships
(pricing/tokenizer.py; no network). Should that file be missing or altered it falls back to about
four characters a token, the figure OpenAI and Anthropic both quote.

Loaded on first use only (a healthy gateway never pays its 40 MB), and never on the event loop:
callers count in a worker thread. Loading takes ~0.35 s of CPU, the rank table's parse and then
tiktoken's Rust core, which is built holding the GIL (~0.14 s, the one stall left); run on the loop,
it froze every other request for ~0.45 s the first time a client hung up mid-stream.

Only the encoder's core is kept: the 200,000-entry rank table, which counting never reads, is
emptied once the core is built (keeping it cost 28 MB of every worker's RSS), and the heap its parse
freed is handed back, which glibc does not do unless told (77 MB in all against 40 MB).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import logging
import sys
import threading
from collections.abc import Iterable
from dataclasses import replace
from typing import Any, Protocol

from usage import Usage

log = logging.getLogger("tollgate.ledger")

CHARS_PER_TOKEN = 4
# OpenAI's accounting for chat: each message costs 3 tokens of framing, the reply 3 to prime.
_PER_MESSAGE_TOKENS = 3
_lock = threading.Lock()


class _Encoder(Protocol):
    def encode_ordinary(self, text: str) -> list[int]: ...


_UNLOADED: Any = object()
_loaded: _Encoder | None = _UNLOADED
# While the table loads, other threads (the event loop's) get the GIL back within this many seconds
# instead of the default 5 ms; a request needs it a dozen times, so 5 ms each was a 0.1 s wait.
_LOADING_SWITCH_INTERVAL = 0.0002


def _encoding() -> _Encoder | None:
    global _loaded
    if _loaded is _UNLOADED:
        with _lock:  # once, however many threads ask at the same time
            if _loaded is _UNLOADED:
                _loaded = _load()
    return _loaded


def _load() -> _Encoder | None:
    try:
        from pricing.tokenizer import load_o200k
    except ImportError:
        return None
    interval = sys.getswitchinterval()
    sys.setswitchinterval(_LOADING_SWITCH_INTERVAL)
    try:
        encoding: _Encoder = load_o200k()
    except Exception as exc:  # a missing or corrupt file must not break billing
        log.warning("tiktoken encoding unavailable (%s); estimating 4 characters a token", exc)
        return None
    finally:
        sys.setswitchinterval(interval)
    gc.collect()
    _return_free_heap()
    return encoding


def _return_free_heap() -> None:
    """Hand the heap freed by the table's parse back to the OS (glibc only; a no-op elsewhere)."""
    name = ctypes.util.find_library("c")
    try:
        ctypes.CDLL(name).malloc_trim(0)
    except (OSError, AttributeError, TypeError):
        pass


def count_tokens(text: str) -> int:
    encoding = _encoding()
    if encoding is None:
        return -(-len(text) // CHARS_PER_TOKEN)
    # Special-token text ("<|endoftext|>") in a prompt is counted as ordinary text, as it is billed.
    return len(encoding.encode_ordinary(text))


def count_all(texts: Iterable[str]) -> int:
    return sum(count_tokens(text) for text in texts)


def prompt_tokens(messages: list[dict[str, Any]]) -> int:
    total = _PER_MESSAGE_TOKENS
    for message in messages:
        total += _PER_MESSAGE_TOKENS
        content = message.get("content")
        if isinstance(content, str):
            total += count_tokens(content)
        elif isinstance(content, list):
            total += sum(count_tokens(str(p.get("text") or "")) for p in content if isinstance(p, dict))
    return total


def with_generated(reported: Usage, generated_chars: int) -> Usage:
    """What the provider reported before its stream broke (the prompt exactly, cache reads and
    writes included), with the answer counted from what was generated where that is more than the
    provider had reported yet."""
    answer = max(reported.completion_tokens, -(-generated_chars // CHARS_PER_TOKEN))
    return replace(reported, completion_tokens=answer, estimated=True)


def estimate_usage(messages: list[dict[str, Any]], generated_chars: int) -> Usage:
    """The prompt is counted exactly; the answer from its length, since adapters report how many
    characters they generated rather than keep the text of every chunk."""
    return Usage(
        prompt_tokens=prompt_tokens(messages), completion_tokens=-(-generated_chars // CHARS_PER_TOKEN)
    )
