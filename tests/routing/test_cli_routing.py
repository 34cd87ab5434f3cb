"""`tollgate route-eval` on a tiny file whose figures can be worked out by hand."""

from __future__ import annotations

import argparse
import io
import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

import gateway.cli.routing as cli_routing
from gateway.accounting.database import run_migrations
from gateway.config.loader import build_config
from gateway.routing import FEATURE_NAMES, ComplexityClassifier
from tests.harness import GatewayServer

WEAK, STRONG = "small-model", "big-model"


def length_only() -> ComplexityClassifier:
    """A classifier whose score grows with prompt length only, so the ranking is known."""
    n = len(FEATURE_NAMES)
    coefficients = tuple(1.0 if name == "prompt_tokens" else 0.0 for name in FEATURE_NAMES)
    return ComplexityClassifier(
        names=FEATURE_NAMES,
        means=(0.0,) * n,
        scales=(1.0,) * n,
        coefficients=coefficients,
        intercept=-3.0,
        clip=100.0,
        threshold=0.5,
    )


ROWS: list[dict[str, Any]] = [
    {"id": "a", "prompt": "hi", "label": "simple", "scores": {WEAK: 1.0, STRONG: 1.0}, "split": "dev"},
    {
        "id": "b",
        "prompt": "what time is it",
        "label": "simple",
        "scores": {WEAK: 1.0, STRONG: 1.0},
        "split": "dev",
    },
    {"id": "c", "prompt": "x" * 200, "label": "complex", "scores": {WEAK: 0.0, STRONG: 1.0}, "split": "dev"},
    {"id": "d", "prompt": "y" * 400, "label": "complex", "scores": {WEAK: 0.0, STRONG: 1.0}, "split": "dev"},
    {"id": "e", "messages": [{"role": "user", "content": "z" * 40}], "label": None, "split": "dev"},
    {"id": "f", "prompt": "not in dev", "label": "simple", "split": "train"},
]


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="tollgate")
    cli_routing.add_commands(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(["route-eval", *argv])


def run(*argv: str, classifier: ComplexityClassifier | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli_routing.run(parse(*argv), classifier=classifier, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "eval.jsonl"
    path.write_text("\n".join(json.dumps(row) for row in ROWS) + "\n")
    return path


def test_figures_and_scores_out(data: Path, tmp_path: Path) -> None:
    classifier = length_only()
    scores = {
        row["id"]: classifier.score({"messages": [{"role": "user", "content": row.get("prompt", "")}]})
        for row in ROWS
    }
    # between b ("what time is it") and e (40 characters): a and b go cheap, e, c and d strong
    threshold = (scores["b"] + classifier.score({"messages": [{"role": "user", "content": "z" * 40}]})) / 2
    out_path = tmp_path / "scores.jsonl"
    code, out, err = run(
        str(data),
        "--split",
        "dev",
        "--threshold",
        str(threshold),
        "--scores-out",
        str(out_path),
        classifier=classifier,
    )
    assert code == 0, err
    assert "items: 5 scored, 4 labelled (2 complex, 2 simple)" in out
    assert "AUROC: 1.000" in out
    assert f"accuracy at threshold {threshold:g}: 1.000" in out
    assert "routed to the cheap tier: 40.0% (2 of 5)" in out
    # Quality over a-d, strong-only items c and d ranked first: 0.5, 0.75, 1, 1, 1 -> APGR 0.75.
    assert (
        f"weak {WEAK} vs strong {STRONG} (4 items with both scores): weak alone 0.500, strong alone 1.000"
        in out
    )
    assert "APGR: 0.750" in out
    half = next(line.split() for line in out.splitlines() if line.strip().startswith("50%"))
    assert half[2:] == ["1.000", "100.0%", "50%"]  # quality, retained, cost saved at 50% strong calls
    written = [json.loads(line) for line in out_path.read_text().splitlines()]
    assert [w["id"] for w in written] == ["a", "b", "c", "d", "e"]
    assert [w["tier"] for w in written] == ["cheap", "cheap", "strong", "strong", "strong"]
    assert written[0]["score"] == pytest.approx(scores["a"], abs=1e-6)


def test_shipped_weights_and_default_threshold(data: Path) -> None:
    code, out, _ = run(str(data))
    assert code == 0
    threshold = ComplexityClassifier.load().threshold
    assert f"threshold {threshold:g}" in out
    assert "items: 6 scored, 5 labelled (2 complex, 3 simple)" in out


def test_figures_per_source_or_kind(tmp_path: Path) -> None:
    rows = [
        {"prompt": "hi", "label": "simple", "kind": "chat"},
        {"prompt": "hello there", "label": "simple", "kind": "chat"},
        {"prompt": "x" * 400, "label": "complex", "kind": "proof"},
        {"prompt": "y" * 40, "label": "simple", "source": "exam", "kind": "ignored when source is set"},
        {"prompt": "z" * 800, "label": "complex", "source": "exam"},
    ]
    path = tmp_path / "kinds.jsonl"
    path.write_text("\n".join(json.dumps(row) for row in rows) + "\n")
    code, out, err = run(str(path), "--threshold", "0.5", classifier=length_only())
    assert code == 0, err
    table = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line.startswith("  ")}
    assert table["chat"] == ["2", "0", "-", "-", "100.0%"]
    assert table["proof"] == ["1", "1", "-", "-", "0.0%"]
    assert table["exam"] == ["2", "1", "1.000", "1.000", "50.0%"]


def test_model_names_must_be_resolvable(tmp_path: Path) -> None:
    path = tmp_path / "three.jsonl"
    path.write_text(
        json.dumps({"prompt": "hi", "label": "simple", "scores": {"a": 1, "b": 0, "c": 1}}) + "\n"
    )
    code, out, err = run(str(path))
    assert code == 0 and "APGR" not in out and "--weak and --strong" in err
    code, out, err = run(str(path), "--weak", "b", "--strong", "c")
    assert code == 0 and "weak b vs strong c" in out


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"prompt": "hi", "label": "hard"}', "label must be"),
        ('{"label": "simple"}', "needs a 'prompt'"),
        ("not json", "not JSON"),
        ("[1, 2]", "JSON object"),
    ],
)
def test_bad_lines_fail_with_their_line_number(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"prompt": "ok"}\n' + line + "\n")
    code, _, err = run(str(path))
    assert code == 1 and f"{path}:2" in err and message in err


