"""Static token embeddings: a text's meaning as one unit vector, in microseconds, with no model at run time.

The matrix in `static_embed/` is all-MiniLM-L6-v2 distilled offline by Model2Vec
(`python -m training.router.distill`): every WordPiece token's embedding through the transformer,
reduced by PCA and weighted by a Zipf prior, quantised to int8 with one scale per row. At run time
a text is tokenised (the `tokenizers` package, the distilled `tokenizer.json`), its rows gathered
and averaged, and the mean normalised: a numpy gather and a sum, no torch, nothing downloaded.

Cost is bounded whatever the text's size: `embed` reads at most `HEAD_CHARS` from the start and
`TAIL_CHARS` from the end (the ask of a long prompt sits at one end or the other). The tokenizer
is the slow part (about 2 µs a word), so words that are whole tokens are looked up in a dict and
only the rest (rare words, numbers, accents, CJK) go through it, in one batch, and are remembered:
the mean does not depend on the order of the tokens, so the result is the same as tokenising the
whole text, except that at most `MAX_NEW_WORDS` never-seen words are read per call (a 100 KB dump
of random identifiers costs what a prose paragraph does).
"""

from __future__ import annotations

import re
import threading
from importlib import resources
from typing import Protocol

import numpy as np
import numpy.typing as npt
from tokenizers import Tokenizer

ARTEFACT_DIR = "static_embed"
HEAD_CHARS = 1000
TAIL_CHARS = 400
MAX_NEW_WORDS = 48  # words a request may send through the tokenizer; further unseen ones are skipped
_PIECES_CACHE = 50_000  # words remembered with their pieces (cleared when full)
# What BERT's pre-tokenizer splits on: runs of letters and digits, and each punctuation mark alone.
_WORDS = re.compile(r"[^\W_]+|\S")

Vector = npt.NDArray[np.float32]


class Embedder(Protocol):
    """Anything that turns a text into a unit vector of a fixed width (tests pass fakes)."""

    dims: int

    def embed(self, text: str) -> Vector: ...


class StaticEmbedder:
    """The shipped distilled MiniLM token table; `embed(text)` is a unit float32 vector (zeros: no text)."""

    def __init__(self, matrix: Vector, tokenizer: Tokenizer) -> None:
        if matrix.ndim != 2 or matrix.shape[0] != tokenizer.get_vocab_size():
            raise ValueError("the embedding matrix needs one row per tokenizer id")
        self.matrix = np.ascontiguousarray(matrix, dtype=np.float32)
        self.dims = int(matrix.shape[1])
        tokenizer.no_padding()
        tokenizer.no_truncation()
        self.tokenizer = tokenizer
        unk = tokenizer.token_to_id("[UNK]")
        self._unk = -1 if unk is None else unk
        # Whole-word tokens (not "##" pieces, not "[CLS]"-like specials): word -> row.
        self._vocab = {
            token: row
            for token, row in tokenizer.get_vocab().items()
            if not token.startswith("##") and not (token.startswith("[") and token.endswith("]"))
        }
        self._pieces: dict[str, tuple[int, ...]] = {}
        self._zero = np.zeros(self.dims, dtype=np.float32)
        self._zero.setflags(write=False)

    @classmethod
    def load(cls) -> StaticEmbedder:
        """Read the artefact shipped in this package (int8 codes times per-row scales)."""
        folder = resources.files("gateway.routing").joinpath(ARTEFACT_DIR)
        with folder.joinpath("vectors.npz").open("rb") as handle, np.load(handle) as data:
            matrix = data["codes"].astype(np.float32) * data["scales"].astype(np.float32)[:, None]
        tokenizer = Tokenizer.from_str(folder.joinpath("tokenizer.json").read_text(encoding="utf-8"))
        return cls(matrix, tokenizer)

    def ids(self, text: str) -> list[int]:
        """The token ids `embed` averages: of the bounded head and tail of `text`, unknowns dropped."""
        if len(text) > HEAD_CHARS + TAIL_CHARS:
            text = text[:HEAD_CHARS] + "\n" + text[-TAIL_CHARS:]
        words = _WORDS.findall(text.lower())
        found = list(map(self._vocab.get, words))
        if None not in found:
            return found  # type: ignore[return-value]  # no None in it
        ids = [i for i in found if i is not None]
        pieces = self._pieces
        new: list[str] = []
        for word, row in zip(words, found, strict=True):
            if row is None:
                known = pieces.get(word)
                if known is not None:
                    ids.extend(known)
                elif len(new) < MAX_NEW_WORDS:
                    new.append(word)
        if new:
            if len(pieces) > _PIECES_CACHE:
                pieces.clear()
            unk = self._unk
            for word, encoding in zip(
                new, self.tokenizer.encode_batch(new, add_special_tokens=False), strict=True
            ):
                known = tuple(i for i in encoding.ids if i != unk)
                pieces[word] = known
                ids.extend(known)
        return ids

    def embed(self, text: str) -> Vector:
        ids = self.ids(text) if text else []
        if not ids:
            return self._zero.copy()
        # Sorted: the ids' order depends on which words were cached, and a float sum on its order.
        ids.sort()
        total = self.matrix.take(ids, axis=0).sum(axis=0)  # the mean's direction: no need to divide
        norm = float(np.sqrt(total @ total))
        return (total / norm).astype(np.float32) if norm > 0 else self._zero.copy()


_DEFAULT: StaticEmbedder | None = None
_LOCK = threading.Lock()


def default_embedder() -> StaticEmbedder:
    """The shipped embedder, loaded once per process (about 15 MB of float32 in memory)."""
    global _DEFAULT
    if _DEFAULT is None:
        with _LOCK:
            if _DEFAULT is None:
                _DEFAULT = StaticEmbedder.load()
    return _DEFAULT


def embed(text: str) -> Vector:
    """`default_embedder().embed(text)`."""
    return default_embedder().embed(text)
