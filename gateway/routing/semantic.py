"""Task first, then difficulty: match a request to a declared route, then score how hard it is inside it.

A route is what an operator declares (name, description, example requests); the router embeds its
examples once and sends each request to the route whose centroid (of its examples and description)
is nearest, by cosine of the static MiniLM embeddings in `embedding`. The difficulty head then
scores the request in [0, 1]; the route's thresholds decide whether that moves it a tier (the
config's business, not this module's).

What is read, and why:
- The **last user message** is what is scored: a follow-up's difficulty is its own. Earlier user
  turns and the system prompt's head add a weak context (`CONTEXT_WEIGHT`) to the difficulty only.
  Assistant turns are never read, so a long previous answer cannot push a follow-up up.
- Long messages are read as a bounded head and tail (`embedding.HEAD_CHARS`, `TAIL_CHARS`); the
  structure features read the same sample, so the cost is bounded for a 100 KB body.
- Maths is notation (operators between numbers, LaTeX commands, powers), never `$`: a price is not
  an equation. Code is a fenced block or code-shaped lines.

The head (`difficulty_head.json`, written by `python -m training.router.train`) is a logistic
regression over the embedding and the `FEATURES` below, fitted to public data sets (RouteLLM's
MMLU and GSM8K outcomes, LLMRouter's modern-pair outcomes, CLINC150, NQ-open, MATH); see
`docs/routing/semantic.md` for how it was chosen and the citations owed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any, Literal

import numpy as np
import orjson
import yaml

from gateway.routing.embedding import HEAD_CHARS, TAIL_CHARS, Embedder, Vector, default_embedder

HEAD_FILE = "difficulty_head.json"
HEAD_FORMAT = 1
ROUTES_FILE = "default_routes.yaml"
CONTEXT_WEIGHT = 0.2  # share of the earlier user turns and system head in the difficulty embedding
_CONTEXT_CHARS = 300  # read from each earlier user turn and from the system prompt
Strength = Literal["cheap", "middle", "strong"]
STRENGTHS: tuple[Strength, ...] = ("cheap", "middle", "strong")

_CODE_LINE = re.compile(
    r"^\s*(?:def |class |import |from \w+ import|function |const |let |var |public |private |#include|"
    r"SELECT |return\b|if \(|for \(|while \().*|.*[;{]\s*$",
    re.MULTILINE,
)
_CODE_ASK = re.compile(
    r"\b(?:function|code|script|implement|program|class|method|regex|query|bug|compile|unit tests?)\b"
)
_MATH = re.compile(
    r"\\(?:frac|sqrt|int|sum|prod|cdot|times|pi|theta|alpha|beta|lambda|le|ge|neq|infty|lim|log|sin|cos)\b"
    r"|\d\s*[\^*/=<>]\s*[\d(a-z]|[a-z)]\s*\^\s*\d|\b[a-z]\s*=\s*-?\d|[=<>]\s*[a-z]\b|[√∫∑π≤≥≠]"
)
_NUMBER = re.compile(r"\d+(?:[.,]\d+)?")


@dataclass(frozen=True, slots=True)
class RouteSpec:
    """One declared route, as config gives it."""

    name: str
    description: str
    examples: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DefaultRoute:
    """A shipped default route: a `RouteSpec` plus where it goes and when difficulty moves it a tier."""

    name: str
    description: str
    examples: tuple[str, ...]
    strength: Strength
    lower_below: float | None = None  # difficulty under which the route may go one tier cheaper
    raise_above: float | None = None  # difficulty over which it goes one tier stronger

    def spec(self) -> RouteSpec:
        return RouteSpec(self.name, self.description, self.examples)


@dataclass(frozen=True, slots=True)
class RouteMatch:
    route: str  # the matched route's name
    similarity: float  # cosine to what it matched (the route's centroid)
    example: str  # the nearest example text (for the ledger reason "like 'implement a parser...'")
    difficulty: float  # in [0, 1]: higher = the stronger tier is worth paying for
    reasons: tuple[tuple[str, float], ...] = ()  # top contributions, optional


@dataclass(frozen=True, slots=True)
class Ask:
    """What a request asks: the last user message's sample and its full length, plus weak context."""

    text: str  # the bounded sample of the last user message
    chars: int  # the last user message's full length in characters
    context: str = ""  # earlier user turns' and the system prompt's heads


def read_ask(body: Mapping[str, Any]) -> Ask:
    """The `Ask` of an OpenAI chat body (or a `prompt` string or message list). Never raises."""
    messages: Any = body.get("messages") if isinstance(body, Mapping) else None
    if messages is None and isinstance(body, Mapping):
        prompt = body.get("prompt")
        if isinstance(prompt, str):
            return _ask_of(prompt, "")
        messages = prompt
    if not isinstance(messages, list):
        return Ask("", 0)
    last: str | None = None
    context: list[str] = []
    for message in messages:
        if not isinstance(message, Mapping):
            continue
        role = message.get("role")
        if role == "user":
            if last is not None:
                context.append(last[:_CONTEXT_CHARS])
            last = _text(message.get("content"))
        elif role in ("system", "developer") and not context:
            context.append(_text(message.get("content"))[:_CONTEXT_CHARS])
    return _ask_of(last or "", "\n".join(c for c in context[-3:] if c))


