"""Complexity routing: how hard a chat request looks, scored from cheap features on the request path.

`ComplexityClassifier.load()` reads the shipped weights; `score(body)` is in [0, 1], `assess(body)`
also says which features moved it. `evaluation` holds the metrics (AUROC, APGR) that the training
script and `tollgate route-eval` report. The weights are fitted to public data sets (RouteLLM's
MMLU and GSM8K outcomes, CLINC150, NQ-open); `data/routing/README.md` lists their licences and the
citations owed wherever the weights ship.
"""

from gateway.routing.classifier import Assessment, ComplexityClassifier, WeightsError
from gateway.routing.features import FEATURE_NAMES, extract_features, feature_dict

__all__ = [
    "FEATURE_NAMES",
    "Assessment",
    "ComplexityClassifier",
    "WeightsError",
    "extract_features",
    "feature_dict",
]
