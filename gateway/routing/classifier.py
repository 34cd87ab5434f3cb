"""The complexity score of a chat request: a logistic regression over `features`, weights from a file.

The weights (`weights.json`, written by `training/router/train_router.py`) ship in the package. Scoring is a
dot product over about thirty numbers in pure Python plus the push of the fitted word weights
(`lexicon`), so the hot path never imports numpy. Each standardised feature is clipped to +-`clip`
first, as in training, so one extreme feature (a prompt in capitals, a thousand tools) moves the
score a bounded amount.

The weights are fitted to public data sets and our own traffic sets; see `data/routing/README.md`
for the public sets' licences and the citations owed wherever the weights ship.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import orjson

from gateway.routing.features import FEATURE_NAMES, read_request
from gateway.routing.lexicon import Lexicon, LexiconError

WEIGHTS_FILE = "weights.json"
WEIGHTS_FORMAT = 2  # 2 adds the optional `lexicon`; format 1 files (features only) are still read
_READABLE_FORMATS = (1, 2)


class WeightsError(ValueError):
    """The weights file is missing, malformed, or made for a different feature set."""


@dataclass(frozen=True)
class Assessment:
    """A request's score and the features that moved it most (for the ledger's `reason`)."""

    score: float
    reasons: tuple[tuple[str, float], ...]

    def reason(self) -> str:
        """A short reason for the ledger, e.g. `tools +1.43, words +0.92, prompt_tokens +1.28`."""
        return ", ".join(f"{name} {value:+.2f}" for name, value in self.reasons)


def read_weights(path: str | Path | None, *, shipped: str, what: str) -> Any:
    """JSON from `path`, or the file of that name shipped in this package."""
    try:
        if path is None:
            raw = resources.files("gateway.routing").joinpath(shipped).read_bytes()
        else:
            raw = Path(path).read_bytes()
        return orjson.loads(raw)
    except (OSError, orjson.JSONDecodeError) as exc:
        raise WeightsError(f"cannot read {what}: {exc}") from exc


def shipped_threshold() -> float:
    """The shipped weights' threshold: the embedded default routes `auto` above the local tier there."""
    data = read_weights(None, shipped=WEIGHTS_FILE, what="complexity weights")
    return float(data["threshold"])