def _ask_of(text: str, context: str) -> Ask:
    chars = len(text)
    if chars > HEAD_CHARS + TAIL_CHARS:
        text = text[:HEAD_CHARS] + "\n" + text[-TAIL_CHARS:]
    return Ask(text, chars, context)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [p.get("text") for p in content if isinstance(p, Mapping)]
        strings = [t for t in texts if isinstance(t, str)]
        if len(strings) > 2:  # a long list of parts: its ends, as for one long string
            strings = [strings[0], strings[-1]]
        return "\n".join(strings)
    return ""


def _code(ask: Ask) -> float:
    text = ask.text
    if "```" in text:
        return 1.0
    lines = len(_CODE_LINE.findall(text))
    return 1.0 if lines >= 2 else 0.5 if _CODE_ASK.search(text.lower()) else 0.0


# The structure features the head may read (name -> value of an Ask). `training.router.train` picks
# which ones by leave-one-source-out; the head file names those it was fitted with.
FEATURES: dict[str, Callable[[Ask], float]] = {
    "log_chars": lambda ask: math.log1p(ask.chars),
    "code": _code,
    "maths": lambda ask: math.log1p(len(_MATH.findall(ask.text.lower()))),
    "numbers": lambda ask: math.log1p(len(_NUMBER.findall(ask.text))),
    "lines": lambda ask: math.log1p(ask.text.count("\n")),
}


