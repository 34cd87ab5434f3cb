"""The tokenizer the package ships: tiktoken's o200k_base (GPT-4o's), built through tiktoken's public
API from `pricing/data/o200k_base.tiktoken`, so counting tokens never downloads anything.

The file is tiktoken's own (MIT, OpenAI), byte for byte the one `tiktoken_ext.openai_public`
fetches, checked against the SHA-256 tiktoken pins for it. The split pattern and special tokens are
copied from the same module (tiktoken 0.14), whose `o200k_base()` would fetch the file.

The file is parsed here rather than by `tiktoken.load.load_tiktoken_bpe`, which reads a local path
through its download cache and so leaves a 3.6 MB copy in `$TMPDIR/data-gym-cache` (or reads one
left there); the format is one `base64(token) rank` pair a line, as that function reads it.
"""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

import tiktoken

FILE = Path(__file__).with_name("data") / "o200k_base.tiktoken"
SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
SPECIAL_TOKENS = {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}
PATTERN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)


# OpenAI models whose tokenizer is o200k_base (tiktoken's `MODEL_PREFIX_TO_ENCODING`, 0.14): what
# the shipped file counts exactly. Every other model's count with it is an estimate.
_O200K_PREFIXES = ("gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "chatgpt-4o", "o1", "o3", "o4", "gpt-oss")


def encoding_for(model: str) -> str | None:
    """The shipped tokenizer's name when it is this model's own, else None."""
    return "o200k_base" if model.lower().startswith(_O200K_PREFIXES) else None


def load_o200k(path: Path = FILE, *, keep_ranks: bool = False) -> tiktoken.Encoding:
    """o200k_base from the shipped file (raises OSError or ValueError when it is missing or altered).

    The rank table (200,000 entries, ~28 MB as a Python dict) is only needed to build the encoder's
    core; with `keep_ranks=False` it is emptied afterwards, leaving an encoder whose `encode*` and
    `decode*` work (they run in tiktoken's core) but whose rank-table views are empty.
    """
    ranks = read_ranks(path)
    encoding = tiktoken.Encoding(
        "o200k_base", pat_str=PATTERN, mergeable_ranks=ranks, special_tokens=dict(SPECIAL_TOKENS)
    )
    if not keep_ranks:
        ranks.clear()  # the dict we passed in; the core holds its own copy
    return encoding


def read_ranks(path: Path = FILE) -> dict[bytes, int]:
    data = path.read_bytes()
    if hashlib.sha256(data).hexdigest() != SHA256:
        raise ValueError(f"{path} is not tiktoken's o200k_base file (its SHA-256 differs)")
    pairs = (line.split() for line in data.splitlines() if line)
    return {base64.b64decode(token): int(rank) for token, rank in pairs}


__all__ = ["FILE", "SHA256", "encoding_for", "load_o200k", "read_ranks"]
