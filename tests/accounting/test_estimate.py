"""Estimated rows (a stream cut before usage arrived) count the prompt exactly with o200k_base:
the lean loader must agree token for token with tiktoken's own public Encoding."""

from __future__ import annotations

import hashlib
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import tiktoken

from gateway.accounting import estimate
from gateway.accounting.estimate import _PER_MESSAGE_TOKENS, count_tokens, estimate_usage, with_generated
from pricing import tokenizer
from usage import Usage

TEXTS = [
    "",
    "hello",
    "The quick brown fox jumps over the lazy dog. " * 50,
    "def f(x: int) -> int:\n    return x ** 2  # squared\n",
    "Prompt with a special token <|endoftext|> and <|endofprompt|> in it",
    "数学の問題を解いてください。日本語のテキスト。",
    '{"key": [1, 2, 3.14159], "nested": {"a": null}}',
    "emoji 🚀🔥 and accents: café naïve façade",
]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tiktoken.Encoding:
    """tiktoken's own o200k_base (its pattern, special tokens and pinned hash), its download served
    by the copy the package ships, laid out as tiktoken's cache names it."""
    directory = tmp_path_factory.mktemp("tiktoken-cache")
    url = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
    name = hashlib.sha1(url.encode(), usedforsecurity=False).hexdigest()
    shutil.copyfile(tokenizer.FILE, directory / name)
    os.environ["TIKTOKEN_CACHE_DIR"] = str(directory)
    try:
        return tiktoken.get_encoding("o200k_base")
    finally:
        del os.environ["TIKTOKEN_CACHE_DIR"]


@pytest.mark.parametrize("text", TEXTS)
def test_prompt_text_is_counted_exactly_as_tiktoken_counts_it(
    reference: tiktoken.Encoding, text: str
) -> None:
    assert count_tokens(text) == len(reference.encode(text, disallowed_special=()))


def test_an_estimated_usage_counts_message_framing_and_the_answer_by_length(
    reference: tiktoken.Encoding,
) -> None:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": TEXTS[2]},
        {"role": "user", "content": [{"type": "text", "text": TEXTS[3]}]},
    ]
    usage = estimate_usage(messages, generated_chars=10)
    content = sum(len(reference.encode(t, disallowed_special=())) for t in (TEXTS[2], TEXTS[3]))
    assert usage.prompt_tokens == content + 3 * _PER_MESSAGE_TOKENS
    assert usage.completion_tokens == 3  # 10 characters at four a token, rounded up


def test_the_tokenizer_loads_once_however_many_threads_ask_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """Cut streams arrive together: every one of them counts in a worker thread, and the first
    count of each loads the table unless one load is shared (each is 0.35 s of CPU and 40 MB)."""
    loads: list[int] = []
    load = estimate._load

    def counted_load() -> Any:
        loads.append(1)
        return load()

    monkeypatch.setattr(estimate, "_load", counted_load)
    monkeypatch.setattr(estimate, "_loaded", estimate._UNLOADED)
    with ThreadPoolExecutor(8) as pool:
        counts = list(pool.map(count_tokens, ["hello world"] * 8))
    assert loads == [1]
    assert counts == [2] * 8


class _WatchedEnviron(dict[str, str]):
    """`os.environ` stand-in that records every write."""

    writes: list[str]

    def __setitem__(self, key: str, value: str) -> None:
        self.writes.append(key)
        super().__setitem__(key, value)

    def __delitem__(self, key: str) -> None:
        self.writes.append(key)
        super().__delitem__(key)


def test_loading_the_tokenizer_leaves_the_environment_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """The table loads in a worker thread; setting TIKTOKEN_CACHE_DIR for the load and deleting it
    after raced every thread iterating os.environ then (httpx does, making a client): KeyError."""
    environ = _WatchedEnviron(os.environ)
    environ.writes = []
    monkeypatch.setattr(os, "environ", environ)
    monkeypatch.delitem(environ, "TIKTOKEN_CACHE_DIR", raising=False)
    environ.writes.clear()
    encoder = estimate._load()
    assert encoder is not None
    assert environ.writes == []
    assert len(encoder.encode_ordinary("hello world")) == 2


def test_an_altered_tokenizer_file_is_refused(tmp_path: Path) -> None:
    altered = tmp_path / "o200k_base.tiktoken"
    altered.write_bytes(tokenizer.FILE.read_bytes().replace(b" 0\n", b" 1\n", 1))
    with pytest.raises(ValueError, match="SHA-256 differs"):
        tokenizer.read_ranks(altered)


def test_without_a_usable_tokenizer_file_counting_falls_back_to_four_characters_a_token(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def missing() -> tiktoken.Encoding:
        raise FileNotFoundError("o200k_base.tiktoken")

    monkeypatch.setattr(tokenizer, "load_o200k", missing)
    monkeypatch.setattr(estimate, "_loaded", estimate._UNLOADED)
    assert count_tokens("x" * 9) == 3


def test_a_reported_usage_keeps_its_prompt_and_cache_and_counts_the_answer_generated() -> None:
    reported = Usage(prompt_tokens=1_200, completion_tokens=1, cached_tokens=1_000, raw={"input_tokens": 200})
    usage = with_generated(reported, generated_chars=41)
    assert (usage.prompt_tokens, usage.cached_tokens, usage.raw) == (1_200, 1_000, {"input_tokens": 200})
    assert usage.completion_tokens == 11 and usage.estimated  # 41 characters, four a token, rounded up
    assert (
        with_generated(Usage(prompt_tokens=5, completion_tokens=30), generated_chars=8).completion_tokens
        == 30
    )