class DifficultyHead:
    """`sigmoid(w . embedding + v . standardised features + b)`; numbers from `difficulty_head.json`."""

    def __init__(
        self,
        *,
        embedding_weights: Sequence[float],
        features: Sequence[str],
        means: Sequence[float],
        scales: Sequence[float],
        feature_weights: Sequence[float],
        intercept: float,
        threshold: float = 0.5,
        version: str = "unversioned",
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        unknown = [name for name in features if name not in FEATURES]
        if unknown:
            raise ValueError(f"difficulty head reads unknown features {unknown}")
        if not len(features) == len(means) == len(scales) == len(feature_weights):
            raise ValueError("difficulty head: one mean, scale and weight per feature")
        self.w = np.asarray(embedding_weights, dtype=np.float32)
        self.features = tuple(features)
        self.means = np.asarray(means, dtype=np.float64)
        self.inverse_scales = 1.0 / np.asarray(scales, dtype=np.float64)
        self.v = np.asarray(feature_weights, dtype=np.float64)
        self.intercept = float(intercept)
        self.threshold = float(threshold)
        self.version = version
        self.metadata = dict(metadata or {})
        self._reads = tuple(FEATURES[name] for name in self.features)

    @classmethod
    def load(cls, raw: bytes | None = None) -> DifficultyHead:
        """The shipped head, or one from the bytes of a head file."""
        if raw is None:
            raw = resources.files("gateway.routing").joinpath(HEAD_FILE).read_bytes()
        data = orjson.loads(raw)
        if not isinstance(data, dict) or data.get("format") != HEAD_FORMAT:
            raise ValueError(f"difficulty head must be an object with format {HEAD_FORMAT}")
        feats = data["features"]
        return cls(
            embedding_weights=data["embedding_weights"],
            features=[f["name"] for f in feats],
            means=[f["mean"] for f in feats],
            scales=[f["scale"] for f in feats],
            feature_weights=[f["weight"] for f in feats],
            intercept=data["intercept"],
            threshold=data.get("threshold", 0.5),
            version=str(data.get("version", "unversioned")),
            metadata=data.get("training"),
        )

    def feature_values(self, ask: Ask) -> np.ndarray:
        return np.fromiter((read(ask) for read in self._reads), dtype=np.float64, count=len(self._reads))

    def contributions(self, vector: Vector, ask: Ask) -> list[tuple[str, float]]:
        """Each part's push on the logit: `embedding` (the meaning) and each structure feature."""
        z = np.clip((self.feature_values(ask) - self.means) * self.inverse_scales, -4.0, 4.0)
        pushes = [("embedding", float(self.w @ vector))]
        pushes.extend((name, float(p)) for name, p in zip(self.features, self.v * z, strict=True))
        return pushes

    def score(self, vector: Vector, ask: Ask) -> float:
        return _sigmoid(self.intercept + sum(p for _, p in self.contributions(vector, ask)))


class SemanticRouter:
    """Matches chat requests to declared routes and scores their difficulty (see the module doc)."""

    blocking: bool = False  # scoring is cheap enough for the event loop

    def __init__(
        self,
        routes: Sequence[RouteSpec],
        *,
        embedder: Embedder | None = None,
        head: DifficultyHead | None = None,
        prefer: frozenset[str] = frozenset(),
        margin: float = 0.0,
    ) -> None:
        """`prefer` (the cheapest tier's routes) wins over a nearer route that is at most `margin`
        (cosine) nearer: short everyday asks sit almost as near analysis or maths as chit-chat."""
        if not routes:
            raise ValueError("a semantic router needs at least one route")
        names = [route.name for route in routes]
        if len(set(names)) != len(names):
            raise ValueError(f"route names must be unique: {names}")
        self.routes = tuple(routes)
        self._preferred = np.asarray([route.name in prefer for route in self.routes])
        self._margin = float(margin)
        self.embedder = embedder or default_embedder()
        self.head = head or DifficultyHead.load()
        texts: list[str] = []
        owners: list[int] = []
        for index, route in enumerate(self.routes):
            for text in (*route.examples, route.description):
                if text.strip():
                    texts.append(text)
                    owners.append(index)
        if not texts:
            raise ValueError("routes need examples or descriptions to match against")
        self._head_reads_embedding = bool(np.any(self.head.w))  # else the context is not embedded
        self._texts = tuple(texts)
        self._owners = np.asarray(owners, dtype=np.int64)
        self._matrix = np.stack([self.embedder.embed(text) for text in texts])
        # One centroid per route (its examples and description): matched by centroid, not by the
        # nearest single example, which leaned to routes with long, wordy examples (docs/routing).
        centroids = np.zeros((len(self.routes), self._matrix.shape[1]), dtype=np.float32)
        np.add.at(centroids, self._owners, self._matrix)
        norms = np.linalg.norm(centroids, axis=1, keepdims=True)
        self._centroids = np.where(norms > 0, centroids / np.where(norms > 0, norms, 1.0), 0.0).astype(
            np.float32
        )

    def match(self, body: Mapping[str, Any]) -> RouteMatch:
        """The route and difficulty of an OpenAI chat request body. Never raises on odd bodies."""
        return self.match_ask(read_ask(body))

    def match_text(self, text: str) -> RouteMatch:
        """As `match` for a single user message."""
        return self.match_ask(_ask_of(text if isinstance(text, str) else "", ""))

    def match_ask(self, ask: Ask) -> RouteMatch:
        vector = self.embedder.embed(ask.text)
        sims = self._centroids @ vector
        route = int(np.argmax(sims))  # no text: a zero vector, the first declared route
        if self._margin > 0 and self._preferred.any() and not self._preferred[route]:
            near = int(np.argmax(np.where(self._preferred, sims, -np.inf)))
            if sims[route] - sims[near] < self._margin:
                route = near
        mine = np.flatnonzero(self._owners == route)
        nearest = int(mine[int(np.argmax(self._matrix[mine] @ vector))])
        scored = vector
        if ask.context and self._head_reads_embedding:
            mixed = vector + CONTEXT_WEIGHT * self.embedder.embed(ask.context)
            norm = float(np.sqrt(mixed @ mixed))
            scored = (mixed / norm).astype(np.float32) if norm > 0 else vector
        pushes = self.head.contributions(scored, ask)
        difficulty = _sigmoid(self.head.intercept + sum(p for _, p in pushes))
        ranked = sorted(pushes, key=lambda item: -abs(item[1]))[:3]
        return RouteMatch(
            route=self.routes[route].name,
            similarity=round(float(sims[route]), 4),
            example=self._texts[nearest],
            difficulty=difficulty,
            reasons=tuple((name, round(value, 3)) for name, value in ranked),
        )


def load_default_routes(raw: str | None = None) -> tuple[DefaultRoute, ...]:
    """The shipped default route set (`default_routes.yaml`), or one parsed from YAML text."""
    if raw is None:
        raw = resources.files("gateway.routing").joinpath(ROUTES_FILE).read_text(encoding="utf-8")
    data = yaml.safe_load(raw)
    out = []
    for item in data["routes"]:
        strength = item["strength"]
        if strength not in STRENGTHS:
            raise ValueError(f"route {item['name']!r}: strength must be one of {STRENGTHS}")
        out.append(
            DefaultRoute(
                name=str(item["name"]),
                description=str(item.get("description", "")),
                examples=tuple(str(e) for e in item.get("examples", ())),
                strength=strength,
                lower_below=_optional_float(item.get("lower_below")),
                raise_above=_optional_float(item.get("raise_above")),
            )
        )
    return tuple(out)


def _optional_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _sigmoid(logit: float) -> float:
    if logit >= 0:
        return 1.0 / (1.0 + math.exp(-logit))
    z = math.exp(logit)
    return z / (1.0 + z)
