"""A gateway with an admin key, two teams (one keeping prompt bodies), distinctive provider keys read
from `${ENV}` references, and every log line, response and trace it produces kept for inspection."""

from __future__ import annotations

import gzip
import logging
import secrets
import socket
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from gateway.accounting.database import run_migrations
from gateway.config.loader import parse_config
from gateway.config.schema import Config
from providers.litellm_adapter import load_litellm
from sandbox.server import SandboxServer
from tests.harness import GatewayServer

# Provider keys a grep cannot mistake for anything else; the random tail differs on every run.
RUN = secrets.token_hex(6)
CANARIES = {
    "TG_SEC_OPENAI_KEY": f"sk-canary-openai-{RUN}-0penAIsecretXYZ",
    "TG_SEC_ANTHROPIC_KEY": f"sk-ant-canary-{RUN}-anthropicSECRET",
    "TG_SEC_GEMINI_KEY": f"AIzaCanary{RUN}geminiSECRETkey",
    "TG_SEC_LITELLM_KEY": f"sk-canary-litellm-{RUN}-longTAILsecret",
    "TG_SEC_ADMIN_KEY": f"admin-canary-{RUN}-all-powerful-SECRET",
}
ADMIN_KEY = CANARIES["TG_SEC_ADMIN_KEY"]
PRICE = {"input_per_mtok": "3", "output_per_mtok": "15"}
TEAMS = ("alpha", "beta")  # beta opts in to keeping prompt bodies


def config_yaml(upstreams: Mapping[str, SandboxServer], *, database_url: str, spool_dir: str) -> str:
    """The config as an operator writes it: every secret is a `${NAME}` reference, never a literal."""
    return f"""
server: {{max_body_bytes: 262144}}
database: {{url: "{database_url}", auto_migrate: false}}
ledger: {{flush_interval_ms: 5, spool_dir: "{spool_dir}", probe_interval_seconds: 3600}}
resilience:
  retry: {{max_attempts: 2, backoff_base_seconds: 0.01, backoff_cap_seconds: 0.02}}
auth: {{admin_key: "${{TG_SEC_ADMIN_KEY}}", key_cache_seconds: 0.1}}
teams:
  alpha: {{}}
  beta: {{store_bodies: true}}
providers:
  openai: {{type: openai, base_url: "{upstreams["openai"].base_url}/v1", api_key: "${{TG_SEC_OPENAI_KEY}}"}}
  anthropic: {{type: anthropic, base_url: "{upstreams["anthropic"].base_url}", api_key: "${{TG_SEC_ANTHROPIC_KEY}}"}}
  gemini: {{type: gemini, base_url: "{upstreams["gemini"].base_url}", api_key: "${{TG_SEC_GEMINI_KEY}}"}}
  longtail:
    type: litellm
    model_prefix: openai
    base_url: "{upstreams["openai"].base_url}/v1"
    api_key: "${{TG_SEC_LITELLM_KEY}}"
    timeout_seconds: 5
    extra: {{max_retries: 0}}
models:
  gpt-4o-mini: {{provider: openai, price: {PRICE}}}
  claude: {{provider: anthropic, upstream_model: claude-sonnet-4-6, price: {PRICE}}}
  gemini: {{provider: gemini, upstream_model: gemini-2.5-flash, price: {PRICE}}}
  tail: {{provider: longtail, upstream_model: gpt-4o-mini, price: {PRICE}}}
  text-embedding-3-small: {{provider: openai, price: {{input_per_mtok: "0.02", output_per_mtok: "0"}}}}
  tail-embedding: {{provider: longtail, upstream_model: text-embedding-3-small, price: {{input_per_mtok: "0.02", output_per_mtok: "0"}}}}
"""


def security_config(upstreams: Mapping[str, SandboxServer], database_url: str, **extra: Any) -> Config:
    text = config_yaml(upstreams, database_url=database_url, spool_dir=tempfile.mkdtemp(prefix="tg-spool-"))
    config = parse_config(text, source="security-test", environ=CANARIES)
    return config.model_copy(update=extra) if extra else config


