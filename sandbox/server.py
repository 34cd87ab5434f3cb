"""Run a sandbox with uvicorn on a free local port in a background thread (tests, benchmarks)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Sequence
from types import TracebackType

import uvicorn

from sandbox.app import SandboxApp, create_app
from sandbox.config import Dialect, SandboxConfig
from sandbox.core.latency import ProfileName

__all__ = ["SandboxServer", "bind_socket", "uvicorn_config"]


def bind_socket(host: str, port: int) -> socket.socket:
    """A bound (not yet listening) TCP socket; port 0 picks a free port."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    return sock


def uvicorn_config(app: SandboxApp, *, log_level: str = "warning") -> uvicorn.Config:
    """uvicorn settings shared by the CLI and SandboxServer: uvloop, httptools, no access log."""
    return uvicorn.Config(
        app,
        loop="uvloop",
        http="httptools",
        lifespan="on",
        access_log=False,
        log_level=log_level,
        timeout_graceful_shutdown=2,
    )


class SandboxServer:
    """A sandbox on ``127.0.0.1:<free port>``; use as ``with`` or ``async with``.

    ``with SandboxServer(dialect="anthropic", profile="instant") as sb:`` then talk
    to ``sb.base_url`` and inspect ``sb.app`` (its engine, stats, faults and log).
    """

    def __init__(
        self,
        config: SandboxConfig | None = None,
        *,
        dialect: Dialect = "openai",
        profile: ProfileName | None = None,
        seed: int = 0,
        models: Sequence[str] = (),
        fault_rate: float = 0.0,
        cache_min_tokens: int | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.config = config or SandboxConfig(
            dialect=dialect,
            profile=profile,
            seed=seed,
            models=tuple(models),
            fault_rate=fault_rate,
            cache_min_tokens=cache_min_tokens,
        )
        self.app = create_app(self.config)
        self.host = host
        self.port = port
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """``http://host:port`` of the running server (no trailing slash, no ``/v1``)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def start(self, timeout: float = 10.0) -> SandboxServer:
        """Start serving and return once the server accepts connections."""
        if self._thread is not None:
            raise RuntimeError("SandboxServer is already running")
        sock = bind_socket(self.host, self.port)
        self.port = sock.getsockname()[1]
        server = uvicorn.Server(uvicorn_config(self.app))
        thread = threading.Thread(
            target=server.run, kwargs={"sockets": [sock]}, name=f"sandbox:{self.port}", daemon=True
        )
        self._server, self._thread = server, thread
        thread.start()
        deadline = time.monotonic() + timeout
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                sock.close()
                raise RuntimeError(f"sandbox failed to start on {self.base_url}")
            time.sleep(0.005)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Ask uvicorn to exit and wait for its thread."""
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is not None:
            server.should_exit = True
        if thread is not None:
            thread.join(timeout)

    def __enter__(self) -> SandboxServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    async def __aenter__(self) -> SandboxServer:
        return await asyncio.to_thread(self.start)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await asyncio.to_thread(self.stop)
