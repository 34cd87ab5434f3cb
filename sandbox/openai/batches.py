"""OpenAI's Batch API as the sandbox speaks it: `POST /v1/files` (multipart, purpose `batch`),
`GET /v1/files/{id}` and `/content`, and `/v1/batches` (create, retrieve, list, cancel). Items
run through the sandbox's own `/v1/chat/completions`; the output and error files follow OpenAI's
batch output format (https://platform.openai.com/docs/api-reference/batch/request-output)."""

from __future__ import annotations

import os
import time
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any

import orjson

from sandbox.config import SandboxConfig
from sandbox.core.asgi import Exchange
from sandbox.core.batch_jobs import BatchJob, BatchJobs
from sandbox.core.dialect import Handler
from sandbox.core.errors import ApiError
from sandbox.core.loopback import AsgiApp, call

__all__ = ["OpenAIBatches"]

_ENDPOINTS = ("/v1/chat/completions",)
_FORWARDED = ("authorization", "x-sandbox-fault")


class OpenAIBatches:
    def __init__(self, config: SandboxConfig, app: AsgiApp) -> None:
        self.app = app
        self.jobs = BatchJobs(
            prefix="batch_", delay=config.batch_delay_seconds, window=config.batch_window_seconds
        )
        self.files: dict[str, dict[str, Any]] = {}
        self.contents: dict[str, bytes] = {}

    def reset(self) -> None:
        self.jobs.reset()
        self.files.clear()
        self.contents.clear()

    def routes(self) -> dict[tuple[str, str], Handler]:
        return {
            ("POST", "/v1/files"): self.upload,
            ("POST", "/v1/batches"): self.create,
            ("GET", "/v1/batches"): self.list,
        }

    def resolve(self, method: str, path: str) -> Handler | None:
        parts = path.strip("/").split("/")
        if len(parts) >= 3 and parts[:2] == ["v1", "files"] and method == "GET":
            if len(parts) == 3:
                return lambda ex: self.retrieve_file(ex, parts[2])
            if len(parts) == 4 and parts[3] == "content":
                return lambda ex: self.file_content(ex, parts[2])
        if len(parts) >= 3 and parts[:2] == ["v1", "batches"]:
            if len(parts) == 3 and method == "GET":
                return lambda ex: self.retrieve(ex, parts[2])
            if len(parts) == 4 and parts[3] == "cancel" and method == "POST":
                return lambda ex: self.cancel(ex, parts[2])
        return None

    # --- files ---

    def _store_file(self, content: bytes, *, filename: str, purpose: str) -> dict[str, Any]:
        file_id = "file-" + os.urandom(12).hex()
        file: dict[str, Any] = {
            "id": file_id,
            "object": "file",
            "bytes": len(content),
            "created_at": int(time.time()),
            "filename": filename,
            "purpose": purpose,
            "status": "processed",
            "expires_at": None,
            "status_details": None,
        }
        self.files[file_id] = file
        self.contents[file_id] = content
        return file

    async def upload(self, ex: Exchange) -> None:
        fields, content, filename = _multipart(ex)
        purpose = fields.get("purpose")
        if purpose != "batch":
            raise ApiError(
                400, f"Invalid value for purpose: {purpose!r}", param="purpose", code="invalid_value"
            )
        if content is None:
            raise ApiError(400, "Missing required parameter: 'file'.", param="file")
        await _json(ex, self._store_file(content, filename=filename or "upload.jsonl", purpose="batch"))

    async def retrieve_file(self, ex: Exchange, file_id: str) -> None:
        await _json(ex, self._file(file_id))

    async def file_content(self, ex: Exchange, file_id: str) -> None:
        self._file(file_id)
        await ex.respond(200, self.contents[file_id], content_type=b"application/octet-stream")

    def _file(self, file_id: str) -> dict[str, Any]:
        file = self.files.get(file_id)
        if file is None:
            raise ApiError(404, f"No such File object: {file_id}", param="id", type="invalid_request_error")
        return file

    # --- batches ---

    async def create(self, ex: Exchange) -> None:
        payload = ex.payload if isinstance(ex.payload, dict) else {}
        endpoint = payload.get("endpoint")
        if endpoint not in _ENDPOINTS:
            raise ApiError(400, f"Invalid endpoint: {endpoint!r}", param="endpoint", code="invalid_value")
        if payload.get("completion_window") != "24h":
            raise ApiError(400, "completion_window must be '24h'", param="completion_window")
        file_id = str(payload.get("input_file_id") or "")
        self._file(file_id)
        requests, errors = _read_input(self.contents[file_id], endpoint)
        headers = [(k, v) for k, v in ex.headers().items() if k in _FORWARDED]
        headers.append(("content-type", "application/json"))

        async def run(body: bytes) -> tuple[int, bytes]:
            return await call(self.app, "POST", endpoint, body, headers)

        facts = {"endpoint": endpoint, "input_file_id": file_id, "metadata": payload.get("metadata")}
        job = self.jobs.failed(errors=errors, **facts) if errors else self.jobs.submit(requests, run, **facts)
        await _json(ex, self._render(job))

    async def retrieve(self, ex: Exchange, batch_id: str) -> None:
        await _json(ex, self._render(self._job(batch_id)))

    async def cancel(self, ex: Exchange, batch_id: str) -> None:
        job = self._job(batch_id)
        if job.ended:
            raise ApiError(409, f"Cannot cancel a batch with status '{job.state}'.")
        self.jobs.cancel(job)
        await _json(ex, self._render(job))

    async def list(self, ex: Exchange) -> None:
        jobs = sorted(self.jobs.jobs.values(), key=lambda j: j.created_at, reverse=True)
        after = ex.query("after")
        if after is not None:
            ids = [j.id for j in jobs]
            jobs = jobs[ids.index(after) + 1 :] if after in ids else []
        limit = max(1, min(int(ex.query("limit") or 20), 100))
        page = jobs[:limit]
        await _json(
            ex,
            {
                "object": "list",
                "data": [self._render(j) for j in page],
                "first_id": page[0].id if page else None,
                "last_id": page[-1].id if page else None,
                "has_more": len(jobs) > limit,
            },
        )

    def _job(self, batch_id: str) -> BatchJob:
        job = self.jobs.jobs.get(batch_id)
        if job is None:
            raise ApiError(404, f"No batch found with id '{batch_id}'.", code="not_found")
        return job

    def _render(self, job: BatchJob) -> dict[str, Any]:
        if job.ended and "output_file_id" not in job.extra and job.state != "failed":
            self._write_results(job)
        counts = job.results.values()
        completed = sum(1 for status, _ in counts if status == 200)
        failed = sum(1 for status, _ in counts if status != 200)
        if job.state == "expired":
            failed += len(job.requests) - len(job.results)
        errors = job.extra.get("errors")
        return {
            "id": job.id,
            "object": "batch",
            "endpoint": job.extra["endpoint"],
            "errors": {"object": "list", "data": errors} if errors else None,
            "input_file_id": job.extra["input_file_id"],
            "completion_window": "24h",
            "status": job.state,
            "output_file_id": job.extra.get("output_file_id"),
            "error_file_id": job.extra.get("error_file_id"),
            "created_at": int(job.created_at),
            "in_progress_at": _int(job.in_progress_at),
            "expires_at": int(job.expires_at),
            "finalizing_at": _int(job.finalizing_at),
            "completed_at": _int(job.ended_at) if job.state == "completed" else None,
            "failed_at": _int(job.ended_at) if job.state == "failed" else None,
            "expired_at": _int(job.ended_at) if job.state == "expired" else None,
            "cancelling_at": _int(job.cancelling_at),
            "cancelled_at": _int(job.ended_at) if job.state == "cancelled" else None,
            "request_counts": {"total": len(job.requests), "completed": completed, "failed": failed},
            "metadata": job.extra.get("metadata"),
        }

    def _write_results(self, job: BatchJob) -> None:
        """The output file (2xx answers) and the error file (the rest, and what never ran)."""
        output: list[bytes] = []
        errors: list[bytes] = []
        for custom_id, _ in job.requests:
            result = job.results.get(custom_id)
            line: dict[str, Any] = {"id": "batch_req_" + os.urandom(12).hex(), "custom_id": custom_id}
            if result is None:
                if job.state == "cancelled":
                    continue  # OpenAI leaves what a cancel stopped out of both files
                line["response"] = None
                line["error"] = {
                    "code": "batch_expired",
                    "message": "This request could not be executed before the completion window expired.",
                }
                errors.append(orjson.dumps(line))
                continue
            status, body = result
            line["response"] = {
                "status_code": status,
                "request_id": os.urandom(16).hex(),
                "body": orjson.loads(body) if body else None,
            }
            line["error"] = None
            (output if status == 200 else errors).append(orjson.dumps(line))
        job.extra["output_file_id"] = (
            self._store_file(
                b"\n".join(output) + b"\n", filename="batch_output.jsonl", purpose="batch_output"
            )["id"]
            if output
            else None
        )
        job.extra["error_file_id"] = (
            self._store_file(
                b"\n".join(errors) + b"\n", filename="batch_errors.jsonl", purpose="batch_output"
            )["id"]
            if errors
            else None
        )