class ComplexityClassifier:
    """Scores chat request bodies in [0, 1]; higher means the strong tier is more likely worth it."""

    # Scoring costs microseconds: fine on the event loop. A subclass that runs a model says otherwise.
    blocking = False

    def __init__(
        self,
        *,
        names: tuple[str, ...],
        means: tuple[float, ...],
        scales: tuple[float, ...],
        coefficients: tuple[float, ...],
        intercept: float,
        clip: float = 4.0,
        threshold: float = 0.5,
        version: str = "unversioned",
        metadata: dict[str, Any] | None = None,
        lexicon: Lexicon | None = None,
    ) -> None:
        if names != FEATURE_NAMES:
            raise WeightsError(
                f"weights are for features {list(names)}, this build computes {list(FEATURE_NAMES)}"
            )
        if not len(means) == len(scales) == len(coefficients) == len(names):
            raise WeightsError("means, scales and coefficients must have one value per feature")
        if any(scale <= 0 for scale in scales) or clip <= 0:
            raise WeightsError("every scale, and the clip, must be positive")
        self.names = names
        self.means = means
        self.scales = scales
        self.coefficients = coefficients
        self.intercept = intercept
        self.clip = clip
        self.threshold = threshold
        self.version = version
        self.metadata = metadata or {}
        self.lexicon = lexicon
        # Only the features with a weight are evaluated, as (index, mean, 1 / scale, coefficient).
        self._terms = tuple(
            (j, m, 1.0 / s, c)
            for j, (m, s, c) in enumerate(zip(means, scales, coefficients, strict=True))
            if c != 0.0
        )

    @classmethod
    def load(cls, path: str | Path | None = None) -> ComplexityClassifier:
        """Read weights from `path`, or from the file shipped in this package."""
        return cls.from_dict(read_weights(path, shipped=WEIGHTS_FILE, what="complexity weights"))

    @classmethod
    def from_dict(cls, data: Any) -> ComplexityClassifier:
        if not isinstance(data, dict) or data.get("format") not in _READABLE_FORMATS:
            raise WeightsError(
                f"complexity weights must be an object with format {' or '.join(map(str, _READABLE_FORMATS))}"
            )
        try:
            features = data["features"]
            lexicon = Lexicon.from_dict(data["lexicon"]) if data.get("lexicon") is not None else None
            return cls(
                names=tuple(str(f["name"]) for f in features),
                means=tuple(float(f["mean"]) for f in features),
                scales=tuple(float(f["scale"]) for f in features),
                coefficients=tuple(float(f["coefficient"]) for f in features),
                intercept=float(data["intercept"]),
                clip=float(data.get("clip", 4.0)),
                threshold=float(data.get("threshold", 0.5)),
                version=str(data.get("version", "unversioned")),
                metadata=data.get("training") if isinstance(data.get("training"), dict) else None,
                lexicon=lexicon,
            )
        except LexiconError as exc:
            raise WeightsError(f"malformed complexity weights: {exc}") from exc
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, WeightsError):
                raise
            raise WeightsError(f"malformed complexity weights: {exc!r}") from exc

    def score(self, body: dict[str, Any]) -> float:
        """The complexity score of a chat request body, in [0, 1]."""
        return self.score_features(*read_request(body))

    def score_bodies(self, bodies: Sequence[dict[str, Any]]) -> list[float]:
        """The scores of many bodies (the two-stage classifier batches its embeddings here)."""
        return [self.score(body) for body in bodies]

    def score_features(self, features: list[float], words: set[bytes] | None = None) -> float:
        """The score of an `extract_features` vector and the words it was read from."""
        clip = self.clip
        logit = self.intercept
        for j, mean, inverse_scale, coefficient in self._terms:
            z = (features[j] - mean) * inverse_scale
            logit += coefficient * (clip if z > clip else -clip if z < -clip else z)
        if words and self.lexicon is not None:
            logit += self.lexicon.push(words)
        return _sigmoid(logit)

    def contributions(
        self, features: list[float], words: set[bytes] | None = None
    ) -> list[tuple[str, float]]:
        """Each weighted feature's push on the logit, relative to an average training prompt, and the
        lexicon's as `words` (its words are not named: the ledger keeps no prompt text)."""
        clip = self.clip
        out = []
        for j, mean, inverse_scale, coefficient in self._terms:
            z = max(-clip, min(clip, (features[j] - mean) * inverse_scale))
            out.append((self.names[j], coefficient * z))
        if words and self.lexicon is not None:
            out.append(("words", self.lexicon.push(words)))
        return out

    def explain(self, body: dict[str, Any], *, top: int = 3) -> list[tuple[str, float]]:
        """The `top` features that moved the score most, as (name, push on the logit), largest
        magnitude first. Pushes are relative to an average training prompt (mostly exam questions),
        so a short chat message shows `prompt_tokens` pulling down."""
        return list(self.assess(body, top=top).reasons)

    def assess(self, body: dict[str, Any], *, top: int = 3) -> Assessment:
        """Score and explanation from one feature pass (what the router wants)."""
        pushes = self.contributions(*read_request(body))
        logit = self.intercept
        for _, value in pushes:  # the order `score_features` adds them in: the same float
            logit += value
        ranked = sorted(pushes, key=lambda item: -abs(item[1]))
        reasons = tuple((name, round(value, 3)) for name, value in ranked[:top] if abs(value) >= 0.0005)
        return Assessment(_sigmoid(logit), reasons)


def _sigmoid(logit: float) -> float:
    if logit >= 0:
        return 1.0 / (1.0 + math.exp(-logit))
    z = math.exp(logit)
    return z / (1.0 + z)
