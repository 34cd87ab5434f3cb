"""The life of one emulated batch, shared by the OpenAI and Anthropic batch APIs: it waits out a
validation delay, runs its items (through the sandbox's own endpoint, a few at a time), and ends
completed, cancelled (what finished before the cancel is kept) or expired (its window ran out).
The delay and the window are settings, so tests watch the states go by in milliseconds."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

__all__ = ["BatchJob", "BatchJobs", "RunItem"]

# (custom_id, request body) -> (status, response body)
RunItem = Callable[[bytes], Awaitable[tuple[int, bytes]]]


@dataclass
class BatchJob:
    id: str
    requests: list[tuple[str, bytes]]
    created_at: float
    expires_at: float
    state: str = "validating"  # in_progress, finalizing, completed, cancelling, cancelled, expired
    results: dict[str, tuple[int, bytes]] = field(default_factory=dict)
    in_progress_at: float | None = None
    finalizing_at: float | None = None
    ended_at: float | None = None
    cancelling_at: float | None = None
    extra: dict[str, object] = field(default_factory=dict)  # the dialect's own fields
    _cancel: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None

    @property
    def ended(self) -> bool:
        return self.state in ("completed", "cancelled", "expired", "failed")

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()


class BatchJobs:
    """Every batch this sandbox holds, newest last."""

    def __init__(self, *, prefix: str, delay: float, window: float, concurrency: int = 32) -> None:
        self.prefix = prefix
        self.delay = delay
        self.window = window
        self.concurrency = concurrency
        self.jobs: dict[str, BatchJob] = {}

    def submit(self, requests: list[tuple[str, bytes]], run: RunItem, **extra: object) -> BatchJob:
        now = time.time()
        job = BatchJob(
            self.prefix + os.urandom(12).hex(), requests, now, now + self.window, extra=dict(extra)
        )
        self.jobs[job.id] = job
        job.task = asyncio.ensure_future(self._run(job, run))
        return job

    def failed(self, **extra: object) -> BatchJob:
        """A batch refused at validation (its input file had bad lines): it never runs."""
        now = time.time()
        job = BatchJob(self.prefix + os.urandom(12).hex(), [], now, now + self.window, extra=dict(extra))
        job.state, job.ended_at = "failed", now
        self.jobs[job.id] = job
        return job

    def cancel(self, job: BatchJob) -> None:
        if not job.ended and not job.cancelled:
            job.state = "cancelling"
            job.cancelling_at = time.time()
            job._cancel.set()

    def reset(self) -> None:
        for job in self.jobs.values():
            if job.task is not None:
                job.task.cancel()
        self.jobs.clear()

    async def _run(self, job: BatchJob, run: RunItem) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.delay):
                await job._cancel.wait()
        if not job.cancelled:
            job.state, job.in_progress_at = "in_progress", time.time()
            try:
                async with asyncio.timeout(max(job.expires_at - time.time(), 0.0)):
                    await self._items(job, run)
            except TimeoutError:
                pass
        expired = not job.cancelled and len(job.results) < len(job.requests)
        job.finalizing_at = time.time()
        if not job.cancelled:
            job.state = "finalizing"
        job.ended_at = time.time()
        job.state = "cancelled" if job.cancelled else "expired" if expired else "completed"

    async def _items(self, job: BatchJob, run: RunItem) -> None:
        queue = list(reversed(job.requests))

        async def worker() -> None:
            while queue and not job.cancelled:
                custom_id, body = queue.pop()
                job.results[custom_id] = await run(body)

        await asyncio.gather(*(worker() for _ in range(self.concurrency)))