class LogCapture(logging.Handler):
    """Every record any logger emits, formatted the way an operator's log file would show it
    (tracebacks included). The test's own thread is left out: its HTTP client logs the URLs it
    calls, keys in query strings included, and that is the test talking, not the gateway."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.lines: list[str] = []
        self._test_thread = threading.get_ident()
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread != self._test_thread:
            self.lines.append(self.format(record))

    def text(self) -> str:
        return "\n".join(self.lines)


FOREIGN_FILTERED = ("uvicorn.access", "uvicorn.error", "httpx", "asyncio", "backoff")


class LoggedGateway(GatewayServer):
    """The real gateway with uvicorn's access log on and every logger at DEBUG, all captured."""

    def __init__(self, config: Config, *, environ: Mapping[str, str] | None = None) -> None:
        super().__init__(config, environ=environ)
        self._server = uvicorn.Server(
            uvicorn.Config(
                self.app,
                host="127.0.0.1",
                port=self.port,
                log_level="debug",
                access_log=True,
                lifespan="on",
                loop="asyncio",
            )
        )
        self.logs = LogCapture()
        self._loggers = [logging.getLogger(n) for n in ("", "uvicorn", "uvicorn.access", "uvicorn.error")]
        self._levels = [logger.level for logger in self._loggers]
        self._foreign: dict[str, list[logging.Filter | Any]] = {}

    def __enter__(self) -> LoggedGateway:
        # Importing litellm puts redaction filters of its own on uvicorn's and httpx's loggers, for
        # the whole process. Import it now and set them aside, so what is tested is the gateway.
        load_litellm()
        self._foreign = {}
        for name in FOREIGN_FILTERED:
            logger = logging.getLogger(name)
            self._foreign[name] = [f for f in logger.filters if not type(f).__module__.startswith("gateway.")]
            for f in self._foreign[name]:
                logger.removeFilter(f)
        for logger in self._loggers:
            logger.addHandler(self.logs)
        logging.getLogger().setLevel(logging.DEBUG)
        super().__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            super().__exit__(*exc)
        finally:
            for logger, level in zip(self._loggers, self._levels, strict=True):
                logger.removeHandler(self.logs)
                logger.setLevel(level)
            for name, filters in self._foreign.items():
                for f in filters:
                    logging.getLogger(name).addFilter(f)


class OtlpCollector:
    """A local OTLP/HTTP endpoint keeping the raw bytes of every export (strings in protobuf are
    plain UTF-8, so a grep over them finds any secret a span carries)."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        bodies = self.bodies

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                if self.headers.get("content-encoding") == "gzip":
                    body = gzip.decompress(body)
                bodies.append(body)
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> OtlpCollector:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


@dataclass
class Tripwire:
    """A TCP listener that records every connection made to it: the SSRF target. Nothing legitimate
    ever connects, so any connection at all means the gateway was steered somewhere."""

    connections: list[bytes] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self._sock.settimeout(0.2)
        self.port = self._sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                conn.settimeout(1.0)
                try:
                    self.connections.append(conn.recv(65536))
                except OSError:
                    self.connections.append(b"")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self._sock.close()


@pytest.fixture(scope="package")
def upstreams() -> Iterator[dict[str, SandboxServer]]:
    with (
        SandboxServer(dialect="openai", profile="instant") as openai_sb,
        SandboxServer(dialect="anthropic", profile="instant") as anthropic_sb,
        SandboxServer(dialect="gemini", profile="instant") as gemini_sb,
    ):
        yield {"openai": openai_sb, "anthropic": anthropic_sb, "gemini": gemini_sb}


@pytest.fixture(autouse=True)
def _reset_upstreams(request: pytest.FixtureRequest) -> None:
    if "upstreams" in request.fixturenames:
        for server in request.getfixturevalue("upstreams").values():
            httpx.post(server.base_url + "/_sandbox/reset").raise_for_status()


@pytest.fixture(scope="module")
def fresh_sqlite_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite+aiosqlite:///{tmp_path_factory.mktemp('security') / 'tollgate.db'}"
    run_migrations(url)
    return url


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


ADMIN = bearer(ADMIN_KEY)


def create_key(base_url: str, team: str, name: str = "test") -> dict[str, Any]:
    """A virtual key through the admin API, as an operator mints one: its record with `key`."""
    response = httpx.post(f"{base_url}/admin/keys", headers=ADMIN, json={"team": team, "name": name})
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


def wait_for_revocation(base_url: str, key: str) -> None:
    """Revocations reach a replica within the key cache's TTL (0.1 s here)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        status = httpx.get(f"{base_url}/v1/spend", headers=bearer(key)).status_code
        if status == 401:
            return
        time.sleep(0.05)
    raise AssertionError("a revoked key still works")


def sandbox_requests(server: SandboxServer) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = httpx.get(server.base_url + "/_sandbox/requests").json()
    return entries


def fault(server: SandboxServer, *rules: dict[str, Any]) -> None:
    httpx.post(server.base_url + "/_sandbox/faults", json=list(rules)).raise_for_status()


def every_value(gateway: GatewayServer) -> list[str]:
    """Every non-null value of every row of every table in the gateway's database, as text."""
    from sqlalchemy import MetaData, Table, inspect, select
    from sqlalchemy.engine import Connection

    def dump(conn: Connection) -> list[str]:
        values: list[str] = []
        for name in inspect(conn).get_table_names():
            table = Table(name, MetaData(), autoload_with=conn)
            for row in conn.execute(select(table)):
                values.extend(str(v) for v in row if v is not None)
        return values

    async def read() -> list[str]:
        await gateway.runtime.ledger.flush()
        async with gateway.runtime.engine.connect() as conn:
            return await conn.run_sync(dump)

    return gateway.call(read())


def read_tree(directory: Path) -> str:
    return "\n".join(p.read_bytes().decode("utf-8", "replace") for p in directory.rglob("*") if p.is_file())
