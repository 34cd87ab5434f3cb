"""Complexity routing: how hard a chat request looks, scored from cheap features on the request path.

`load_classifier()` gives the router its classifier: `ComplexityClassifier` (the shipped weights;
`score(body)` is in [0, 1], `assess(body)` also says which features moved it), or with the optional
second stage switched on, `TwoStageClassifier` (adds a local MiniLM sentence embedding).
`evaluation` holds the metrics (AUROC, APGR) that the training script and `tollgate route-eval`
report. The weights are fitted to public data sets (RouteLLM's MMLU and GSM8K outcomes, CLINC150,
NQ-open) and, for the word weights (`lexicon`), to our own labelled traffic sets;
`data/routing/README.md` lists the public sets' licences and the citations owed wherever they ship.
"""

from gateway.routing.classifier import Assessment, ComplexityClassifier, WeightsError
from gateway.routing.features import FEATURE_NAMES, extract_features, feature_dict, last_user_sample
from gateway.routing.second_stage import (
    EmbeddingHead,
    SecondStageUnavailable,
    TwoStageClassifier,
    load_classifier,
)

__all__ = [
    "FEATURE_NAMES",
    "Assessment",
    "ComplexityClassifier",
    "EmbeddingHead",
    "SecondStageUnavailable",
    "TwoStageClassifier",
    "WeightsError",
    "extract_features",
    "feature_dict",
    "last_user_sample",
    "load_classifier",
]
