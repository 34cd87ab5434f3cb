"""Seeded token log-probabilities for generated text: the sampled token's and the runners-up.

Deterministic for a given seed (the dialect derives it from the server seed, the prompt and the
choice), and coherent: at each position the sampled token and its alternatives share at most a
probability of 1, so a low-confidence token has more likely rivals. ``mean`` pins the mean of
the sampled tokens' log-probabilities exactly (what a confidence floor reads); without it a
choice is confident (a mean between -0.35 and -0.02).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["MAX_TOP", "TokenLogprob", "token_logprobs"]

MAX_TOP = 20
_ALTERNATIVES = (
    "the a of to and in for with on that it is as at by from or model token answer request "
    "reply cache stream route budget team server client upstream policy limit cost usage "
    "quick small large simple clear final early late system engine queue window context"
).split()
# Each runner-up takes this share of the mass the ones before it left.
_DECAY = 0.5


@dataclass(frozen=True, slots=True)
class TokenLogprob:
    """One generated token: its log-probability and the most likely tokens at its position.

    ``ranked`` holds the ``top + 1`` most likely (token, logprob) pairs, most likely first; the
    sampled token is among them when it ranks that high.
    """

    token: str
    logprob: float
    ranked: tuple[tuple[str, float], ...]


def token_logprobs(
    pieces: Sequence[str], *, seed: int, top: int, mean: float | None = None
) -> tuple[TokenLogprob, ...]:
    """Log-probabilities for each of ``pieces``, with ``top`` (0-20) runners-up ranked."""
    if not pieces:
        return ()
    rng = random.Random(seed)
    target = mean if mean is not None else -(0.02 + 0.33 * rng.random())
    surprise = [-math.log(1.0 - rng.random()) + 1e-3 for _ in pieces]
    scale = target / (sum(surprise) / len(surprise))
    out = []
    for piece, s in zip(pieces, surprise, strict=True):
        logprob = max(s * scale, -9999.0)
        out.append(TokenLogprob(piece, logprob, _ranked(rng, piece, logprob, top + 1)))
    return tuple(out)


def _ranked(rng: random.Random, piece: str, logprob: float, depth: int) -> tuple[tuple[str, float], ...]:
    """The ``depth`` most likely tokens at a position whose sampled token has ``logprob``."""
    lead = piece[: len(piece) - len(piece.lstrip())]
    # The same draws whatever ``depth`` is, so asking for more runners-up changes no logprob.
    words = rng.sample(_ALTERNATIVES, MAX_TOP + 2)
    rivals = [lead + w for w in words if lead + w != piece][:depth]
    left = 1.0 - math.exp(logprob)
    pairs = [(piece, logprob)]
    for rival in rivals:
        share = left * _DECAY
        left -= share
        pairs.append((rival, math.log(share) if share > 0 else -9999.0))
    pairs.sort(key=lambda pair: pair[1], reverse=True)
    return tuple(pairs[:depth])
