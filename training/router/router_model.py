"""The complexity classifier's model and how it is fitted; `train_router.py` runs it, reports it
and writes the weights file.

A logistic regression on standardised features from `gateway.routing.features`, fitted to the
`split == "train"` rows of `data/routing/` (`router_data.training_rows`):

- rows: every weak/strong outcome row (complex = only the strong model was right) plus CLINC150 and
  NQ-open (all simple); MATH-500 is held out as a source the model has never seen;
- weights: every source counts the same, so MMLU's 10k rows do not alone decide what is hard;
- an L2 penalty, and sign constraints: a cue that can only make a request harder (length, code,
  math, numbers, tools...) may not get a negative weight because these sources happen to pair it
  with easy items; code, math, expert, reasoning and constraint cues, which the data barely
  contains, keep a floor (`FLOORS`), and a floored cue's push is not clipped after a fraction of one
  cue (`SPANS`); so does prompt length, which the exam rows weigh less than requests written as
  people write them do;
- features the data never varies (tools, conversation depth, JSON schema, output length, reasoning
  effort, images, code fences, system prompts, other languages: every prompt here is one plain
  English user turn), routine-task cues and pasted material keep hand-set weights (`PRIORS`),
  marked `"fit": "prior"` in the file (`data/routing/probes/` shows how they were chosen);
- features that only tell the sources apart (`EXCLUDED`: lettered options, question marks) get no
  weight;
- standardised values are clipped to +-`CLIP`, here and in the gateway;
- then the lexicon (`fit_lexicon`, `router_lexicon.fit_words`): a weight per word of the ask,
  fitted with the features' logit as a fixed offset on the exam rows and our labelled traffic sets
  (`data/routing/traffic/`, with probe sets A and B), an intercept per source.

Deterministic: L-BFGS-B from a fixed start, no sampling.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy.optimize import minimize  # type: ignore[import-untyped]

from gateway.routing.features import FEATURE_NAMES
from training.router.router_data import Item, source_weights
from training.router.router_lexicon import fit_words, word_pushes
from training.router.router_report import balanced_threshold

L2 = 1.0  # on standardised coefficients, against a log-loss summed over ~12k rows: a light touch

# Logit per unit of the raw feature (clipped at CLIP units), for the features the data never or hardly
# varies (its few non-ASCII characters are accents and symbols, not other languages). Judgement, not
# fit: what a request with these traits usually needs. Set one to zero to switch it off.
PRIORS: dict[str, float] = {
    "system_tokens": 0.05,  # a 1k-token system prompt: +0.35 (agents and RAG run long)
    "conversation_turns": 0.4,  # 3 earlier turns: +0.55; 10: +0.96
    "tools": 0.8,  # one tool: +0.55; five: +1.43 (agentic work breaks small models first)
    "tool_results": 0.3,
    "structured_output": 0.5,  # a JSON schema to follow
    "long_output": 0.3,  # per doubling of max_tokens above 1024
    "reasoning_effort": 3.0,  # the client asked for high reasoning effort (medium: +1.5)
    "images": 0.7,
    "code_blocks": 0.8,  # one fenced block: +0.55
    # A request in another language: a Latin-script one in French, Spanish, German, Portuguese or
    # Italian (`non_english`), or one in another script (`non_ascii`, per unit of its share). The
    # features now read these languages too (their cue words, Chinese and Japanese length), so what
    # is left is a correction: the values at which probe set F's translations score on average
    # what F scores in English, over French, German and Spanish and over Chinese, Japanese and
    # Russian (`training/router/language_shift.py --solve`). Chosen without reading a label.
    "non_ascii": 0.32,
    "non_english": 0.42,
    # Work on text the user supplied (summarise, translate, proofread, extract): easy however long
    # the text, which the length feature would otherwise score as hard. Per distinct cue.
    "routine_cues": -1.0,
    # Tokens of a document pasted beside a short ask: what the length feature credits a long
    # question with (~0.7 per log-token on these data), less about half. Exam questions have none.
    "material_tokens": -0.4,
}
# Lowest logit per unit for cues of work small models do badly. The data is exam questions, not
# tasks: almost no code, proofs or design work and little notation, so it cannot show what these are
# worth, only push them above the floor. Without floors the fit learnt "numbers and quantity words
# mean hard" from GSM8K and scored a grade-school word problem above competition mathematics, a
# proof or a system design (`data/routing/probes/`: set A chose these values, C and D check them).
FLOORS: dict[str, float] = {
    "code_symbols": 3.0,  # 15% code punctuation: +0.45
    "code_keywords": 0.05,  # per distinct keyword (trivial code tasks name them as often as hard ones)
    # Published MATH accuracies: Mixtral-8x7B 28%, GPT-4-1106 64%; on GSM8K 74% and 92%. So a
    # request in mathematical notation is likelier than a word problem to need the strong model.
    "math_notation": 0.8,  # 3 LaTeX marks or operators: +1.0; from 9 on, the clip's +1.4
    "expert_cues": 0.5,  # per distinct cue: prove, theorem, thread-safe, trade-offs...
    "reasoning_cues": 0.3,  # per distinct cue: explain why, step by step... (costs ~0.003 APGR on dev)
    "constraints": 0.3,  # "must", "exactly", "at least": 3 of them +0.42 (costs ~0.006 APGR on dev)
    "multi_step": 0.2,  # 5 list items: +0.36
    # Length, per log-token (fitted alone: 0.70). The exam rows fit it low: inside MMLU and GSM8K a
    # longer question is hardly harder. In requests written as people write them, the hard ones
    # are the longer ones (length alone ranks probe sets F, G and M at 0.91, 0.95 and 0.90), most of
    # all in languages the cue lists and the lexicon cannot read. Chosen between 0.70, 0.95 and 1.2
    # on probe set H by a rule written down first (docs/routing/classifier-experiments.md, version 1.4).
    "prompt_tokens": 0.95,
}
# Raw values up to which a floored cue keeps pushing. Standardised values are clipped at CLIP
# standard deviations of the training rows, and these cues are so rare there that the clip would
# stop their push after a fraction of one cue (the first floors never lifted a design question by
# more than +0.37, however many cues it had). The scale of each is at least its span / CLIP.
SPANS: dict[str, float] = {
    "code_symbols": 0.2,  # a fifth of the bytes code punctuation
    "code_keywords": 4.0,
    "expert_cues": 4.0,
    "reasoning_cues": 4.0,
    "constraints": 2.2,  # log1p of 8 constraint words
    "multi_step": 2.4,  # log1p of 10 list items or sequencing words
}
# Features allowed a negative weight: style rather than a difficulty cue. (CLINC150 and NQ-open are
# lower-cased, which inflates this one's weight; clipping at CLIP bounds what shouting can do.)
SIGNED = frozenset({"capitals"})


# Measured but given no weight, because in these data they say which data set a prompt came from
# rather than how hard it is: lettered options mark MMLU, and CLINC150 and NQ-open come without
# question marks, so "?" would learn "a question mark means hard" (inside MMLU and GSM8K it predicts
# nothing). The script prints the figures with multiple_choice back in.
EXCLUDED = frozenset({"multiple_choice", "questions"})
CLIP = 4.0  # standardised values are clipped to +-CLIP, in training and in the gateway alike


@dataclass(frozen=True)
class Model:
    means: np.ndarray
    scales: np.ndarray
    coefficients: np.ndarray
    intercept: float
    kinds: tuple[str, ...]  # per feature: "data" (fitted), "prior" (never varies here), "excluded"
    lexicon: dict[bytes, float] | None = None

    def logits(self, items: Sequence[Item]) -> np.ndarray:
        x = np.array([item.features for item in items], dtype=float)
        logits: np.ndarray = np.clip((x - self.means) / self.scales, -CLIP, CLIP) @ self.coefficients
        if self.lexicon:
            logits = logits + word_pushes(items, self.lexicon)
        return logits + self.intercept

    def scores(self, items: Sequence[Item]) -> list[float]:
        return [float(v) for v in 1.0 / (1.0 + np.exp(-self.logits(items)))]


def fit(
    items: Sequence[Item],
    *,
    exclude: frozenset[str] = EXCLUDED,
    signed: frozenset[str] = SIGNED,
    weighted: bool = True,
) -> Model:
    """Sign-constrained, L2-penalised, source-weighted logistic regression on clipped standardised
    features (see the module docstring)."""
    x = np.array([item.features for item in items], dtype=float)
    y = np.array([1.0 if item.label else 0.0 for item in items])
    weights = source_weights(items) if weighted else np.ones(len(items))
    means, scales = x.mean(axis=0), x.std(axis=0)
    varies = scales > 1e-12
    means, scales = np.where(varies, means, 0.0), np.where(varies, scales, 1.0)
    scales = np.maximum(scales, [SPANS.get(name, 0.0) / CLIP for name in FEATURE_NAMES])
    kinds = tuple(
        "excluded" if name in exclude else "prior" if name in PRIORS or not v else "data"
        for name, v in zip(FEATURE_NAMES, varies, strict=True)
    )
    means = np.where([k == "data" for k in kinds], means, 0.0)
    scales = np.where([k == "data" for k in kinds], scales, 1.0)
    active = np.array([kind == "data" for kind in kinds])
    z = np.clip((x - means) / scales, -CLIP, CLIP)[:, active]

    def loss(params: np.ndarray) -> tuple[float, np.ndarray]:
        w, b = params[:-1], params[-1]
        logits = z @ w + b
        residual = weights * (1.0 / (1.0 + np.exp(-logits)) - y)
        value = float(weights @ (np.logaddexp(0.0, logits) - y * logits) + 0.5 * L2 * w @ w)
        return value, np.concatenate([z.T @ residual + L2 * w, [residual.sum()]])

    lows = [
        None if name in signed else FLOORS.get(name, 0.0) * scale
        for name, scale, on in zip(FEATURE_NAMES, scales, active, strict=True)
        if on
    ]
    result = minimize(
        loss,
        np.array([low or 0.0 for low in lows] + [0.0]),
        jac=True,
        method="L-BFGS-B",
        bounds=[(low, None) for low in lows] + [(None, None)],
        options={"maxiter": 5000, "ftol": 1e-12, "gtol": 1e-8},
    )
    if not result.success:
        raise RuntimeError(f"fit did not converge: {result.message}")
    coefficients = np.array(
        [PRIORS.get(name, 0.0) if k == "prior" else 0.0 for name, k in zip(FEATURE_NAMES, kinds, strict=True)]
    )
    coefficients[active] = result.x[:-1]
    return Model(means, scales, coefficients, float(result.x[-1]), kinds)


def fit_lexicon(model: Model, rows: Sequence[Item]) -> Model:
    """The model with word weights fitted on `rows` over its logit (`router_lexicon.fit_words`)."""
    weights, shift = fit_words(rows, model.logits)
    lexicon = {word: round_weight(value) for word, value in weights.items()}
    return replace(model, intercept=round_weight(model.intercept + shift), lexicon=lexicon)


def fit_all(exam: Sequence[Item], own: Sequence[Item]) -> Model:
    """The shipped model: features fitted on the exam rows, then the lexicon on them and ours."""
    return fit_lexicon(fit(exam), [*exam, *own])


def best_threshold(items: Sequence[Item], scores: Sequence[float]) -> float:
    """The threshold with the best balanced accuracy on the training rows (`balanced_threshold`),
    every source counting the same, as in the fit: our traffic sets' best threshold is about half
    the exam rows', and unweighted the exam rows' 12k would set it alone."""
    labels = np.array([bool(item.label) for item in items])
    return balanced_threshold(labels, np.array(scores), source_weights(items))


def round_weight(value: float) -> float:
    """Six significant digits: what the weights file keeps, and so what the fit hands on."""
    return float(f"{float(value):.6g}")
