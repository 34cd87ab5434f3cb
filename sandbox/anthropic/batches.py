"""Anthropic's Message Batches API as the sandbox speaks it: `/v1/messages/batches` (create,
retrieve, list, cancel) and `/v1/messages/batches/{id}/results` (JSONL, once the batch has ended).
Items run through the sandbox's own `/v1/messages`
(https://docs.anthropic.com/en/api/creating-message-batches)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import orjson

from sandbox.anthropic.errors import error_type
from sandbox.config import SandboxConfig
from sandbox.core.asgi import Exchange
from sandbox.core.batch_jobs import BatchJob, BatchJobs
from sandbox.core.dialect import Handler
from sandbox.core.errors import ApiError
from sandbox.core.loopback import AsgiApp, call

__all__ = ["AnthropicBatches"]

_PREFIX = "/v1/messages/batches"
_FORWARDED = ("x-api-key", "authorization", "anthropic-version", "x-sandbox-fault")
_MAX_REQUESTS = 100_000


class AnthropicBatches:
    def __init__(self, config: SandboxConfig, app: AsgiApp) -> None:
        self.app = app
        self.jobs = BatchJobs(
            prefix="msgbatch_01", delay=config.batch_delay_seconds, window=config.batch_window_seconds
        )

    def reset(self) -> None:
        self.jobs.reset()

    def routes(self) -> dict[tuple[str, str], Handler]:
        return {("POST", _PREFIX): self.create, ("GET", _PREFIX): self.list}

    def resolve(self, method: str, path: str) -> Handler | None:
        if not path.startswith(_PREFIX + "/"):
            return None
        parts = path[len(_PREFIX) + 1 :].split("/")
        if len(parts) == 1 and method == "GET":
            return lambda ex: self.retrieve(ex, parts[0])
        if len(parts) == 2 and parts[1] == "cancel" and method == "POST":
            return lambda ex: self.cancel(ex, parts[0])
        if len(parts) == 2 and parts[1] == "results" and method == "GET":
            return lambda ex: self.results(ex, parts[0])
        return None

    async def create(self, ex: Exchange) -> None:
        payload = ex.payload if isinstance(ex.payload, dict) else {}
        entries = payload.get("requests")
        if not isinstance(entries, list) or not entries:
            raise ApiError(400, "requests: Field required", type="invalid_request_error")
        if len(entries) > _MAX_REQUESTS:
            raise ApiError(400, f"requests: at most {_MAX_REQUESTS} requests", type="invalid_request_error")
        requests: list[tuple[str, bytes]] = []
        seen: set[str] = set()
        for index, entry in enumerate(entries):
            if not isinstance(entry, dict) or not isinstance(entry.get("custom_id"), str):
                raise ApiError(
                    400, f"requests.{index}.custom_id: Field required", type="invalid_request_error"
                )
            if not isinstance(entry.get("params"), dict):
                raise ApiError(400, f"requests.{index}.params: Field required", type="invalid_request_error")
            if entry["custom_id"] in seen:
                raise ApiError(
                    400, f"Duplicate custom_id: {entry['custom_id']}", type="invalid_request_error"
                )
            seen.add(entry["custom_id"])
            requests.append((entry["custom_id"], orjson.dumps(entry["params"])))
        headers = [(k, v) for k, v in ex.headers().items() if k in _FORWARDED]
        headers.append(("content-type", "application/json"))

        async def run(body: bytes) -> tuple[int, bytes]:
            return await call(self.app, "POST", "/v1/messages", body, headers)

        job = self.jobs.submit(requests, run)
        await _json(ex, self._render(job, ex))

    async def retrieve(self, ex: Exchange, batch_id: str) -> None:
        await _json(ex, self._render(self._job(batch_id), ex))

    async def cancel(self, ex: Exchange, batch_id: str) -> None:
        job = self._job(batch_id)
        self.jobs.cancel(job)
        await _json(ex, self._render(job, ex))

    async def list(self, ex: Exchange) -> None:
        jobs = sorted(self.jobs.jobs.values(), key=lambda j: j.created_at, reverse=True)
        ids = [j.id for j in jobs]
        after, before = ex.query("after_id"), ex.query("before_id")
        if after is not None:
            jobs = jobs[ids.index(after) + 1 :] if after in ids else []
        elif before is not None:
            jobs = jobs[: ids.index(before)] if before in ids else []
        limit = max(1, min(int(ex.query("limit") or 20), 1000))
        page = jobs[:limit]
        await _json(
            ex,
            {
                "data": [self._render(j, ex) for j in page],
                "has_more": len(jobs) > limit,
                "first_id": page[0].id if page else None,
                "last_id": page[-1].id if page else None,
            },
        )

    async def results(self, ex: Exchange, batch_id: str) -> None:
        job = self._job(batch_id)
        if not job.ended:
            raise ApiError(
                404, f"Batch {batch_id} has not ended: results are not ready.", type="not_found_error"
            )
        lines = [
            orjson.dumps({"custom_id": cid, "result": self._result(job, cid)}) for cid, _ in job.requests
        ]
        await ex.respond(200, b"\n".join(lines) + b"\n", content_type=b"application/binary")

    def _result(self, job: BatchJob, custom_id: str) -> dict[str, Any]:
        result = job.results.get(custom_id)
        if result is None:
            return {"type": "canceled" if job.state == "cancelled" else "expired"}
        status, body = result
        if status == 200:
            return {"type": "succeeded", "message": orjson.loads(body)}
        try:
            error = orjson.loads(body)
        except orjson.JSONDecodeError:
            error = {"type": "error", "error": {"type": error_type(status), "message": body.decode()}}
        return {"type": "errored", "error": error}

    def _job(self, batch_id: str) -> BatchJob:
        job = self.jobs.jobs.get(batch_id)
        if job is None:
            raise ApiError(404, f"Batch {batch_id} not found.", type="not_found_error")
        return job

    def _render(self, job: BatchJob, ex: Exchange) -> dict[str, Any]:
        # The SDK follows `results_url`: it names this sandbox, as the real one names api.anthropic.com.
        origin = "http://" + (ex.header(b"host") or "127.0.0.1")
        succeeded = sum(1 for status, _ in job.results.values() if status == 200)
        errored = len(job.results) - succeeded
        missing = len(job.requests) - len(job.results)
        ended = job.ended
        return {
            "id": job.id,
            "type": "message_batch",
            "processing_status": "ended" if ended else "canceling" if job.cancelled else "in_progress",
            "request_counts": {
                "processing": 0 if ended else missing,
                "succeeded": succeeded,
                "errored": errored,
                "canceled": missing if ended and job.state == "cancelled" else 0,
                "expired": missing if ended and job.state == "expired" else 0,
            },
            "ended_at": _iso(job.ended_at),
            "created_at": _iso(job.created_at),
            "expires_at": _iso(job.expires_at),
            "archived_at": None,
            "cancel_initiated_at": _iso(job.cancelling_at),
            "results_url": f"{origin}{_PREFIX}/{job.id}/results" if ended else None,
        }


def _iso(value: float | None) -> str | None:
    if value is None:
        return None
    return datetime.fromtimestamp(value, UTC).isoformat().replace("+00:00", "Z")


async def _json(ex: Exchange, body: dict[str, Any]) -> None:
    await ex.respond(200, orjson.dumps(body))
