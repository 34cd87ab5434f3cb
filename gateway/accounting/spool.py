"""The ledger's local spool, which is also its journal: every row is appended here (one JSON line, a
plain `write`) on the request path, before the answer's last byte leaves, and the writer takes it to
the database from there. A process killed at any moment (kill -9, the OOM killer) leaves its rows in
the kernel's page cache, so the next start replays them; `fsync` (per `ledger.durability: power`)
adds power loss. Replays are idempotent: every row carries its request id (the primary key), so a
row written before the crash is skipped, never counted twice.

Files in the directory (one writer owns it):
- `ledger.spool.<ns>.journal`: the segment taking appends, flock'ed by its writer while it lives. A
  segment whose rows all reached the database is deleted when it is sealed (at `SEGMENT_BYTES`, or
  at a clean stop); one left by a dead process (no lock held) becomes a replay file at start.
- `ledger.spool.<ns>.replay`: a sealed segment some of whose rows did not reach the database (it was
  away, or refused the batch), waiting for the replay.
- `ledger.spool`: appends of older versions (and `append`), sealed into a replay file on replay.
- `*.rejected`: rows the database refused one by one, kept for a person.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

log = logging.getLogger("tollgate.ledger")

_ACTIVE = "ledger.spool"
_JOURNAL = ".journal"
_REPLAY = ".replay"
_DATETIME_FIELDS = ("created_at", "finished_at")
# A segment is sealed (and, once its rows are in the database, deleted) at this size: what a crash
# leaves to replay, most of it skipped as already written.
SEGMENT_BYTES = 1 << 20


class Segment:
    """One journal file and the count of its rows the writer has not yet settled."""

    __slots__ = ("_lock", "dirty", "fd", "outstanding", "path", "sealed", "size", "synced", "written")

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd: int | None = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # ours while we live; released at death
        self.size = 0
        self.written = 0  # rows appended
        self.synced = 0  # rows known to be on disk (power mode)
        self.outstanding = 0  # rows appended and not yet in the database nor given up to the replay
        self.dirty = False  # some row did not reach the database: replay the file
        self.sealed = False
        self._lock = threading.Lock()  # an fsync in a thread and the close never meet

    def fsync(self) -> None:
        with self._lock:
            if self.fd is not None:
                os.fsync(self.fd)

    def close(self) -> None:
        with self._lock:
            fd, self.fd = self.fd, None
        if fd is not None:
            os.close(fd)


class Spool:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._active = directory / _ACTIVE
        # Appends (from a worker thread) and sealing must not interleave, or a row appended to a
        # file just sealed and read would be deleted with it.
        self._lock = threading.Lock()
        self._segment: Segment | None = None
        self._sealed: list[Segment] = []  # sealed, some rows still with the writer
        self._orphans_claimed = False

    # -- the journal: the request path's appends and the writer's acknowledgements ---------------

    def write(self, row: dict[str, Any]) -> Segment:
        """Append one row (a plain write: it survives the process, not the machine). Raises OSError
        if the disk refuses it; the caller keeps the row in memory then."""
        data = orjson.dumps(row) + b"\n"
        segment = self._segment
        if segment is None or segment.size >= SEGMENT_BYTES:
            segment = self._open_segment()
        assert segment.fd is not None
        os.write(segment.fd, data)  # O_APPEND: one write, one whole line
        segment.size += len(data)
        segment.written += 1
        segment.outstanding += 1
        return segment

    def settled(self, segment: Segment, rows: int, *, in_database: bool) -> None:
        """The writer is done with `rows` of `segment`: in the database, or left to the replay."""
        segment.outstanding -= rows
        if not in_database:
            segment.dirty = True
        if segment.sealed and segment.outstanding <= 0:
            self._finish(segment)

    def seal(self, *, only_dirty: bool = False) -> None:
        """Close the active segment to appends (the next row opens a new one)."""
        segment = self._segment
        if segment is None or (only_dirty and not segment.dirty):
            return
        self._segment = None
        segment.sealed = True
        if segment.outstanding <= 0:
            self._finish(segment)
        else:
            self._sealed.append(segment)

    def active(self) -> Segment | None:
        return self._segment

    def _open_segment(self) -> Segment:
        if self._segment is not None:
            self.seal()
        self.directory.mkdir(parents=True, exist_ok=True)
        self._claim_orphans()
        self._segment = Segment(self.directory / f"{_ACTIVE}.{time.time_ns()}{_JOURNAL}")
        return self._segment

    def _finish(self, segment: Segment) -> None:
        """A sealed segment the writer is done with: deleted if every row is in the database, else
        handed to the replay."""
        with contextlib.suppress(ValueError):
            self._sealed.remove(segment)
        try:
            if segment.dirty:
                segment.path.rename(segment.path.with_suffix(_REPLAY))
            else:
                segment.path.unlink(missing_ok=True)
        finally:
            segment.close()

    def claim_orphans(self) -> int:
        """Journal segments of a process that died (no lock held on them) become replay files;
        returns how many. Called at start and before a new segment opens."""
        self._orphans_claimed = False
        return self._claim_orphans()

    def _claim_orphans(self) -> int:
        if self._orphans_claimed or not self.directory.exists():
            return 0
        self._orphans_claimed = True
        claimed = 0
        for path in sorted(self.directory.glob(f"{_ACTIVE}.*{_JOURNAL}")):
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # a live writer's (ours, or another process misconfigured onto this dir)
            else:
                if path.stat().st_size > 0:
                    path.rename(path.with_suffix(_REPLAY))
                    claimed += 1
                else:
                    path.unlink(missing_ok=True)
            finally:
                os.close(fd)
        if claimed:
            log.warning("ledger: %d journal segments left by a stopped process; replaying them", claimed)
        return claimed

    # -- replay ---------------------------------------------------------------------------------

    def append(self, rows: list[dict[str, Any]]) -> None:
        """Straight to a replay file, fsynced (blocking; call it off the event loop)."""
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
        self.seal(only_dirty=True)
        with self._lock:
            if self._active.exists() and self._active.stat().st_size > 0:
                self._active.rename(self.directory / f"{_ACTIVE}.{time.time_ns()}{_REPLAY}")
        if not self.directory.exists():
            return []
        return sorted(self.directory.glob(f"{_ACTIVE}.*{_REPLAY}"))

    def has_rows(self) -> bool:
        """Rows not yet in the database that the replay (not the writer's queue) must bring there."""
        segment = self._segment
        if (segment is not None and segment.dirty) or any(s.dirty for s in self._sealed):
            return True
        if self._active.exists() and self._active.stat().st_size > 0:
            return True
        return self.directory.exists() and any(self.directory.glob(f"{_ACTIVE}.*{_REPLAY}"))

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

    def close(self) -> None:
        """A clean stop: the active segment sealed (deleted, or left to replay at the next start)."""
        self.seal()
        for segment in list(self._sealed):
            segment.close()  # rows still with the writer: the file stays, replayed at next start
        self._sealed.clear()
