"""The servers under test as pinned subprocesses, and what /proc says about them.

Pinning keeps the comparison honest on a 2-core box: the gateway gets core 0 to itself, while the
sandbox and the load generator share core 1, so the gateway's own CPU per request shows directly in
its throughput. Every process starts in its own session (a Ctrl-C in the terminal reaches only the
bench, which then stops them in order) and is always terminated, then killed, on the way out.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks.loadgen import Connection, ProtocolError, build_request

GATEWAY_CORE = 0
CLIENT_CORE = 1
_STOP_GRACE_S = 10.0
_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_LISTENING = re.compile(r"listening on http://([^\s:/]+):(\d+)")
# Set by the bench for its own process: a variable here would override the config file we write.
_SCRUBBED_ENV = ("TOLLGATE_DATABASE_URL", "TOLLGATE_CONFIG")

DEFAULT_GATEWAY_CMD = "{tollgate} serve --config {config} --host {host} --port {port}"


@dataclass(frozen=True)
class Pinning:
    """Whether processes can be pinned, and why not when they cannot."""

    enabled: bool
    reason: str

    def prefix(self, core: int) -> list[str]:
        return ["taskset", "-c", str(core)] if self.enabled else []


def detect_pinning() -> Pinning:
    """Pin only when there are two usable cores and both taskset and sched_setaffinity work."""
    if not hasattr(os, "sched_setaffinity"):
        return Pinning(False, "os.sched_setaffinity is unavailable on this platform")
    if shutil.which("taskset") is None:
        return Pinning(False, "taskset is not installed")
    usable = os.sched_getaffinity(0)
    if not {GATEWAY_CORE, CLIENT_CORE} <= usable:
        return Pinning(
            False, f"cores {GATEWAY_CORE} and {CLIENT_CORE} are not both usable ({sorted(usable)})"
        )
    return Pinning(True, f"gateway on core {GATEWAY_CORE}; sandbox and load generator on core {CLIENT_CORE}")


def pin_self(pinning: Pinning) -> Pinning:
    """Move the bench process (the load generator) onto the client core."""
    if not pinning.enabled:
        return pinning
    try:
        os.sched_setaffinity(0, {CLIENT_CORE})
    except OSError as exc:
        return Pinning(False, f"sched_setaffinity failed: {exc}")
    return pinning


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


class ManagedProcess:
    """A child process with its output in a log file; `stop` is idempotent and always reaps."""

    def __init__(
        self, name: str, argv: Sequence[str], log_path: Path, env: Mapping[str, str], cwd: Path | None = None
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self._log = log_path.open("wb")
        self.proc = subprocess.Popen(
            self.argv,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,
        )
        self.started_ns = time.perf_counter_ns()
        self._stopped = False

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def log_problems(self, lines: int = 6) -> list[str]:
        """The last warnings and errors in the log, with the exception line that follows a traceback."""
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return []
        keep = [
            line[:300]
            for line in text
            if any(word in line for word in ("ERROR", "WARNING", "Error:", "Exception:", "ledger"))
        ]
        return keep[-lines:] or ["(nothing logged)"]

    def stop(self) -> None:
        """SIGTERM the whole session (the server and anything it spawned), then SIGKILL if it lingers.

        Idempotent. Only processes still in this child's session are signalled, so nothing else is
        ever hit, even after the child's pid has been reaped.
        """
        if self._stopped:
            return
        self._stopped = True
        if self.proc.poll() is None:
            self._signal(signal.SIGTERM)
            try:
                self.proc.wait(_STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                self.proc.wait(5)
        # Stragglers in the session (workers of a forking server) go too.
        for pid in _session_members(self.proc.pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        self._log.close()

    def _signal(self, sig: signal.Signals) -> None:
        """Signal the session's process group while its leader (our child) is alive or unreaped."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)


def _session_members(sid: int) -> list[int]:
    """Processes whose session id is `sid` (the kernel never reuses a pid still used as a sid)."""
    members = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if int(fields[3]) == sid:
            members.append(int(entry.name))
    return members


