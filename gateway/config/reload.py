"""Policy as config: the YAML file is reloaded on SIGHUP and when it changes on disk. A file that
does not validate is refused with its field and reason in the log, and the old policy keeps serving;
a good one takes effect for new requests while in-flight ones finish on the old."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import signal
from pathlib import Path
from typing import Protocol

from gateway.config.loader import ConfigError, load_config
from gateway.config.schema import Config

log = logging.getLogger("tollgate.config")


class Reloadable(Protocol):
    def apply(self, config: Config) -> list[str]:
        """Take the new policy; return the settings that need a restart to take effect."""
        ...


class ConfigWatcher:
    def __init__(self, path: Path, runtime: Reloadable, *, interval: float = 2.0) -> None:
        self._path = path
        self._runtime = runtime
        self._interval = interval
        self._digest = _digest(path)
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self.last_error: str | None = None
        self.reloads = 0

    def start(self) -> None:
        self._task = asyncio.create_task(self._watch(), name="tollgate-config-watcher")
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            # Only possible on the main thread with a Unix loop; tests run servers elsewhere.
            asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, self._wake.set)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP)

    def reload(self) -> bool:
        """Load the file now; True when the new policy is in force."""
        try:
            config = load_config(self._path)
        except ConfigError as exc:
            self.last_error = str(exc)
            log.error("config reload refused, the previous policy keeps serving: %s", exc)
            return False
        needs_restart = self._runtime.apply(config)
        self.last_error = None
        self.reloads += 1
        log.info(
            "config reloaded from %s (%d models, %d teams)", self._path, len(config.models), len(config.teams)
        )
        if needs_restart:
            log.warning(
                "config sections %s changed: they take effect after a restart", ", ".join(needs_restart)
            )
        return True

    async def _watch(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self._interval)
            forced = self._wake.is_set()
            self._wake.clear()
            digest = _digest(self._path)
            if digest is None:
                if self.last_error is None or forced:
                    self.last_error = f"{self._path}: the config file is gone"
                    log.error("%s; the previous policy keeps serving", self.last_error)
                continue
            if forced or digest != self._digest:
                self._digest = digest
                self.reload()


def _digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None
