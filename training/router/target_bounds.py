"""What the routing issue's dev targets ask of a router, read off any router's scores.

    tollgate route-eval data/routing/train.jsonl --split dev --scores-out /tmp/dev.jsonl
    python -m training.router.target_bounds /tmp/dev.jsonl

Splits the overall AUROC into its (complex source, simple source) pairs, then asks two questions:

- How high would the overall AUROC be if the router also recognised each exam's format and ranked
  whole sources in the best order (the "source fingerprint")? Every pair across sources is then
  won or lost outright; pairs inside a source keep the router's own ranking.
- What AUROC inside MMLU would the 0.85 target then need, the rest kept as scored?

And, for each source with both labels, the paired-bootstrap 95% interval of the gain over prompt
length alone: how large a gain its few `complex` items can show as "clearly above".
Pure Python; needs only the gateway package.
"""

from __future__ import annotations

import argparse
import sys
from itertools import permutations
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from gateway.cli.routing import read_rows  # noqa: E402
from gateway.routing import evaluation  # noqa: E402
from gateway.routing.features import FEATURE_NAMES, extract_features  # noqa: E402

TARGET = 0.85
SEED = 20241130  # the data's own seed, as in router_report
_LENGTH = FEATURE_NAMES.index("prompt_tokens")

PairGroups = dict[tuple[str, str], tuple[int, float]]


def overall(groups: PairGroups) -> float:
    """The overall AUROC: the pair-weighted mean of its pair groups."""
    pairs = sum(n for n, _ in groups.values())
    return sum(n * auc for n, auc in groups.values()) / pairs


def ranked_by_source(groups: PairGroups, order: tuple[str, ...]) -> PairGroups:
    """The pair groups when whole sources are ranked in `order` (first = scored highest): pairs
    across sources won or lost outright, pairs inside a source as scored."""
    rank = {s: k for k, s in enumerate(order)}
    return {(c, s): (n, auc if c == s else float(rank[c] < rank[s])) for (c, s), (n, auc) in groups.items()}


def fingerprinted(groups: PairGroups) -> tuple[float, tuple[str, ...]]:
    """The best overall AUROC over every order of whole sources, and that order. Tries every
    order, so at most eight sources."""
    sources = sorted({s for pair in groups for s in pair})
    if len(sources) > 8:
        raise SystemExit(f"{len(sources)} sources: too many orders to try (at most 8)")
    return max((overall(ranked_by_source(groups, order)), order) for order in permutations(sources))


def needed_inside(groups: PairGroups, source: str, target: float = TARGET) -> float:
    """The AUROC inside `source` that would bring the overall AUROC to `target`, the rest as given."""
    pairs = sum(n for n, _ in groups.values())
    inside, _ = groups[source, source]
    rest = sum(n * auc for key, (n, auc) in groups.items() if key != (source, source))
    return (target * pairs - rest) / inside


def _reachable(needed: float) -> str:
    return f"{needed:.3f}" if needed <= 1 else f"{needed:.3f} (unreachable: above 1)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scores", type=Path, help="a `route-eval --scores-out` file (id, score)")
    parser.add_argument("--data", type=Path, default=ROOT / "data" / "routing" / "train.jsonl")
    parser.add_argument("--split", default="dev")
    parser.add_argument("--inside", default="routellm_mmlu", help="the source whose ranking to solve for")
    args = parser.parse_args(argv)

    with args.scores.open("rb") as f:
        score_of = {row["id"]: float(row["score"]) for row in map(orjson.loads, filter(bytes.strip, f))}
    rows = [r for r in read_rows(args.data, split=args.split) if r.label is not None and r.id in score_of]
    labels = [bool(r.label) for r in rows]
    scores = [score_of[r.id] for r in rows]
    sources = [r.source or "-" for r in rows]
    groups = evaluation.auroc_by_pair_group(labels, scores, sources)
    pairs = sum(n for n, _ in groups.values())

    print(f"{len(rows)} labelled items, {pairs} (complex, simple) pairs")
    print(f"  {'complex from':16} {'simple from':16} {'pairs':>6} {'share':>6} {'AUROC':>6}")
    for (c, s), (n, auc) in sorted(groups.items(), key=lambda kv: -kv[1][0]):
        print(f"  {c:16} {s:16} {n:6} {n / pairs:6.1%} {auc:6.3f}")
    as_scored = overall(groups)
    ceiling, order = fingerprinted(groups)
    fingerprint = ranked_by_source(groups, order)
    print(f"overall AUROC as scored: {as_scored:.3f}")
    print(f"with whole sources ranked {' > '.join(order)}: {ceiling:.3f}")
    if (args.inside, args.inside) not in groups:
        raise SystemExit(f"{args.inside} has no (complex, simple) pairs inside it: name another --inside")
    inside = groups[args.inside, args.inside][1]
    print(
        f"AUROC inside {args.inside} needed for {TARGET}: {_reachable(needed_inside(groups, args.inside))} "
        f"as scored, {_reachable(needed_inside(fingerprint, args.inside))} with the sources ranked "
        f"(this router: {inside:.3f})"
    )
    lengths = [extract_features(r.body)[_LENGTH] for r in rows]
    for source in sorted(set(sources)):
        idx = [k for k, s in enumerate(sources) if s == source]
        sub = [labels[k] for k in idx]
        if not 0 < sum(sub) < len(sub):
            continue
        own, length = [scores[k] for k in idx], [lengths[k] for k in idx]
        low, high = evaluation.bootstrap_gain(sub, own, length, seed=SEED)
        print(
            f"inside {source} ({sum(sub)} complex of {len(sub)}): AUROC {evaluation.auroc(sub, own):.3f}, "
            f"length alone {evaluation.auroc(sub, length):.3f}, "
            f"gain 95% CI [{low:+.3f}, {high:+.3f}]"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