def child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED_ENV}
    env["PYTHONUNBUFFERED"] = "1"
    return env


async def start_sandbox(
    workdir: Path, pinning: Pinning, host: str = "127.0.0.1"
) -> tuple[ManagedProcess, int]:
    """The instant-profile OpenAI emulator on a port it picks, read back from its first line."""
    argv = [
        *pinning.prefix(CLIENT_CORE),
        sys.executable,
        "-m",
        "sandbox",
        "--host",
        host,
        "--port",
        "0",
        "--dialect",
        "openai",
        "--profile",
        "instant",
    ]
    proc = ManagedProcess("sandbox", argv, workdir / "sandbox.log", child_env(), cwd=workdir)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if not proc.alive():
                raise RuntimeError(f"the sandbox exited with {proc.proc.returncode}:\n{proc.log_tail()}")
            match = _LISTENING.search(proc.log_path.read_text(errors="replace"))
            if match:
                port = int(match.group(2))
                await wait_for_chat(host, port, proc, timeout_s=30)
                return proc, port
            await asyncio.sleep(0.02)
        raise RuntimeError(f"the sandbox did not say where it listens within 30 s:\n{proc.log_tail()}")
    except BaseException:
        proc.stop()
        raise


def gateway_argv(template: str, *, config: Path, host: str, port: int) -> list[str]:
    tollgate = Path(sys.executable).with_name("tollgate")
    command = template.format(
        tollgate=shlex.quote(str(tollgate)),
        python=shlex.quote(sys.executable),
        config=shlex.quote(str(config)),
        host=host,
        port=port,
    )
    return shlex.split(command)


@dataclass
class Gateway:
    """A running gateway and how long it took to answer its first chat completion."""

    process: ManagedProcess
    host: str
    port: int
    startup_s: float
    probe_answers: int


async def start_gateway(
    template: str,
    config: Path,
    workdir: Path,
    pinning: Pinning,
    *,
    label: str,
    host: str = "127.0.0.1",
    headers: Sequence[str] = (),
    model: str = "bench-model",
) -> Gateway:
    """Spawn the gateway and time spawn -> first 200 from /v1/chat/completions (with `headers`,
    asking for `model`)."""
    port = free_port(host)
    argv = [*pinning.prefix(GATEWAY_CORE), *gateway_argv(template, config=config, host=host, port=port)]
    # Its own working directory: relative paths (the ledger spool, ./tollgate.db) stay per run and
    # never touch the repository or another run.
    cwd = workdir / f"gateway-{label}"
    cwd.mkdir(exist_ok=True)
    proc = ManagedProcess(f"gateway-{label}", argv, workdir / f"gateway-{label}.log", child_env(), cwd=cwd)
    try:
        answers = await wait_for_chat(host, port, proc, timeout_s=60, headers=headers, model=model)
    except BaseException:
        proc.stop()
        raise
    startup_s = (time.perf_counter_ns() - proc.started_ns) / 1e9
    return Gateway(proc, host, port, startup_s, answers)


_PROBE_BODY = '{"model":"%s","messages":[{"role":"user","content":"ping"}],"max_tokens":1}'


