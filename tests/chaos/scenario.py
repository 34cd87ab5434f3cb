"""What every chaos scenario shares: the gateway served as `tollgate serve` serves it, a well-behaved
client that measures its latency while the fault runs, raw-socket clients that misbehave, and the
tally each scenario prints (sent, successes, clean errors, ledger rows, lost, duplicates, budget
overshoot, seconds to recover, p99).

Sizes are for the default `pytest -q` run; TOLLGATE_CHAOS_SCALE=5 make chaos runs bigger ones.
"""

from __future__ import annotations

import asyncio
import os
import re
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx
import orjson
import uvicorn
import uvloop

from gateway.config.schema import Config
from gateway.http.guard import uvicorn_settings
from gateway.state.failover import WATCH_TASK
from tests.harness import GatewayServer

T = TypeVar("T")
SCALE = float(os.environ.get("TOLLGATE_CHAOS_SCALE", "1"))
HELLO = [{"role": "user", "content": "hello"}]
# Every tally of the session, printed together at the end (tests/chaos/conftest.py).
RESULTS: list[Tally] = []


def scaled(n: int) -> int:
    return max(1, round(n * SCALE))


class ChaosGateway(GatewayServer):
    """The harness's in-process gateway, but with uvicorn set up exactly as `tollgate serve` sets it
    up (the guarded HTTP protocol, its limits, uvloop), so the scenarios test the real server."""

    def __init__(self, config: Config, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self._server = uvicorn.Server(
            uvicorn.Config(
                self.app,
                host="127.0.0.1",
                port=self.port,
                log_level="warning",
                lifespan="on",
                **uvicorn_settings(config.server),
            )
        )
        if os.environ.get("TOLLGATE_CHAOS_LOOP", "uvloop") == "uvloop":  # `asyncio` to compare
            self._loop.close()
            self._loop = uvloop.new_event_loop()

    def tasks(self) -> int:
        """asyncio tasks alive on the gateway's loop (the caller's own excluded)."""

        async def count() -> int:
            # The shared store's watch starts on its first use and lives until close: not a leak.
            return sum(t.get_name() != WATCH_TASK for t in asyncio.all_tasks()) - 1

        return self.call(count())

    def connections(self) -> int:
        """Client connections the server holds open."""
        return len(self._server.server_state.connections)

    def settle(self, *, tasks: int, within: float = 10.0) -> tuple[int, int]:
        """Wait until tasks fall back to `tasks` and no client connection is open; returns both."""
        deadline = time.monotonic() + within
        while True:
            now_tasks, open_conns = self.tasks(), self.connections()
            if (now_tasks <= tasks and open_conns == 0) or time.monotonic() > deadline:
                return now_tasks, open_conns
            time.sleep(0.05)


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    request_id: str | None
    clean: bool  # a success, or an OpenAI-shaped error body
    seconds: float = 0.0


def is_openai_error(body: bytes) -> bool:
    try:
        error = orjson.loads(body)["error"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return False
    return isinstance(error, dict) and isinstance(error.get("message"), str) and "type" in error


def answer_of(response: httpx.Response, seconds: float = 0.0) -> Answer:
    clean = response.status_code == 200 or is_openai_error(response.content)
    return Answer(response.status_code, response.headers.get("x-request-id"), clean, seconds)


@dataclass
class Tally:
    scenario: str
    answers: list[Answer] = field(default_factory=list)
    probe: list[Answer] = field(default_factory=list)
    unanswered: int = 0  # requests that got no HTTP answer at all (the connection just ended)
    ledger_rows: int = 0
    lost: int = 0
    duplicates: int = 0
    # Budget spend past the limit, in largest requests ("-": no budget in play).
    overshoot: str = "-"
    recover_s: float | None = None  # from the fault's end until everything is as it should be
    note: str = ""

    @property
    def every(self) -> list[Answer]:
        return self.answers + self.probe

    @property
    def sent(self) -> int:
        return len(self.every) + self.unanswered

    @property
    def successes(self) -> int:
        return sum(a.status == 200 for a in self.every)

    @property
    def clean_errors(self) -> int:
        return sum(a.status != 200 and a.clean for a in self.every)

    @property
    def unclean(self) -> list[Answer]:
        return [a for a in self.every if not a.clean]

    @property
    def p99_ms(self) -> float:
        times = sorted(a.seconds for a in self.probe)
        return times[min(len(times) - 1, int(len(times) * 0.99))] * 1000 if times else float("nan")

    def check_ledger(self, gateway: GatewayServer, *, before: set[str]) -> list[dict[str, Any]]:
        """Every request id a client was given must have exactly one ledger row; returns the new rows."""
        rows = [r for r in gateway.ledger_rows() if r["id"] not in before]
        self.count(rows)
        return rows

    def count(self, rows: list[dict[str, Any]]) -> None:
        """Rows, and against the request ids clients were given: lost and counted twice."""
        ids = [r["id"] for r in rows]
        answered = {a.request_id for a in self.every if a.request_id}
        self.ledger_rows = len(rows)
        self.lost = len(answered - set(ids))
        self.duplicates = len(ids) - len(set(ids))

    def report(self) -> None:
        RESULTS.append(self)
        print("\n" + HEADER + "\n" + self.line())

    def line(self) -> str:
        return (
            f"{self.scenario:<40} {self.sent:>6} {self.successes:>6} {self.clean_errors:>6} "
            f"{self.ledger_rows:>7} {self.lost:>5} {self.duplicates:>5} {self.overshoot:>9} "
            f"{self.recover:>9} {self.p99_ms:>9.1f}  {self.note}"
        )

    @property
    def recover(self) -> str:
        return "-" if self.recover_s is None else f"{self.recover_s:.1f}"


HEADER = (
    f"{'scenario':<40} {'sent':>6} {'ok':>6} {'clean':>6} {'ledger':>7} {'lost':>5} {'dups':>5} "
    f"{'overshoot':>9} {'recover s':>9} {'p99 ms':>9}  notes"
)


class WellBehaved:
    """A polite client in its own thread: one small chat completion at a time, timing each, for as
    long as the fault runs. Its p99 is the figure that says whether others were starved."""

    def __init__(
        self, base_url: str, *, model: str = "gpt-4o-mini", pause: float = 0.01, key: str | None = None
    ) -> None:
        self._base_url = base_url
        self._headers = {"authorization": f"Bearer {key}"} if key else {}
        self._model = model
        self._pause = pause
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.answers: list[Answer] = []
        self.failures: list[str] = []

    def _run(self) -> None:
        body = {"model": self._model, "messages": HELLO, "max_tokens": 16}
        with httpx.Client(base_url=self._base_url, timeout=30, headers=self._headers) as http:
            while not self._stop.is_set():
                started = time.perf_counter()
                try:
                    response = http.post("/v1/chat/completions", json=body)
                except httpx.HTTPError as exc:
                    self.failures.append(f"{type(exc).__name__}: {exc}")
                    self._stop.wait(self._pause)  # polite: no tight loop against a closed port
                    continue
                self.answers.append(answer_of(response, time.perf_counter() - started))
                self._stop.wait(self._pause)

    def __enter__(self) -> WellBehaved:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=60)


@dataclass(frozen=True, slots=True)
class RawResponse:
    status: int
    headers: dict[str, str]
    body: bytes

    def answer(self) -> Answer:
        clean = self.status == 200 or is_openai_error(self.body)
        return Answer(self.status, self.headers.get("x-request-id"), clean)


def parse_response(raw: bytes) -> RawResponse | None:
    """The first HTTP/1.1 response in `raw`, or None if there is none (the connection just ended)."""
    head, sep, rest = raw.partition(b"\r\n\r\n")
    match = re.match(rb"HTTP/1\.1 (\d{3})", head)
    if not sep or match is None:
        return None
    headers: dict[str, str] = {}
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        headers[name.strip().lower().decode("latin-1")] = value.strip().decode("latin-1")
    length = int(headers.get("content-length", len(rest)))
    return RawResponse(int(match.group(1)), headers, rest[:length])


async def read_response(reader: asyncio.StreamReader, *, within: float) -> RawResponse | None:
    """Read until the server closes (or `within` seconds pass), then parse what came."""
    data = b""
    try:
        async with asyncio.timeout(within):
            while chunk := await reader.read(65536):
                data += chunk
                parsed = parse_response(data)
                if parsed is not None and len(parsed.body) >= int(parsed.headers.get("content-length", -1)):
                    return parsed
    except (TimeoutError, ConnectionError):
        pass
    return parse_response(data)


async def trickle(port: int, pieces: Sequence[bytes], *, pause: float, within: float) -> RawResponse | None:
    """Send `pieces` with `pause` between them until the server answers, then read its answer."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        answer: asyncio.Task[RawResponse | None] = asyncio.ensure_future(read_response(reader, within=within))
        for piece in pieces:
            if answer.done():
                break
            try:
                writer.write(piece)
                await writer.drain()
            except ConnectionError:
                break
            await asyncio.wait([answer], timeout=pause)
        return await answer
    finally:
        writer.close()
        await asyncio.gather(writer.wait_closed(), return_exceptions=True)


async def in_waves(seconds: float, wave: Callable[[], Awaitable[list[T]]]) -> list[T]:
    """Run `wave` again and again until `seconds` have passed, so a fast fault still lasts long
    enough for the polite client's p99 to mean something."""
    deadline = time.monotonic() + seconds
    got: list[T] = []
    while not got or time.monotonic() < deadline:
        got += await wave()
    return got


def chat_head(*, length: int | None = None, chunked: bool = False, extra: bytes = b"") -> bytes:
    framing = b"transfer-encoding: chunked\r\n" if chunked else b"content-length: %d\r\n" % (length or 0)
    return (
        b"POST /v1/chat/completions HTTP/1.1\r\nhost: tollgate\r\ncontent-type: application/json\r\n"
        + framing
        + extra
        + b"\r\n"
    )


def one_by_one(data: bytes) -> Iterator[bytes]:
    for i in range(len(data)):
        yield data[i : i + 1]


def chat_body(text: str = "hello") -> bytes:
    return orjson.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": text}]})


def rss_mb() -> float:
    """This process's resident memory (the gateway runs in it), in MB."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def wait_until(done: Callable[[], bool], *, within: float) -> bool:
    """Poll `done` until it holds (True) or `within` seconds pass (False)."""
    deadline = time.monotonic() + within
    while not done():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def answers_200(url: str) -> bool:
    """Whether a GET of `url` answers 200 now (a server coming up, a readiness probe)."""
    try:
        return httpx.get(url, timeout=1).status_code == 200
    except httpx.TransportError:
        return False
