"""The lexicon's half of the training (`gateway/routing/lexicon.py`): which words it may weigh, and
their weights, fitted on the exam rows and our traffic sets over the feature model's logit (which
stays fitted to the exam rows alone, in `router_model.py`).
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from scipy import sparse  # type: ignore[import-untyped]
from scipy.optimize import minimize  # type: ignore[import-untyped]

from gateway.routing.features import OTHER_LANGUAGE_WORDS
from training.router.router_data import Item, source_group, source_weights

LEXICON_L2 = 1.0
LEXICON_MIN_ROWS = 10  # a word must occur in this many training rows...
LEXICON_MIN_SOURCES = 2  # ...of at least two sources (each traffic set and each exam set is one)
_WORD = re.compile(rb"[a-z][a-z'-]*[a-z]")  # lower-case ASCII letters, inner ' and - allowed
_LATEX = re.compile(rb"\\([a-z]+)")  # \frac, \sqrt...: notation, which the math_notation feature weighs
# Words that say who is writing rather than what is asked: pronouns, determiners, greetings. Our
# traffic sets' authors wrote hard requests as "we / our system" and easy ones as "please ... this",
# which the fit took as a difficulty cue (cross-validated on held-out sets, with them the lexicon
# gains 0.09 AUROC more, and most of it is how our authors wrote, not what users ask).
LEXICON_STOP = frozenset(
    b"i me my mine myself we us our ours ourselves you your yours yourself yourselves he him his "
    b"himself she her hers herself it its itself they them their theirs themselves this that these "
    b"those a an the please thanks thank hi hello hey dear cheers regards i'm i've i'd i'll we're "
    b"we've we'd we'll you're you've you'd you'll he's she's it's they're they've that's there's "
    b"here's let's".split()
)
# Words our traffic sets' brief (`data/routing/traffic/BRIEF.md`) told the authors to keep out of a
# third of the complex prompts and to plant in a third of the simple ones. Their frequencies there
# say what the brief asked, not what users write (the fit learnt "step -3.9", "explain -2.3"), so
# they are left to the hand-written cue features, whose weights the traffic sets do not touch.
BRIEF_WORDS = frozenset(
    b"prove analyze analyse analysis design trade-offs tradeoffs trade-off step steps step-by-step "
    b"rigorous rigorously edge cases explain must carefully".split()
)

# Languages and the countries and regions that speak them: a request names them for where its user
# is or what language a chore is in, not for how hard it is. Fitted, they said "german +1.6, germany
# +2.2, uk +1.9, english -3.2" (our tax and employment questions named countries, our translation
# chores named English), so "Translate this to German" went to the strong tier and "... to English"
# to the cheap one. A gateway serving many countries must not route by them.
PLACE_WORDS = frozenset(
    b"english german french spanish italian portuguese dutch polish swedish norwegian danish finnish "
    b"greek turkish russian ukrainian chinese mandarin cantonese japanese korean arabic hebrew hindi "
    b"bengali urdu vietnamese thai indonesian malay czech hungarian romanian british american "
    b"germany france spain italy portugal netherlands poland sweden norway denmark finland greece "
    b"turkey russia ukraine china japan korea india brazil mexico canada australia uk us usa america "
    b"england britain scotland ireland europe european eu asia africa".split()
)
# The function words of French, Spanish, German, Portuguese and Italian (`non_english`'s list and
# their articles): they say which language a request is in, not how hard it is. Fitted, a few
# English rows with a name or a phrase in another language taught "de -2.2, para -0.7, den -0.8",
# so every request in those languages was pulled toward the cheap tier by its grammar.
LANGUAGE_WORDS = OTHER_LANGUAGE_WORDS | frozenset(b"en la le les los las el den dem ein eine il lo".split())
LEFT_OUT_WORDS = LEXICON_STOP | BRIEF_WORDS | PLACE_WORDS | LANGUAGE_WORDS


def vocabulary(rows: Sequence[Item]) -> list[bytes]:
    """The words the lexicon may weigh: in LEXICON_MIN_ROWS rows of LEXICON_MIN_SOURCES sources, not
    stop words, BRIEF_WORDS or PLACE_WORDS, letters only (numbers and code punctuation are the
    features' business), and not LaTeX commands (a word written as `\\word` in most rows that have it):
    notation is weighed by `math_notation`, and our few LaTeX-formatting chores taught `frac` to
    mean "simple"."""
    counts: Counter[bytes] = Counter()
    commands: Counter[bytes] = Counter()
    sources: defaultdict[bytes, set[str]] = defaultdict(set)
    for item in rows:
        counts.update(item.words)
        commands.update(set(_LATEX.findall(item.sample.lower().encode())))
        for word in item.words:
            sources[word].add(item.source)
    return sorted(
        word
        for word, n in counts.items()
        if n >= LEXICON_MIN_ROWS
        and len(sources[word]) >= LEXICON_MIN_SOURCES
        and 2 * commands[word] <= n
        and word not in LEFT_OUT_WORDS
        and _WORD.fullmatch(word)
    )


def lexicon_matrix(items: Sequence[Item], words: Sequence[bytes]) -> Any:
    """Rows x words, 1 / sqrt(words present) where present: the push is this times the weights."""
    index = {word: k for k, word in enumerate(words)}
    rows, cols, values = [], [], []
    for r, item in enumerate(items):
        present = [index[w] for w in item.words if w in index]
        if not present:
            continue
        rows += [r] * len(present)
        cols += present
        values += [1.0 / math.sqrt(len(present))] * len(present)
    return sparse.csr_matrix((values, (rows, cols)), shape=(len(items), len(words)))


def word_pushes(items: Sequence[Item], lexicon: dict[bytes, float]) -> np.ndarray:
    """Each item's push on the logit from `lexicon`, as the gateway computes it."""
    return np.asarray(lexicon_matrix(items, list(lexicon)) @ np.array(list(lexicon.values())))


def fit_words(
    rows: Sequence[Item], offset_of: Callable[[Sequence[Item]], np.ndarray]
) -> tuple[dict[bytes, float], float]:
    """Word weights, L2-penalised and source-weighted, fitted with `offset_of(rows)` (the feature
    model's logit) as a fixed offset: the words add what the features miss. Returns the weights and
    the intercept shift to add to the feature model's. Each source (our traffic sets together are
    one) gets its own intercept shift in the fit, so the words learn what is hard inside a source,
    not which source a request looks like: our sets are half complex, MMLU a third, GSM8K a fifth,
    CLINC150 and NQ-open not at all. (With one shared shift, words our authors use and exam
    questions do not learnt "complex", and the dev AUROC fell from 0.738 to 0.719; with one per
    source it rose to 0.755, as shipped.) A source with one label only would push its shift to
    infinity and teach the words nothing, so only sources with both labels are fitted; the shipped
    shift is the mean of theirs."""
    labels_of: defaultdict[str, set[bool]] = defaultdict(set)
    for item in rows:
        labels_of[source_group(item)].add(bool(item.label))
    rows = [item for item in rows if len(labels_of[source_group(item)]) == 2]
    words = vocabulary(rows)
    offset = offset_of(rows)
    y = np.array([1.0 if item.label else 0.0 for item in rows])
    weights = source_weights(rows)
    matrix = lexicon_matrix(rows, words)
    keys = [source_group(item) for item in rows]
    groups = sorted(set(keys))
    member = sparse.csr_matrix(
        (np.ones(len(rows)), (np.arange(len(rows)), [groups.index(k) for k in keys])),
        shape=(len(rows), len(groups)),
    )
    n = len(words)

    def loss(params: np.ndarray) -> tuple[float, np.ndarray]:
        v, b = params[:n], params[n:]
        logits = offset + matrix @ v + member @ b
        residual = weights * (1.0 / (1.0 + np.exp(-logits)) - y)
        value = float(weights @ (np.logaddexp(0.0, logits) - y * logits) + 0.5 * LEXICON_L2 * v @ v)
        return value, np.concatenate([matrix.T @ residual + LEXICON_L2 * v, member.T @ residual])

    result = minimize(
        loss,
        np.zeros(n + len(groups)),
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": 5000, "ftol": 1e-12, "gtol": 1e-8},
    )
    if not result.success:
        raise RuntimeError(f"lexicon fit did not converge: {result.message}")
    return dict(zip(words, map(float, result.x[:n]), strict=True)), float(np.mean(result.x[n:]))
