"""`python -m benchmarks.compare`: the same scenarios (c=1 latency, TTFT, large prompt, c=64
throughput) through Tollgate and through LiteLLM's proxy, in front of the same kind of sandbox,
and their ratios.

Each side is one `python -m benchmarks` run with its own direct-to-sandbox baseline, so every figure
compared is the gateway's *added* cost from its own run. LiteLLM is started through the bench's
`--gateway-cmd` by `python -m benchmarks.compare serve-litellm`, which turns the bench's Tollgate
config (the sandbox address and model) into a LiteLLM config from `litellm_config.yaml` and execs
the proxy from its own virtualenv (`make bench-compare` creates `.venv-litellm`). LiteLLM runs with
no database, key or callback: it keeps no ledger, while Tollgate writes one (SQLite).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from string import Template
from typing import Any

import yaml

from benchmarks.report import RESULTS_DIR

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_LITELLM = ROOT / ".venv-litellm" / "bin" / "litellm"
LITELLM_TEMPLATE = Path(__file__).with_name("litellm_config.yaml")
# The bench starts gateways in a scratch working directory: the repository goes on the path explicitly.
SERVE_LITELLM = (
    f"env PYTHONPATH={shlex.quote(str(ROOT))} "
    "{python} -m benchmarks.compare serve-litellm --tollgate-config {config} --host {host} --port {port}"
)
# (metric in the bench's JSON, value key, label, lower is better)
FIGURES = (
    ("latency_p50", "added_ms", "added latency p50, c=1 (ms)", True),
    ("latency_p99", "added_ms", "added latency p99, c=1 (ms)", True),
    ("ttft_p50", "added_ms", "added TTFT p50, stream c=1 (ms)", True),
    ("large_prompt_p50", "added_ms", "added latency p50, 200 KB prompt (ms)", True),
    ("throughput_rps", "gateway_rps", "throughput c=64 (req/s)", False),
    ("gateway_cpu_us_per_request", "us", "gateway CPU per request (us)", True),
    ("rss_mb", "value", "RSS after run (MB)", True),
    ("startup_s", "value", "start-up to first answer (s)", True),
)


def serve_litellm(tollgate_config: Path, host: str, port: int, litellm: Path) -> None:
    """Exec LiteLLM's proxy on the upstream and model the bench configured for Tollgate."""
    config = yaml.safe_load(tollgate_config.read_text())
    (provider,) = config["providers"].values()
    (model,) = config["models"]
    rendered = Template(LITELLM_TEMPLATE.read_text()).substitute(model=model, api_base=provider["base_url"])
    path = Path.cwd() / "litellm.yaml"
    path.write_text(rendered)
    env = {**os.environ, "LITELLM_LOG": "ERROR", "LITELLM_TELEMETRY": "False"}
    argv = [str(litellm), "--config", str(path), "--host", host, "--port", str(port), "--num_workers", "1"]
    os.execve(argv[0], argv, env)


def run_bench(label: str, extra: list[str], json_path: Path) -> dict[str, Any]:
    print(f"[bench.compare] {label}: python -m benchmarks {' '.join(extra)}", file=sys.stderr, flush=True)
    argv = [sys.executable, "-m", "benchmarks", "--no-postgres", "--json", str(json_path), *extra]
    subprocess.run(argv, check=True, cwd=ROOT)
    data: dict[str, Any] = json.loads(json_path.read_text())
    return data


def metric(data: dict[str, Any], name: str, key: str) -> tuple[float | None, float | None]:
    """(value, this run's direct baseline where the figure has one) for a metric of the bench JSON."""
    for row in data["rows"]:
        values = row.get("data") or {}
        if values.get("metric") == name:
            direct = values.get("direct_ms", values.get("direct_rps"))
            return values.get(key), direct
    return None, None


def render(tollgate: dict[str, Any], litellm: dict[str, Any]) -> str:
    """Side by side, with how many times better Tollgate does (below 1: LiteLLM does better)."""
    head = f"{'figure':<40} {'Tollgate':>16} {'LiteLLM':>16} {'Tollgate better by':>19}"
    lines = [head, "-" * len(head)]
    for name, key, label, lower_better in FIGURES:
        (t, t_direct), (ll, ll_direct) = metric(tollgate, name, key), metric(litellm, name, key)
        ratio = "-"
        if t is not None and ll is not None and t > 0 and ll > 0:
            times = ll / t if lower_better else t / ll
            ratio = f"x{times:.1f}" if times >= 1 else f"x{times:.2f}"
        lines.append(f"{label:<40} {_cell(t, t_direct):>16} {_cell(ll, ll_direct):>16} {ratio:>19}")
    lines.append("(in brackets: the same run's direct-to-sandbox baseline the figure was measured against)")
    for side, data in (("Tollgate", tollgate), ("LiteLLM", litellm)):
        for row in data["rows"]:
            if (row.get("data") or {}).get("metric") == "errors" and row["result"] != "met":
                lines.append(f"note: {side}: {row['figure']}: {row['cells']['via_gateway']} errors")
    lines.append("note: LiteLLM keeps no ledger here, so its ledger row check in its own report reads -1.")
    return "\n".join(lines)


def _cell(value: float | None, direct: float | None) -> str:
    if value is None:
        return "-"
    text = f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3f}" if abs(value) < 10 else f"{value:.1f}"
    if direct is not None:
        text += f" [{direct:,.0f}]" if abs(direct) >= 100 else f" [{direct:.2f}]"
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.compare", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--litellm", type=Path, default=DEFAULT_LITELLM, help="the `litellm` CLI (proxy extra)"
    )
    commands = parser.add_subparsers(dest="command")
    serve = commands.add_parser("serve-litellm", help="(used by the bench) exec LiteLLM for a bench config")
    serve.add_argument("--tollgate-config", type=Path, required=True)
    serve.add_argument("--host", required=True)
    serve.add_argument("--port", type=int, required=True)
    serve.add_argument("--litellm", type=Path, default=DEFAULT_LITELLM)
    args, passthrough = parser.parse_known_args(argv)
    if args.command == "serve-litellm":
        serve_litellm(args.tollgate_config, args.host, args.port, args.litellm)
        return 0  # not reached: exec
    if not args.litellm.exists():
        print(
            f"LiteLLM's proxy is not installed at {args.litellm}: `make bench-compare` installs it into "
            ".venv-litellm (or pass --litellm PATH)",
            file=sys.stderr,
        )
        return 1
    # Anything else (--quick, --requests, --duration, ...) goes to both bench runs unchanged.
    with tempfile.TemporaryDirectory(prefix="tollgate-compare-") as tmp:
        tollgate = run_bench("Tollgate", passthrough, Path(tmp) / "tollgate.json")
        # Absolute: the proxy is started from the gateway's own working directory, not this one.
        command = SERVE_LITELLM + f" --litellm {shlex.quote(str(args.litellm.resolve()))}"
        litellm = run_bench("LiteLLM", [*passthrough, "--gateway-cmd", command], Path(tmp) / "litellm.json")
    report = render(tollgate, litellm)
    print(report)
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    (RESULTS_DIR / "compare.json").write_text(
        json.dumps({"tollgate": tollgate, "litellm": litellm}, indent=2)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