def _read_input(content: bytes, endpoint: str) -> tuple[list[tuple[str, bytes]], list[dict[str, Any]]]:
    requests: list[tuple[str, bytes]] = []
    errors: list[dict[str, Any]] = []
    seen: set[str] = set()
    for number, raw in enumerate(content.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            line = orjson.loads(raw)
        except orjson.JSONDecodeError:
            errors.append(
                _line_error("invalid_json_line", "This line is not parseable as valid JSON.", number)
            )
            continue
        if not isinstance(line, dict) or not isinstance(line.get("custom_id"), str):
            errors.append(_line_error("missing_required_parameter", "Missing custom_id.", number))
            continue
        if line.get("url") != endpoint or line.get("method") != "POST":
            errors.append(
                _line_error(
                    "mismatched_endpoint", "The line's url does not match the batch endpoint.", number
                )
            )
            continue
        if line["custom_id"] in seen:
            errors.append(_line_error("duplicate_custom_id", "The custom_id is not unique.", number))
            continue
        seen.add(line["custom_id"])
        requests.append((line["custom_id"], orjson.dumps(line.get("body") or {})))
    if not requests and not errors:
        errors.append(_line_error("empty_file", "The input file is empty.", None))
    return requests, errors


def _line_error(code: str, message: str, line: int | None) -> dict[str, Any]:
    return {"code": code, "message": message, "param": None, "line": line}


def _multipart(ex: Exchange) -> tuple[dict[str, str], bytes | None, str | None]:
    """The form fields, the `file` part and its filename (stdlib parser: no shared code with the gateway)."""
    content_type = ex.header(b"content-type") or ""
    if not content_type.startswith("multipart/form-data"):
        raise ApiError(400, "Expected a multipart/form-data body.")
    message = BytesParser(policy=HTTP).parsebytes(
        b"Content-Type: " + content_type.encode("latin-1") + b"\r\n\r\n" + ex.body
    )
    fields: dict[str, str] = {}
    content: bytes | None = None
    filename: str | None = None
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        data = payload if isinstance(payload, bytes) else b""
        if name == "file":
            content, filename = data, part.get_filename()
        elif isinstance(name, str):
            fields[name] = data.decode()
    return fields, content, filename


def _int(value: float | None) -> int | None:
    return None if value is None else int(value)


async def _json(ex: Exchange, body: dict[str, Any]) -> None:
    await ex.respond(200, orjson.dumps(body))
