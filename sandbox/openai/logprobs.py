"""Chat ``logprobs`` / ``top_logprobs``: the request check and the answer's shape, OpenAI or vLLM.

OpenAI answers ``{"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}], "refusal":
null}`` with the runners-up most likely first; vLLM answers ``{"content": [...]}`` and lists the
sampled token first, then the most likely others (its logprobs dict starts with the sampled
token). A stream carries each chunk's own tokens; the role and finish chunks carry ``null``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from sandbox.core.engine import Choice
from sandbox.core.logprobs import MAX_TOP, TokenLogprob, token_logprobs
from sandbox.openai.errors import ApiError

__all__ = ["LogprobWriter", "parse_logprobs"]

_JSON_TYPES = {"str": "string", "int": "integer", "float": "number", "list": "array", "dict": "object"}
# What vLLM counts `top_logprobs: -1` (the whole vocabulary) as, against its max_logprobs of 20.
_VLLM_VOCAB = 151_936


def parse_logprobs(body: Mapping[str, Any], *, vllm: bool) -> int | None:
    """The number of runners-up to list per token, or None when logprobs are off.

    Rejects what the upstream rejects, with its words: OpenAI any ``top_logprobs`` without
    ``logprobs: true`` and outside 0-20; vLLM a positive (or -1) one without it, below -1, or
    above its ``max_logprobs`` (20).
    """
    enabled = body.get("logprobs")
    if enabled is not None and not isinstance(enabled, bool):
        kind = _JSON_TYPES.get(type(enabled).__name__, type(enabled).__name__)
        raise ApiError(
            400,
            f"Invalid type for 'logprobs': expected a boolean, but got {kind} instead.",
            param="logprobs",
            code="invalid_type",
        )
    top = body.get("top_logprobs")
    if top is not None and (isinstance(top, bool) or not isinstance(top, int)):
        kind = _JSON_TYPES.get(type(top).__name__, type(top).__name__)
        raise ApiError(
            400,
            f"Invalid type for 'top_logprobs': expected an integer, but got {kind} instead.",
            param="top_logprobs",
            code="invalid_type",
        )
    if vllm:
        return _vllm_top(top, enabled=enabled is True)
    if top is not None:
        if top < 0:
            raise ApiError(
                400,
                "Invalid 'top_logprobs': integer below minimum value. "
                f"Expected a value >= 0, but got {top} instead.",
                param="top_logprobs",
                code="integer_below_min_value",
            )
        if top > MAX_TOP:
            raise ApiError(
                400,
                "Invalid 'top_logprobs': integer above maximum value. "
                f"Expected a value <= {MAX_TOP}, but got {top} instead.",
                param="top_logprobs",
                code="integer_above_max_value",
            )
        if enabled is not True:
            raise ApiError(
                400,
                "The 'top_logprobs' parameter is only allowed when 'logprobs' is enabled.",
                param="top_logprobs",
            )
    return (top or 0) if enabled else None


def _vllm_top(top: int | None, *, enabled: bool) -> int | None:
    if top is not None:
        if top < -1:
            raise ApiError(400, "`top_logprobs` must be a positive value or -1.")
        if top != 0 and not enabled:
            raise ApiError(400, "when using `top_logprobs`, `logprobs` must be set to true.")
        asked = _VLLM_VOCAB if top == -1 else top
        if asked > MAX_TOP:
            raise ApiError(
                400, f"Requested sample logprobs of {asked}, which is greater than max allowed: {MAX_TOP}"
            )
    return (top or 0) if enabled else None


class LogprobWriter:
    """Each choice's token log-probabilities, computed once, written whole or a chunk's span."""

    def __init__(self, top: int, *, vllm: bool, seed: int, mean: float | None = None) -> None:
        self._top = top
        self._vllm = vllm
        self._seed = seed
        self._mean = mean
        self._tokens: dict[int, tuple[TokenLogprob, ...]] = {}

    @staticmethod
    def seed_of(server_seed: int, prompt_digest: int, request_seed: int | None) -> int:
        """The base seed of one request: the same prompt and seeds give the same logprobs."""
        text = f"{server_seed}:{prompt_digest}:{request_seed}".encode()
        return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big")

    def tokens(self, choice: Choice) -> tuple[TokenLogprob, ...]:
        """The log-probabilities of every token ``choice`` generates."""
        found = self._tokens.get(choice.index)
        if found is None:
            seed = self._seed ^ (choice.index * 0x9E3779B97F4A7C15 & 0xFFFFFFFFFFFFFFFF)
            found = token_logprobs(choice.pieces, seed=seed, top=self._top, mean=self._mean)
            self._tokens[choice.index] = found
        return found

    def whole(self, choice: Choice) -> dict[str, Any]:
        """``choices[i].logprobs`` of a whole answer."""
        return self._object(self.tokens(choice))

    def span(self, choice: Choice, start: int, stop: int) -> dict[str, Any]:
        """``choices[0].logprobs`` of the stream chunk carrying tokens ``start:stop``."""
        return self._object(self.tokens(choice)[start:stop])

    def _object(self, tokens: tuple[TokenLogprob, ...]) -> dict[str, Any]:
        content = [self._entry(t) for t in tokens]
        return {"content": content} if self._vllm else {"content": content, "refusal": None}

    def _entry(self, token: TokenLogprob) -> dict[str, Any]:
        if not self._top:
            ranked: list[tuple[str, float]] = []
        elif self._vllm:
            others = [pair for pair in token.ranked if pair[0] != token.token]
            ranked = [(token.token, token.logprob), *others][: self._top]
        else:
            ranked = list(token.ranked[: self._top])
        return {
            **_logprob(token.token, token.logprob),
            "top_logprobs": [_logprob(text, logprob) for text, logprob in ranked],
        }


def _logprob(token: str, logprob: float) -> dict[str, Any]:
    return {"token": token, "logprob": logprob, "bytes": list(token.encode())}