def test_nothing_to_score(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text("\n")
    code, _, err = run(str(path))
    assert code == 1 and "no items" in err
    code, _, err = run(str(tmp_path / "missing.jsonl"))
    assert code == 1 and "missing.jsonl" in err


@pytest.mark.parametrize(
    "name",
    [
        "a",
        "b",
        "c",
        "d",
        "e",
        "f",
        "f-fr",
        "f-de",
        "f-es",
        "f-zh",
        "f-ja",
        "f-ru",
        "g",
        "h",
        "m",
        "n",
        "o",
        "p",
        "q",
    ],
)
def test_the_probe_sets_are_route_eval_input(name: str) -> None:
    """The shipped probe sets (data/routing/probes/) read as they are documented: half of each
    complex, every item labelled, figures per kind."""
    path = Path(__file__).resolve().parents[2] / "data" / "routing" / "probes" / f"{name}.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    complex_ = sum(row["label"] == "complex" for row in rows)
    code, out, err = run(str(path))
    assert code == 0, err
    assert f"items: {len(rows)} scored, {len(rows)} labelled ({complex_} complex, {complex_} simple)" in out
    assert "AUROC: 0." in out and "  source " in out


def test_a_reader_that_stops_early_gets_no_traceback() -> None:
    """`tollgate route-eval FILE | head -1`: the pipe closes under the command, which ends quietly."""
    probes = Path(__file__).resolve().parents[2] / "data" / "routing" / "probes" / "g.jsonl"
    done = subprocess.run(
        f"{shlex.quote(sys.executable)} -m gateway.cli.main route-eval {shlex.quote(str(probes))} | head -c 10",
        shell=True,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.stdout == "route-eval"
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr


GATEWAY_CONFIG = """
providers:
  openai: {type: openai, base_url: "https://api.openai.com/v1", api_key: "${SECRET_NOBODY_SET}"}
models:
  small: {provider: openai}
  big: {provider: openai}
routing:
  tiers: [{name: cheap, models: [small]}, {name: strong, models: [big]}]
  thresholds: [0.35]
teams:
  eager: {routing_thresholds: [0.05]}
  plain: {}
"""


def test_the_threshold_can_come_from_the_gateways_config(data: Path, tmp_path: Path) -> None:
    """What a team is really routed at: --config reads routing.thresholds, --team the team's own
    (no provider secret needed: only those sections are read)."""
    config = tmp_path / "tollgate.yaml"
    config.write_text(GATEWAY_CONFIG)
    clf = length_only()
    _, out, _ = run(str(data), "--split", "dev", "--config", str(config), classifier=clf)
    assert out.splitlines()[0].endswith("threshold 0.35")
    _, out, _ = run(str(data), "--split", "dev", "--config", str(config), "--team", "eager", classifier=clf)
    assert out.splitlines()[0].endswith("threshold 0.05")
    assert "routed to the cheap tier: 0.0%" in out  # every score here is above 0.05
    _, out, _ = run(str(data), "--split", "dev", "--config", str(config), "--team", "plain", classifier=clf)
    assert out.splitlines()[0].endswith("threshold 0.35")  # no thresholds of its own: the gateway's
    _, out, _ = run(str(data), "--config", str(config), "--threshold", "0.9", classifier=clf)
    assert out.splitlines()[0].endswith("threshold 0.9")  # an explicit threshold wins
    code, out, err = run(str(data), "--config", str(config), "--team", "nobody", classifier=clf)
    assert (code, out) == (1, "") and "no team 'nobody'" in err
    code, _, err = run(str(data), "--team", "eager", classifier=clf)
    assert code == 1 and "--team needs --config" in err


# --- the task routes: --routes, --from-ledger, --loso -------------------------------------------

PARSER = "Write a Rust function that parses ISO 8601 durations; return only the code."
GREETING = "hello! how is your week going?"
ROUTES_CONFIG = f"""
routing:
  tiers: [{{name: cheap, models: [small]}}, {{name: strong, models: [big]}}]
  routes:
    - {{name: code, description: writing code, examples: ["{PARSER}"], tier: strong}}
    - {{name: chat, description: small talk, examples: ["{GREETING}"], tier: cheap}}
"""


def chat_logs(tmp_path: Path) -> Path:
    """Chat logs in the shapes they come in: messages, a prompt string, a prompt that is a list."""
    rows = [
        {"messages": [{"role": "user", "content": PARSER}], "label": "complex", "source": "ide"},
        {"prompt": GREETING, "label": "simple", "source": "ide"},
        {"prompt": [{"role": "system", "content": "be brief"}, {"role": "user", "content": GREETING}]},
        {"prompt": PARSER, "source": "support", "label": "complex"},
        {"prompt": GREETING, "source": "support", "label": "simple"},
    ]
    path = tmp_path / "logs.jsonl"
    path.write_text("\n".join(json.dumps(row) for row in rows) + "\n")
    return path


def route_table(out: str) -> dict[str, list[str]]:
    lines = out.split("  route ")[1].split("\n")[1:]
    return {line.split()[0]: line.split()[1:] for line in lines if line.startswith("  ") and "%" in line}


def test_routes_on_chat_logs_in_every_shape(tmp_path: Path) -> None:
    config = tmp_path / "tollgate.yaml"
    config.write_text(ROUTES_CONFIG)
    code, out, err = run(str(chat_logs(tmp_path)), "--routes", "--config", str(config))
    assert code == 0, err
    assert "items: 5 routed, 4 labelled (2 complex, 2 simple)" in out
    assert "answered on the cheapest tier (cheap): 60.0% (3 of 5)" in out
    table = route_table(out)
    assert table["code"] == ["2", "40.0%", "0.0%", "strong", "2"]
    assert table["chat"] == ["3", "60.0%", "100.0%", "cheap", "3"]
    per_source = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line.startswith("  ide ")}
    assert per_source["ide"][:2] == ["2", "1"]  # two items, one complex; AUROC beside length follows
    assert "AUROC of difficulty: " in out and "(prompt length alone: " in out


def test_routes_default_set_without_a_config(tmp_path: Path) -> None:
    code, out, err = run(str(chat_logs(tmp_path)), "--routes")
    assert code == 0, err
    assert out.startswith(f"route-eval {tmp_path / 'logs.jsonl'}: the default routes")
    assert "code" in route_table(out)


def test_routes_refuse_a_score_only_config(tmp_path: Path) -> None:
    config = tmp_path / "tollgate.yaml"
    config.write_text(GATEWAY_CONFIG.replace("thresholds: [0.35]", "thresholds: [0.35]\n  routes: []"))
    code, out, err = run(str(chat_logs(tmp_path)), "--routes", "--config", str(config))
    assert (code, out) == (1, "") and "score-only" in err


def test_loso_without_the_train_extra_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [m for m in sys.modules if m.split(".")[0] in ("numpy", "sklearn", "training")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "numpy", None)  # `import numpy` now raises ImportError
    monkeypatch.setitem(sys.modules, "sklearn", None)
    code, out, err = run(str(chat_logs(tmp_path)), "--loso")
    assert (code, out) == (1, "")
    assert err.count("\n") == 1 and "pip install 'tollgate[train]'" in err


def test_loso_prints_each_held_out_source_beside_length(tmp_path: Path) -> None:
    code, out, err = run(str(chat_logs(tmp_path)), "--loso")
    assert code == 0, err
    lines = {line.split()[0]: line.split()[1:] for line in out.splitlines()[2:]}
    # source, n, complex, head AUROC, length AUROC: one complex and one simple row per source
    assert lines["ide"][:2] == ["2", "1"] and lines["support"][:2] == ["2", "1"]
    assert lines["all"][:2] == ["4", "2"]
    assert out.splitlines()[1].split()[:5] == ["source", "n", "cplx", "head", "length"]


def test_loso_needs_two_sources(tmp_path: Path) -> None:
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps({"prompt": GREETING, "label": "simple", "source": "ide"}) + "\n")
    code, out, err = run(str(path), "--loso")
    assert (code, out) == (1, "") and "at least two sources" in err