async def wait_for_chat(
    host: str,
    port: int,
    proc: ManagedProcess,
    *,
    timeout_s: float,
    headers: Sequence[str] = (),
    model: str = "bench-model",
) -> int:
    """Poll until a chat completion answers 200; returns how many HTTP answers it took."""
    body = (_PROBE_BODY % model).encode()
    request = build_request(host, port, "/v1/chat/completions", body, headers)
    deadline = time.monotonic() + timeout_s
    answers = 0
    last = "no answer"
    while time.monotonic() < deadline:
        if not proc.alive():
            raise RuntimeError(f"{proc.name} exited with {proc.proc.returncode}:\n{proc.log_tail()}")
        try:
            conn = await Connection.open(host, port)
        except OSError as exc:
            last = str(exc)
            await asyncio.sleep(0.005)
            continue
        try:
            response = await asyncio.wait_for(conn.send(request), 10)
        except (OSError, ProtocolError, TimeoutError) as exc:
            last = f"{type(exc).__name__}: {exc}"
            await asyncio.sleep(0.005)
            continue
        finally:
            conn.close()
        answers += 1
        if response.status == 200:
            return answers
        last = f"HTTP {response.status}: {bytes(response.body[:200])!r}"
        await asyncio.sleep(0.02)
    raise RuntimeError(f"{proc.name} gave no 200 within {timeout_s:.0f} s ({last}):\n{proc.log_tail()}")


def process_tree(pid: int) -> list[int]:
    """`pid` and every descendant, so a server that forks workers is measured whole."""
    parents: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        parents.setdefault(int(fields[1]), []).append(int(entry.name))
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo.extend(parents.get(current, ()))
    return tree


def rss_bytes(pid: int) -> int:
    """VmRSS summed over the process tree (0 when /proc is unavailable)."""
    total = 0
    for member in process_tree(pid):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{member}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
    return total


def cpu_seconds(pid: int) -> float:
    """User + system CPU time summed over the process tree."""
    ticks = 0
    for member in process_tree(pid):
        with contextlib.suppress(OSError):
            stat = Path(f"/proc/{member}/stat").read_text()
            fields = stat[stat.rfind(")") + 2 :].split()
            ticks += int(fields[11]) + int(fields[12])
    return ticks / _CLK_TCK


def core_busy_seconds() -> dict[int, float]:
    """Busy time per CPU from /proc/stat (user, nice, system, irq, softirq, steal; not idle/iowait)."""
    busy: dict[int, float] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/stat").read_text().splitlines():
            name, *fields = line.split()
            if not name.startswith("cpu") or name == "cpu":
                continue
            ticks = [int(f) for f in fields[:8]]
            busy[int(name[3:])] = (ticks[0] + ticks[1] + ticks[2] + ticks[5] + ticks[6] + ticks[7]) / _CLK_TCK
    return busy


class LoadProbe:
    """How much CPU *other* processes took during a window: the noise on a shared machine.

    Per core, busy time minus what our own pinned processes used there (gateway on core 0; sandbox
    and load generator on core 1); unpinned, the whole machine minus all of ours.
    """

    def __init__(self, pinned: bool, own: dict[str, int]) -> None:
        self.pinned = pinned
        self.own = own  # name -> pid; "load generator" is this process
        self._busy: dict[int, float] = {}
        self._cpu: dict[str, float] = {}
        self._wall = 0.0

    def _own_cpu(self) -> dict[str, float]:
        cpu = {name: cpu_seconds(pid) for name, pid in self.own.items()}
        cpu["load generator"] = time.process_time()
        return cpu

    def start(self) -> None:
        self._busy, self._cpu, self._wall = core_busy_seconds(), self._own_cpu(), time.monotonic()

    def stop(self) -> dict[str, float]:
        """Share of a core other processes used, per core ("core0", "core1") or for "all"."""
        busy, cpu, wall = core_busy_seconds(), self._own_cpu(), time.monotonic() - self._wall
        if wall <= 0 or not busy:
            return {}
        used = {k: busy[k] - self._busy.get(k, 0.0) for k in busy}
        mine = {k: cpu[k] - self._cpu.get(k, 0.0) for k in cpu}
        if self.pinned and GATEWAY_CORE in used and CLIENT_CORE in used:
            core0 = used[GATEWAY_CORE] - mine.get("gateway", 0.0)
            core1 = used[CLIENT_CORE] - mine.get("sandbox", 0.0) - mine["load generator"]
            return {"core0": max(0.0, core0 / wall), "core1": max(0.0, core1 / wall)}
        return {"all": max(0.0, (sum(used.values()) - sum(mine.values())) / wall)}
