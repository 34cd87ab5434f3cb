"""`tollgate route-eval`: how well the complexity classifier routes a labelled set of prompts; with
`--routes`, `--from-ledger` or `--loso`, how the task routes do (`gateway.cli.route_eval`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import orjson
import yaml
from pydantic import ValidationError

from gateway.cli import route_eval as cli_route_eval
from gateway.config.schema import RoutingConfig, TeamConfig
from gateway.routing import evaluation
from gateway.routing.classifier import ComplexityClassifier, WeightsError
from gateway.routing.features import FEATURE_NAMES, extract_features
from gateway.routing.second_stage import SecondStageUnavailable, load_classifier

COMMANDS = frozenset({"route-eval"})
CHEAP, STRONG = "cheap", "strong"
STRONG_SHARES = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
_LABELS = {"simple": False, "complex": True}
_LENGTH = FEATURE_NAMES.index("prompt_tokens")


class InputError(ValueError):
    """A line of the input file that route-eval cannot use."""


@dataclass(frozen=True)
class Item:
    id: str
    label: bool | None  # True = complex
    score: float
    length: float  # the prompt-length-only baseline's score
    source: str | None
    qualities: dict[str, float]  # model name -> quality on this item


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    route_eval = commands.add_parser(
        "route-eval",
        help="score labelled prompts with the complexity classifier and print how well it routes",
        description=(
            "Each line of FILE is a JSON object with the prompt ('prompt' string or list of messages, "
            "'messages' list, or a whole chat request under 'body'), optionally 'id', "
            "'label' ('simple' or 'complex'; "
            "unlabelled items are scored but left out of AUROC and accuracy), 'source' or 'kind' "
            "(figures per group), 'split', and "
            "'scores' (model name -> quality, e.g. 1.0 when that model answered correctly). "
            "'Cost saved' in the table is the share of strong-model calls avoided."
        ),
    )
    route_eval.add_argument("file", type=Path, metavar="FILE.jsonl", nargs="?")
    route_eval.add_argument(
        "--routes",
        action="store_true",
        help="route with the task routes as `auto` does (--config's routing.routes, else the shipped "
        "default set): routes, tiers, share cheap, AUROC of difficulty beside length, per source",
    )
    route_eval.add_argument(
        "--from-ledger",
        action="store_true",
        help="route the requests the ledger stored bodies for (ledger.store_bodies), per team",
    )
    route_eval.add_argument("--database-url", help="with --from-ledger: the ledger (default: --config's)")
    route_eval.add_argument("--since", help="with --from-ledger: ISO date or span back (7d; default 30d)")
    route_eval.add_argument(
        "--loso",
        action="store_true",
        help="leave-one-source-out AUROC per source beside length (needs tollgate[train])",
    )
    route_eval.add_argument("--threshold", type=float, help="route to the strong tier at score >= T")
    route_eval.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="judge at the gateway's configured threshold (routing.thresholds[0], the cheap tier's "
        "upper bound) instead of the weights file's",
    )
    route_eval.add_argument(
        "--team", help="with --config: that team's routing_thresholds[0], if it has its own"
    )
    route_eval.add_argument("--scores-out", type=Path, metavar="OUT.jsonl", help="write id, score, tier")
    route_eval.add_argument("--split", help="only items whose 'split' field is this (e.g. dev)")
    route_eval.add_argument("--weights", type=Path, help="weights file (default: the shipped one)")
    route_eval.add_argument(
        "--second-stage",
        action="store_true",
        help="score with the MiniLM second stage too (needs tollgate[embed]); its figures follow the "
        "cheap stage's, each at its own threshold",
    )
    route_eval.add_argument("--weak", help="weak model's key in 'scores' (default: the worse of two)")
    route_eval.add_argument("--strong", help="strong model's key in 'scores' (default: the better of two)")


def run(
    args: argparse.Namespace,
    *,
    classifier: ComplexityClassifier | None = None,
    second_stage: ComplexityClassifier | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Run `route-eval`; 0 on success, 1 when the file, the weights or the second stage cannot be
    used."""
    out, err = out or sys.stdout, err or sys.stderr
    if args.routes or args.from_ledger or args.loso:
        return _run_routes(args, out, err)
    if args.file is None:
        err.write("route-eval: give FILE.jsonl, or --from-ledger\n")
        return 1
    try:
        classifiers = [classifier or ComplexityClassifier.load(args.weights)]
        if getattr(args, "second_stage", False):
            classifiers.append(second_stage or load_classifier(second_stage=True))
        rows = read_rows(args.file, split=args.split)
        configured = configured_threshold(getattr(args, "config", None), getattr(args, "team", None))
    except (OSError, InputError, WeightsError, SecondStageUnavailable) as exc:
        err.write(f"route-eval: {exc}\n")
        return 1
    if not rows:
        err.write(
            f"route-eval: no items in {args.file}"
            + (f" with split {args.split}" if args.split else "")
            + "\n"
        )
        return 1
    where = f" (split {args.split})" if args.split else ""
    for k, scorer in enumerate(classifiers):
        items = score_rows(rows, scorer)
        threshold = next(t for t in (args.threshold, configured, scorer.threshold) if t is not None)
        stage = "second stage" if k else "classifier"
        out.write(f"route-eval {args.file}{where}: {stage} {scorer.version}, threshold {threshold:g}\n")
        _print_labels(items, threshold, out)
        pair = _model_pair(items, args.weak, args.strong, err)
        if pair is not None:
            _print_quality(items, threshold, *pair, out)
        if args.scores_out is not None and k == len(classifiers) - 1:
            # With --second-stage the file holds the second stage's scores: the ones being judged.
            write_scores(args.scores_out, items, threshold)
            out.write(f"wrote {len(items)} scores to {args.scores_out}\n")
    return 0


