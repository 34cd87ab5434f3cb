"""The routing data as the training script sees it: rows with features, and which rows it fits.

See `data/routing/README.md` for what the files hold, their licences and the citations we owe.
"""

from __future__ import annotations

import functools
import hashlib
import json
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from gateway.routing.features import FEATURE_NAMES, last_user_sample, read_request  # noqa: E402

DATA_DIR = ROOT / "data" / "routing"
DATA_FILES = ("train.jsonl", "routellm_outcomes.jsonl")
# Our own labelled prompts of the kinds of work the public data lacks (`data/routing/traffic/README.md`),
# fitted by the lexicon: the nine traffic sets, and probe sets A and B (which chose 1.2's hand-set
# weights). Paths relative to DATA_DIR.
TRAFFIC_FILES = (
    "traffic/engineering.jsonl",
    "traffic/finance.jsonl",
    "traffic/legal-people.jsonl",
    "traffic/science.jsonl",
    "traffic/content.jsonl",
    "traffic/operations.jsonl",
    "traffic/healthcare.jsonl",
    "traffic/commerce.jsonl",
    "traffic/public.jsonl",
    "probes/a.jsonl",
    "probes/b.jsonl",
)
TRAFFIC = "traffic"  # the source group of every row from TRAFFIC_FILES: together they weigh as one source
# Probe sets never fitted (`data/routing/probes/README.md`).
PROBE_SETS = {
    "c": "held out; read while 1.3 was built",
    "d": "held out, written against surface cues; read while 1.3 was built",
    "e": "held out; read for 1.3's last candidates",
    "f": "held out, written naturally (no balancing rules); read once against 1.3, then for 1.4's candidates",
    "f-fr": "set F translated into French: the same requests, so the same ranking is the aim",
    "f-de": "set F translated into German",
    "f-es": "set F translated into Spanish (for 1.5)",
    "f-zh": "set F translated into Chinese (for 1.5)",
    "f-ja": "set F translated into Japanese (for 1.5)",
    "f-ru": "set F translated into Russian (for 1.5)",
    "g": "held out, written naturally like F; read for 1.4's candidates",
    "m": "held out, 20 prompts in each of 8 languages, written naturally; read for 1.4's candidates",
    "h": "held out, half English, half in 8 other languages, written naturally; read once, for 1.4's length",
    "n": "held out, 20 prompts in each of 8 languages, written naturally; read once, for 1.5's candidates",
    "o": "held out, 8 languages, short hard and long easy requests in each; read once, for 1.6's candidates",
    "p": "held out, English, short hard and long easy requests among them; read once, for 1.7's candidates",
    "q": "held out, English, short hard and long easy requests among them; read once, for 1.8's candidates",
}
WEAK = "mixtral-8x7b-instruct-v0.1"
STRONG = "gpt-4-1106-preview"
HELD_OUT_SOURCES = frozenset({"math500"})  # never fitted: the check on a source the model has not seen
LENGTH = FEATURE_NAMES.index("prompt_tokens")
# Embeddings take minutes to compute on a CPU, so they are kept outside the repository, keyed by text.
EMBEDDING_CACHE = Path.home() / ".cache" / "tollgate" / "router-embeddings.npz"


@dataclass(frozen=True)
class Item:
    id: str
    source: str
    split: str
    label: bool | None  # True = complex
    features: list[float]
    weak: float | None = None  # the weak model's quality on this item, outcome rows only
    strong: float | None = None
    difficulty: int | None = None  # MATH level
    sample: str = ""  # what the text features read and the second stage embeds
    words: frozenset[bytes] = frozenset()  # the words the lexicon weighs (`features.read_request`)


@functools.cache
def probes(name: str, data_dir: Path = DATA_DIR) -> tuple[Item, ...]:
    """One probe set, its `kind` as the item's source; read once however many models report on it."""
    return tuple(replace(item, split="probe") for item in _items(data_dir / "probes" / f"{name}.jsonl"))


def load(data_dir: Path = DATA_DIR) -> tuple[list[Item], list[Item]]:
    """The labelled prompts (`train.jsonl`) and the weak/strong outcome rows, with features."""
    return _items(data_dir / DATA_FILES[0]), _items(data_dir / DATA_FILES[1])


@functools.cache
def traffic(data_dir: Path = DATA_DIR) -> tuple[Item, ...]:
    """Our labelled traffic rows, each with source `traffic/<file stem>` and split `train`."""
    return tuple(
        replace(item, source=f"{TRAFFIC}/{Path(name).stem}", split="train")
        for name in TRAFFIC_FILES
        for item in _items(data_dir / name)
    )


