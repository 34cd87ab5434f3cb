"""Fit the semantic router's difficulty head and write `gateway/routing/difficulty_head.json`.

`python -m training.router.train [--features log_chars] [--embedding] [--check]`: a weighted
logistic regression (each source weighs the same, classes balanced; Newton's method, no sampling,
so the file is the same on every run) over the rows of the shared routing data that are not in the
dev split. Which inputs it reads is what `training.router.loso` showed to generalise to a source
left out of fitting: prompt length alone, so far (docs/routing/semantic.md). `--embedding` adds the
static embedding for experiments; `--check` fails unless the shipped file is what this writes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np

from gateway.routing.embedding import default_embedder
from gateway.routing.semantic import HEAD_FILE, HEAD_FORMAT
from training.router.common import (
    DATA_DIR,
    balanced_weights,
    embed_rows,
    feature_rows,
    fit_logistic,
    load_rows,
)

OUT = Path("gateway/routing") / HEAD_FILE
VERSION = "2.0.0"
CREDITS = [
    "RouteLLM MMLU/GSM8K outcomes (Ong et al. 2024, arXiv:2406.18665; Apache-2.0); MMLU (Hendrycks et al., "
    "ICLR 2021; MIT); GSM8K (Cobbe et al. 2021, arXiv:2110.14168; MIT)",
    "LLMRouter modern-pair outcomes (ulab-uiuc/LLMRouter, MIT)",
    "CLINC150 (Larson et al., EMNLP-IJCNLP 2019; CC BY 3.0)",
    "NQ-open (Kwiatkowski et al., TACL 2019; Lee et al., ACL 2019; CC BY-SA 3.0): weights only, no text",
    "MATH-500 (Hendrycks et al., NeurIPS 2021; Lightman et al. 2023; MIT)",
]


def build(features: list[str], *, embedding: bool, l2: float) -> dict[str, object]:
    rows = [row for row in load_rows() if not row.dev]
    dims = default_embedder().dims
    emb = embed_rows(rows) if embedding else np.zeros((len(rows), 0))
    fitted = fit_logistic(
        emb,
        feature_rows(rows, features),
        np.asarray([r.complex for r in rows]),
        balanced_weights(rows),
        l2=l2,
    )
    weights = fitted.embedding_weights if embedding else np.zeros(dims)
    digest = hashlib.sha256()
    for name in ("routellm_outcomes.jsonl", "modern_pair_outcomes.jsonl", "train.jsonl"):
        digest.update((DATA_DIR / name).read_bytes())
    return {
        "format": HEAD_FORMAT,
        "version": VERSION,
        "threshold": 0.5,
        "intercept": round(fitted.intercept, 6),
        "features": [
            {"name": n, "mean": round(float(m), 6), "scale": round(float(s), 6), "weight": round(float(w), 6)}
            for n, m, s, w in zip(features, fitted.means, fitted.scales, fitted.feature_weights, strict=True)
        ],
        "embedding_weights": [round(float(w), 6) for w in weights],
        "training": {
            "rows": len(rows),
            "sources": sorted({r.source for r in rows}),
            "data_sha256_16": digest.hexdigest()[:16],
            "l2": l2,
            "embedding": embedding,
            "credits": CREDITS,
        },
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--features", default="log_chars")
    parser.add_argument("--embedding", action="store_true")
    parser.add_argument("--l2", type=float, default=1.0)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    head = build([n for n in args.features.split(",") if n], embedding=args.embedding, l2=args.l2)
    text = json.dumps(head, indent=1) + "\n"
    if args.check:
        same = args.out.exists() and args.out.read_text(encoding="utf-8") == text
        print("difficulty head reproduced" if same else f"{args.out} differs from a fresh fit")
        sys.exit(0 if same else 1)
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out}: features {args.features or 'none'}, embedding {args.embedding}")


if __name__ == "__main__":
    main()
