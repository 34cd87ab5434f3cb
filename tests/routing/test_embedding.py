"""The shipped static embedder: loads from package files, deterministic, bounded, never raises."""

import numpy as np

from gateway.routing.embedding import HEAD_CHARS, StaticEmbedder, default_embedder


def test_the_shipped_artefact_loads_from_package_files() -> None:
    embedder = StaticEmbedder.load()
    assert embedder.dims == 128
    assert embedder.matrix.shape[0] == embedder.tokenizer.get_vocab_size()


def test_identical_text_gives_an_identical_unit_vector() -> None:
    embedder = default_embedder()
    a = embedder.embed("Write a parser for ISO 8601 durations in Go.")
    b = embedder.embed("Write a parser for ISO 8601 durations in Go.")
    assert a.dtype == np.float32
    assert np.array_equal(a, b)
    assert abs(float(np.linalg.norm(a)) - 1.0) < 1e-5


def test_related_asks_are_nearer_than_unrelated_ones() -> None:
    embedder = default_embedder()
    code = embedder.embed("write a python function that parses a csv file")
    other_code = embedder.embed("implement a csv parser in rust")
    greeting = embedder.embed("hi there, how are you today?")
    assert float(code @ other_code) > float(code @ greeting) + 0.2


def test_the_dict_fast_path_gives_the_tokenizers_ids() -> None:
    embedder = default_embedder()
    text = "Ein Café in São Paulo costs 12345 reais; résumé_v2 = {'a': 1}! 東京は"
    fast = sorted(embedder.ids(text))
    full = sorted(
        i for i in embedder.tokenizer.encode(text, add_special_tokens=False).ids if i != embedder._unk
    )
    assert fast == full


def test_empty_and_huge_texts_do_not_raise() -> None:
    embedder = default_embedder()
    assert not embedder.embed("").any()
    huge = "lorem ipsum " * 20_000 + "what is the answer?"
    assert len(embedder.ids(huge)) < HEAD_CHARS  # only the head and tail are read
    assert embedder.embed(huge).any()