def data_digest(data_dir: Path = DATA_DIR) -> tuple[str, dict[str, str]]:
    """A digest of every file the weights are fitted on (for their version), and each file's hash."""
    digest = hashlib.sha256()
    files = {}
    for name in (*DATA_FILES, *TRAFFIC_FILES):
        data = (data_dir / name).read_bytes()
        digest.update(data)
        files[name] = f"sha256:{hashlib.sha256(data).hexdigest()}"
    return digest.hexdigest()[:12], files


def source_group(item: Item) -> str:
    """The source an item weighs as: its own, or TRAFFIC for every row of our traffic sets."""
    return TRAFFIC if item.source.startswith(TRAFFIC + "/") else item.source


def _items(path: Path) -> list[Item]:
    items = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                items.append(_item(json.loads(line)))
    return items


def _item(row: dict[str, Any]) -> Item:
    scores = row.get("scores") or {}
    body = {"messages": [{"role": "user", "content": row["prompt"]}]}
    features, words = read_request(body)
    return Item(
        id=row["id"],
        source=row.get("source") or row["kind"],
        split=row.get("split", ""),
        label=None if row["label"] is None else row["label"] == "complex",
        features=features,
        weak=scores.get(WEAK),
        strong=scores.get(STRONG),
        difficulty=row.get("difficulty_level"),
        sample=last_user_sample(body),
        words=frozenset(words),
    )


def training_rows(
    labelled: Sequence[Item], outcomes: Sequence[Item], *, drop_source: str | None = None
) -> list[Item]:
    """The `train` rows: every weak/strong outcome row, and the labelled rows of the other sources.

    An outcome row is complex when only the strong model got it right, simple otherwise: when both
    are right the weak one is good enough, and when both are wrong (or only the weak one is right)
    paying for the strong one buys nothing. That is README's definition of the labels, applied to
    every outcome row rather than to `train.jsonl`'s subsample, which kept all of MMLU's hard items
    and a sixth of its easy ones (and so taught "multiple choice means hard").
    """
    chosen = [
        replace(item, label=(item.strong or 0.0) > (item.weak or 0.0))
        for item in outcomes
        if item.split == "train" and item.source != drop_source
    ]
    covered = {item.source for item in outcomes}
    chosen.extend(
        item
        for item in labelled
        if item.split == "train"
        and item.label is not None
        and item.source not in covered
        and item.source not in HELD_OUT_SOURCES
        and item.source != drop_source
    )
    return chosen


def labelled_only_rows(labelled: Sequence[Item]) -> list[Item]:
    """`train.jsonl`'s own labelled train rows (the reference the shipped model is compared with)."""
    return [
        item
        for item in labelled
        if item.split == "train" and item.label is not None and item.source not in HELD_OUT_SOURCES
    ]


def source_weights(items: Sequence[Item]) -> np.ndarray:
    """Row weights under which every source counts the same, so MMLU's 10k rows do not decide alone
    what makes a request hard (our traffic sets count as one source, `source_group`)."""
    groups = [source_group(item) for item in items]
    counts = Counter(groups)
    return np.array([len(items) / (len(counts) * counts[group]) for group in groups])


def length_scores(items: Sequence[Item]) -> list[float]:
    """The prompt-length-only baseline: the log of the approximate token count."""
    return [item.features[LENGTH] for item in items]


def embeddings(items: Sequence[Item], *, cache: Path = EMBEDDING_CACHE) -> np.ndarray:
    """MiniLM embeddings of the items' samples (one row each), by the gateway's own encoder, so
    training sees what the router will. Computed once and cached by a hash of each text."""
    keys = [hashlib.sha256(item.sample.encode()).hexdigest()[:20] for item in items]
    known: dict[str, np.ndarray] = {}
    if cache.exists():
        with np.load(cache) as stored:
            known = dict(zip(stored["keys"].tolist(), stored["vectors"], strict=True))
    missing = sorted({k: i.sample for k, i in zip(keys, items, strict=True) if k not in known}.items())
    if missing:
        from gateway.routing.second_stage import MiniLMEncoder

        print(f"embedding {len(missing)} texts with MiniLM (cached in {cache})", file=sys.stderr)
        vectors = MiniLMEncoder().encode([text for _, text in missing])
        known.update((k, np.array(v, dtype=np.float32)) for (k, _), v in zip(missing, vectors, strict=True))
        cache.parent.mkdir(parents=True, exist_ok=True)
        np.savez(cache, keys=np.array(list(known)), vectors=np.stack(list(known.values())))
    return np.stack([known[k] for k in keys]).astype(float)