def _run_routes(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """The task routes' figures on FILE or the ledger, and leave-one-source-out ones with --loso."""
    if args.file is None and not args.from_ledger:
        err.write("route-eval: give FILE.jsonl, or --from-ledger\n")
        return 1
    try:
        if args.loso:
            if args.file is None:
                raise InputError("--loso needs FILE.jsonl (labelled, with sources)")
            cli_route_eval.loso(args.file, out)
            return 0
        routing = cli_route_eval.routing_config(args.config)
        if args.from_ledger:
            requests = cli_route_eval.from_ledger(args, routing, out)
        else:
            requests = [
                cli_route_eval.Request(r.id, r.body, r.label, r.source)
                for r in read_rows(args.file, split=args.split)
            ]
            where = f" (split {args.split})" if args.split else ""
            origin = f"routes from {args.config}" if args.config else "the default routes"
            out.write(f"route-eval {args.file}{where}: {origin}\n")
        if not requests:
            err.write("route-eval: no requests to route\n")
            return 1
        items = cli_route_eval.route_all(requests, routing)
    except (OSError, InputError, cli_route_eval.EvalError) as exc:
        err.write(f"route-eval: {exc}\n")
        return 1
    cli_route_eval.report(items, [t.name for t in routing.tiers], out)
    return 0


def configured_threshold(path: Path | None, team: str | None) -> float | None:
    """The score at which the gateway stops using the cheapest tier: the team's own first routing
    threshold, else the gateway's; None without a config file or without routing tiers. Only the
    `routing` and `teams` sections are read, so no provider secret need be set to run this."""
    if path is None:
        if team is not None:
            raise InputError("--team needs --config")
        return None
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        routing = RoutingConfig.model_validate(raw.get("routing") or {})
        teams = raw.get("teams") or {}
        spec = TeamConfig.model_validate(teams[team]) if team is not None and team in teams else None
    except (yaml.YAMLError, ValidationError, AttributeError) as exc:
        raise InputError(f"{path}: not a usable gateway config: {exc}") from exc
    if team is not None and spec is None:
        raise InputError(f"{path} has no team '{team}'")
    if spec is not None and spec.routing_thresholds:
        return spec.routing_thresholds[0]
    return routing.thresholds[0] if routing.thresholds else None


@dataclass(frozen=True)
class Row:
    """One usable line of the input, before scoring."""

    id: str
    body: dict[str, Any]
    label: bool | None
    source: str | None
    qualities: dict[str, float]


def read_items(path: Path, classifier: ComplexityClassifier, *, split: str | None = None) -> list[Item]:
    """Score every usable line of a JSON Lines file."""
    return score_rows(read_rows(path, split=split), classifier)


def score_rows(rows: Sequence[Row], classifier: ComplexityClassifier) -> list[Item]:
    """Score rows in one batch (the second stage embeds many texts at once far faster)."""
    scores = classifier.score_bodies([row.body for row in rows])
    return [
        Item(
            id=row.id,
            label=row.label,
            score=score,
            length=extract_features(row.body)[_LENGTH],
            source=row.source,
            qualities=row.qualities,
        )
        for row, score in zip(rows, scores, strict=True)
    ]


def read_rows(path: Path, *, split: str | None = None) -> list[Row]:
    """Every usable line of a JSON Lines file."""
    items = []
    with path.open("rb") as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                row = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise InputError(f"{path}:{number}: not JSON: {exc}") from exc
            if not isinstance(row, dict):
                raise InputError(f"{path}:{number}: each line must be a JSON object")
            if split is not None and row.get("split") != split:
                continue
            items.append(_row(row, where=f"{path}:{number}", default_id=str(number)))
    return items


def _row(row: dict[str, Any], *, where: str, default_id: str) -> Row:
    if isinstance(row.get("body"), dict):
        body = row["body"]
    elif isinstance(row.get("messages"), list):
        body = {"messages": row["messages"]}
    elif isinstance(row.get("prompt"), str):
        body = {"messages": [{"role": "user", "content": row["prompt"]}]}
    elif isinstance(row.get("prompt"), list) and all(isinstance(m, dict) for m in row["prompt"]):
        body = {"messages": row["prompt"]}  # some chat logs keep the conversation under 'prompt'
    else:
        raise InputError(f"{where}: needs a 'prompt' string or list, a 'messages' list or a 'body' object")
    label = row.get("label")
    if label is not None and label not in _LABELS:
        raise InputError(f"{where}: label must be 'simple', 'complex' or null, not {label!r}")
    scores = row.get("scores")
    qualities = (
        {
            str(k): float(v)
            for k, v in scores.items()
            if isinstance(v, int | float) and not isinstance(v, bool)
        }
        if isinstance(scores, dict)
        else {}
    )
    return Row(
        id=str(row.get("id", default_id)),
        body=body,
        label=None if label is None else _LABELS[label],
        source=_group(row),
        qualities=qualities,
    )


def _group(row: dict[str, Any]) -> str | None:
    """What the per-group table groups by: the item's 'source', else its 'kind'."""
    return next((value for key in ("source", "kind") if isinstance(value := row.get(key), str)), None)


def write_scores(path: Path, items: Sequence[Item], threshold: float) -> None:
    """One `{"id", "score", "tier"}` line per item, so anyone can recompute the figures."""
    with path.open("wb") as f:
        for item in items:
            tier = STRONG if item.score >= threshold else CHEAP
            f.write(orjson.dumps({"id": item.id, "score": round(item.score, 6), "tier": tier}) + b"\n")


def _print_labels(items: Sequence[Item], threshold: float, out: TextIO) -> None:
    scores = [i.score for i in items]
    labelled = [i for i in items if i.label is not None]
    complex_ = sum(1 for i in labelled if i.label)
    cheap = sum(1 for s in scores if s < threshold)
    out.write(
        f"items: {len(items)} scored, {len(labelled)} labelled ({complex_} complex, "
        f"{len(labelled) - complex_} simple)\n"
    )
    labels = [bool(i.label) for i in labelled]
    if 0 < complex_ < len(labelled):
        auroc = evaluation.auroc(labels, [i.score for i in labelled])
        baseline = evaluation.auroc(labels, [i.length for i in labelled])
        out.write(f"AUROC: {auroc:.3f} (prompt length alone: {baseline:.3f})\n")
    else:
        out.write("AUROC: n/a (needs both simple and complex items)\n")
    if labelled:
        accuracy = evaluation.accuracy_at(labels, [i.score for i in labelled], threshold)
        out.write(f"accuracy at threshold {threshold:g}: {accuracy:.3f}\n")
    out.write(f"routed to the cheap tier: {cheap / len(items):.1%} ({cheap} of {len(items)})\n")
    sources = sorted({i.source for i in items if i.source is not None})
    if len(sources) > 1:
        out.write(f"  {'source':20} {'items':>6} {'complex':>7} {'AUROC':>6} {'length':>6} {'cheap':>6}\n")
        for source in sources:
            group = [i for i in items if i.source == source]
            marked = [i for i in group if i.label is not None]
            positives = sum(1 for i in marked if i.label)
            auc = base = "-"
            if 0 < positives < len(marked):
                group_labels = [bool(i.label) for i in marked]
                auc = f"{evaluation.auroc(group_labels, [i.score for i in marked]):.3f}"
                base = f"{evaluation.auroc(group_labels, [i.length for i in marked]):.3f}"
            share = sum(1 for i in group if i.score < threshold) / len(group)
            out.write(f"  {source:20} {len(group):6} {positives:7} {auc:>6} {base:>6} {share:6.1%}\n")


def _model_pair(
    items: Sequence[Item], weak: str | None, strong: str | None, err: TextIO
) -> tuple[str, str] | None:
    """The (weak, strong) keys of `scores`: as given, or the worse and better of exactly two."""
    names = sorted({name for i in items for name in i.qualities})
    if not names:
        return None
    if weak is None or strong is None:
        if len(names) != 2:
            err.write(f"route-eval: 'scores' has models {', '.join(names)}; name --weak and --strong\n")
            return None
        both = [i for i in items if all(n in i.qualities for n in names)]
        means = {n: sum(i.qualities[n] for i in both) / max(len(both), 1) for n in names}
        worse, better = sorted(names, key=lambda n: (means[n], n))
        weak = weak or (better if strong == worse else worse)
        strong = strong or (worse if weak == better else better)
    if weak == strong or not {weak, strong} <= set(names):
        err.write(f"route-eval: --weak {weak} and --strong {strong} must be two of: {', '.join(names)}\n")
        return None
    return weak, strong


def _print_quality(items: Sequence[Item], threshold: float, weak: str, strong: str, out: TextIO) -> None:
    scored = [i for i in items if weak in i.qualities and strong in i.qualities]
    if not scored:
        return
    scores = [i.score for i in scored]
    weak_q = [i.qualities[weak] for i in scored]
    strong_q = [i.qualities[strong] for i in scored]
    curve = evaluation.quality_curve(scores, weak_q, strong_q)
    low, high = curve[0].quality, curve[-1].quality
    out.write(
        f"quality, weak {weak} vs strong {strong} ({len(scored)} items with both scores): "
        f"weak alone {low:.3f}, strong alone {high:.3f}\n"
    )
    out.write(f"  {'strong calls':>12} {'threshold':>9} {'quality':>8} {'retained':>8} {'cost saved':>10}\n")
    rows = [(share, evaluation.threshold_for_share(scores, share)) for share in STRONG_SHARES]
    rows.append((1.0 - evaluation.routed_share(scores, threshold), threshold))
    for k, (share, at) in enumerate(rows):
        quality = evaluation.quality_at(curve, share)
        retained = f"{quality / high:.1%}" if high else "-"
        mark = "  <- threshold" if k == len(rows) - 1 else ""
        out.write(f"  {share:12.0%} {at:9.4f} {quality:8.3f} {retained:>8} {1 - share:10.0%}{mark}\n")
    if high != low:
        out.write(f"APGR: {evaluation.apgr(scores, weak_q, strong_q):.3f} (random routing: 0.5)\n")
    else:
        out.write("APGR: n/a (the two models score the same on these items)\n")
