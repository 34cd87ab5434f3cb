"""Fitted word weights: what the words of a request say about the kind of work it asks for.

The cue lists in `features` are written by hand and cover a few dozen words. The lexicon is their
fitted counterpart: a weight for each of a few thousand words, learnt by `training/router/train_router.py`
from the exam rows and from our labelled traffic sets (`data/routing/traffic/`), on top of the
cheap features' logit. A request's push is the sum of the weights of the lexicon's words it
contains divided by the square root of how many it contains, so a long prompt is pushed by which
words it uses, not by how many.

Words are the ones `features.read_request` returns (the sample of the last user message, not the
system prompt; lower-cased ASCII, split at punctuation); scoring is one set intersection and a sum,
a few microseconds.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

NORMALISE = "sqrt_present"  # the one rule this module implements; the file names it so it can change


class LexiconError(ValueError):
    """The lexicon section of a weights file is malformed."""


class Lexicon:
    """Word -> weight, and a request's push on the complexity logit."""

    def __init__(self, weights: dict[str, float]) -> None:
        self._weights = {word.encode(): float(value) for word, value in weights.items()}
        self._words = frozenset(self._weights)

    def __len__(self) -> int:
        return len(self._weights)

    @classmethod
    def from_dict(cls, data: Any) -> Lexicon:
        if not isinstance(data, dict) or data.get("normalise") != NORMALISE:
            raise LexiconError(f"a lexicon must be an object with normalise '{NORMALISE}'")
        words = data.get("words")
        if not isinstance(words, dict) or not all(
            isinstance(w, str) and w.isascii() and isinstance(v, int | float) and math.isfinite(v)
            for w, v in words.items()
        ):
            raise LexiconError("a lexicon's words must map ASCII words to finite numbers")
        return cls(words)

    def push(self, words: Iterable[bytes]) -> float:
        """The push on the logit of a request with these words."""
        present = self._words.intersection(words)
        if not present:
            return 0.0
        return sum(map(self._weights.__getitem__, present)) / math.sqrt(len(present))
