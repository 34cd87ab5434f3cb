"""The newcomer's path: `tollgate serve` with no config and no keys, then the OpenAI SDK against it."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from gateway.cli.sandbox_launcher import free_port


def latest_revision() -> str:
    from alembic.script import ScriptDirectory

    import migrations

    head = ScriptDirectory(str(Path(migrations.__file__).parent)).get_current_head()
    assert head is not None
    return head


KEYS = ("OPENAI_API_KEY", "TOLLGATE_VLLM_URL", "TOLLGATE_DATABASE_URL", "TOLLGATE_CONFIG")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path, Path]]:
    workdir = tmp_path_factory.mktemp("newcomer")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in KEYS}
    log = workdir / "serve.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "gateway.cli.main", "serve", "--port", str(port)],
            cwd=workdir,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            base = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                try:
                    if httpx.get(base + "/readyz").status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.05)
            else:
                pytest.fail("gateway did not become ready:\n" + log.read_text())
            yield base, workdir, log
        finally:
            emulators = _children(process.pid)
            process.terminate()
            process.wait(timeout=15)
            left = _still_running(emulators)
            for pid in left:
                os.kill(pid, signal.SIGKILL)
            assert not left, f"`tollgate serve` stopped by SIGTERM left {len(left)} sandbox emulators running"


def _children(pid: int) -> list[int]:
    """Direct children, from /proc (the embedded default's sandbox emulators)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _still_running(pids: list[int], within: float = 10.0) -> list[int]:
    deadline = time.monotonic() + within
    while True:
        alive = [pid for pid in pids if Path(f"/proc/{pid}").exists() and _not_zombie(pid)]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.05)


def _not_zombie(pid: int) -> bool:
    try:
        return (Path(f"/proc/{pid}") / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_start_up_says_what_it_runs_on_in_one_line(served: tuple[str, Path, Path]) -> None:
    _, _, log = served
    lines = [line for line in log.read_text().splitlines() if "embedded default" in line]
    assert len(lines) == 1
    assert "sqlite" in lines[0] and "in-memory state" in lines[0]
    assert "openai → sandbox emulator" in lines[0] and "local → sandbox vLLM emulator" in lines[0]


def test_sdk_answers_and_each_request_leaves_a_row(served: tuple[str, Path, Path]) -> None:
    base, workdir, _ = served
    client = openai.OpenAI(base_url=base + "/v1", api_key="anything", max_retries=0)
    reply = client.chat.completions.create(model="fast", messages=[{"role": "user", "content": "hi"}])
    assert reply.choices[0].message.content
    chunks = list(
        client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert chunks[-1].usage is not None
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="nope", messages=[{"role": "user", "content": "hi"}])
    assert {m.id for m in client.models.list()} >= {"gpt-4o-mini", "gpt-4o", "llama-3.1-8b-instruct", "fast"}
    deadline = time.monotonic() + 5
    while True:
        with sqlite3.connect(workdir / "tollgate.db") as db:
            rows = db.execute("SELECT requested_model, stream, status, cost_nano FROM requests").fetchall()
        if len(rows) >= 3 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert len(rows) == 3
    by_model = {model: (stream, status, cost) for model, stream, status, cost in rows}
    assert by_model["fast"][:2] == (0, 200) and by_model["fast"][2] > 0
    assert by_model["gpt-4o-mini"][:2] == (1, 200) and by_model["gpt-4o-mini"][2] > 0
    assert by_model["nope"] == (0, 404, 0)


def test_auto_routes_by_complexity_out_of_the_box(served: tuple[str, Path, Path]) -> None:
    """`model: "auto"` on the embedded default: a chat turn stays on the local model, a proof goes
    to the frontier tier, and the row keeps the tier, the route, its difficulty and the reason."""
    base, workdir, _ = served
    client = openai.OpenAI(base_url=base + "/v1", api_key="anything", max_retries=0)
    asks = {
        "local": "hi, how are you?",
        "frontier": "Prove that every group of order $p^2$, with $p$ prime, is abelian, then design a "
        "rigorous, thread-safe algorithm that decides it for an input group; discuss the trade-offs.",
    }
    for tier, text in asks.items():
        raw = client.chat.completions.with_raw_response.create(
            model="auto", messages=[{"role": "user", "content": text}]
        )
        assert raw.headers["x-tollgate-tier"] == tier
        assert raw.headers["x-tollgate-route"]
        assert raw.parse().choices[0].message.content
    deadline = time.monotonic() + 5
    while True:
        with sqlite3.connect(workdir / "tollgate.db") as db:
            rows = db.execute(
                "SELECT tier, model, route_score, route_reason, route FROM requests "
                "WHERE requested_model = 'auto'"
            ).fetchall()
        if len(rows) >= 2 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    by_tier = {tier: (model, score, reason, route) for tier, model, score, reason, route in rows}
    assert by_tier["local"][0] == "llama-3.1-8b-instruct"
    # A proof with a design question in it: either strong route is a right reading.
    assert by_tier["frontier"][0] == "gpt-4o" and by_tier["frontier"][3] in {"maths", "analysis"}
    for _model, difficulty, reason, route in by_tier.values():
        assert 0 <= difficulty <= 1 and reason.startswith(f"route {route} ")


def test_migrate_command(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    result = subprocess.run(
        [sys.executable, "-m", "gateway.cli.main", "migrate"],
        env={**os.environ, "TOLLGATE_DATABASE_URL": url},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "migrated sqlite+aiosqlite:///" in result.stdout
    with sqlite3.connect(tmp_path / "m.db") as db:
        assert db.execute("SELECT version_num FROM alembic_version").fetchone() == (latest_revision(),)
