"""`tollgate demo`: the whole thing for a few seconds (real emulator processes, a real gateway, real
traffic), and the workload it replays."""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
from pathlib import Path

from gateway.cli.demo_world import HANDBOOK, MESSAGES, TEAMS, Workload, demo_config
from gateway.config.loader import build_config

ROOT = Path(__file__).resolve().parents[2]


def test_demo_replays_traffic_then_prints_spend_and_where_to_look() -> None:
    process = subprocess.Popen(
        # Until `tollgate` dispatches `demo` itself, the module runs the same command.
        [sys.executable, "-m", "gateway.cli.demo", "--duration", "3", "--exit"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = process.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        raise
    assert process.returncode == 0, out
    assert "Spend by team" in out and "Spend by model" in out
    team_table = out.split("Spend by team")[1].split("Spend by model")[0]
    for team in TEAMS:
        assert re.search(rf"^\s*{team}\s+\d+", team_table, re.M), f"no spend row for {team}:\n{out}"
    total = re.search(r"^\s*TOTAL\s+(\d+)\s+(\d+)", team_table, re.M)
    assert total is not None and int(total.group(1)) > 0
    sent = re.search(r"Tollgate demo: (\d+) requests", out)
    assert sent is not None and int(total.group(1)) == int(sent.group(1))  # every request has its row
    assert re.search(r"Dashboard:\s+http://127\.0\.0\.1:\d+/dashboard", out)


def test_the_workload_mixes_every_kind_of_work_across_the_teams() -> None:
    workload = Workload(random.Random(1))
    calls = [workload.next() for _ in range(400)]
    assert {c.kind for c in calls} == {"chat", "rag", "code", "lookup"}
    assert {c.team for c in calls} == set(TEAMS)
    assert all(c.stream == (c.kind == "chat") for c in calls)
    assert any(c.path == MESSAGES for c in calls)
    lookups = [c.body["messages"][0]["content"] for c in calls if c.kind == "lookup"]
    assert len(set(lookups)) < len(lookups) / 4  # repeats: the response cache has work to do
    # The shared RAG context is long enough for providers' prompt caching (OpenAI's starts at 1,024
    # tokens, about 4 KB).
    assert len(HANDBOOK.encode()) > 8 * 1024


def test_the_demo_config_is_valid(tmp_path: Path) -> None:
    urls = {name: f"http://127.0.0.1:{port}" for name, port in [("openai", 1), ("anthropic", 2), ("vllm", 3)]}
    config = build_config(demo_config(urls, directory=tmp_path, admin_key="k"), environ={})
    assert set(config.teams) == set(TEAMS)
    assert {m.tier for m in config.models.values()} == {"managed", "frontier", "local"}