def test_from_ledger_routes_what_a_real_gateway_stored(tmp_path: Path, sandbox_settings: Any) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'ledger.db'}"
    run_migrations(url)
    routes = {
        "tiers": [{"name": "cheap", "models": ["llama"]}, {"name": "strong", "models": ["gpt-4o-mini"]}],
        "routes": [
            {"name": "code", "description": "writing code", "examples": [PARSER], "tier": "strong"},
            {"name": "chat", "description": "small talk", "examples": [GREETING], "tier": "cheap"},
        ],
    }
    settings = sandbox_settings(
        routing=routes,
        database={"url": url, "auto_migrate": False},
        ledger={"flush_interval_ms": 5, "spool_dir": str(tmp_path / "spool"), "store_bodies": True},
    )
    with GatewayServer(build_config(settings, source="test", environ={})) as server:
        for text in (PARSER, GREETING, GREETING):
            answer = httpx.post(
                server.base_url + "/v1/chat/completions",
                json={"model": "auto", "messages": [{"role": "user", "content": text}]},
                timeout=20,
            )
            assert answer.status_code == 200
        assert len(server.ledger_rows()) == 3
    config = tmp_path / "tollgate.yaml"
    config.write_text(json.dumps({"routing": routes}))  # JSON is YAML
    code, out, err = run("--from-ledger", "--database-url", url, "--since", "1d", "--config", str(config))
    assert code == 0, err
    assert "--from-ledger: 3 requests with stored bodies since" in out
    assert "'scores' unavailable" in out and "AUROC: n/a (no labels" in out
    assert route_table(out)["chat"] == ["2", "66.7%", "100.0%", "cheap", "2"]
    assert route_table(out)["code"] == ["1", "33.3%", "0.0%", "strong", "1"]
    assert "same route as when served: 100.0% (3 of 3" in out
    code, out, err = run(
        "--from-ledger", "--database-url", url, "--since", "2999-01-01", "--config", str(config)
    )
    assert code == 1 and "no requests to route" in err
