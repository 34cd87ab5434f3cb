"""The ledger's local spool: when the database cannot take rows, they are appended here (one JSON
line each, fsynced) and replayed when it comes back. Replays are idempotent because every row
carries its request id, so a crash mid-replay never double-counts.

Files: `<dir>/ledger.spool` takes appends; a replay first renames it to `ledger.spool.<ns>.replay`
so new rows keep flowing while old ones are written to the database.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

_ACTIVE = "ledger.spool"
_DATETIME_FIELDS = ("created_at", "finished_at")


class Spool:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._active = directory / _ACTIVE
        # Appends (from a worker thread) and sealing must not interleave, or a row appended to a
        # file just sealed and read would be deleted with it.
        self._lock = threading.Lock()

    def append(self, rows: list[dict[str, Any]]) -> None:
        """Durable when it returns: written and fsynced (blocking; call it off the event loop)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        data = b"".join(orjson.dumps(row) + b"\n" for row in rows)
        with self._lock:
            fd = os.open(self._active, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            try:
                os.write(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)

    def pending(self) -> list[Path]:
        """Files waiting to be replayed, oldest first; the active file is sealed for replay first."""
        with self._lock:
            if self._active.exists() and self._active.stat().st_size > 0:
                self._active.rename(self.directory / f"{_ACTIVE}.{time.time_ns()}.replay")
        if not self.directory.exists():
            return []
        return sorted(self.directory.glob(f"{_ACTIVE}.*.replay"))

    def has_rows(self) -> bool:
        if self._active.exists() and self._active.stat().st_size > 0:
            return True
        return self.directory.exists() and any(self.directory.glob(f"{_ACTIVE}.*.replay"))

    @staticmethod
    def read(path: Path) -> Iterator[dict[str, Any]]:
        """Rows of one sealed file; a torn last line (a crash mid-write) is skipped."""
        with path.open("rb") as handle:
            for line in handle:
                if not line.endswith(b"\n"):
                    break
                row = orjson.loads(line)
                for name in _DATETIME_FIELDS:
                    if row.get(name) is not None:
                        row[name] = datetime.fromisoformat(row[name])
                yield row

    @staticmethod
    def done(path: Path) -> None:
        path.unlink(missing_ok=True)

    @staticmethod
    def set_aside(path: Path) -> None:
        """A file the database refused: renamed `.rejected`, so it is never replayed again nor lost."""
        path.rename(path.with_suffix(".rejected"))

    def reject(self, rows: list[dict[str, Any]]) -> None:
        """Rows the database refused on first write, kept for a person to look at."""
        self.directory.mkdir(parents=True, exist_ok=True)
        with (self.directory / f"{_ACTIVE}.{time.time_ns()}.rejected").open("wb") as handle:
            handle.write(b"".join(orjson.dumps(row) + b"\n" for row in rows))
            handle.flush()
            os.fsync(handle.fileno())
