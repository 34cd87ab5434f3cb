"""OpenTelemetry traces: off by default at no cost; on, one server span per request with a client
span per upstream attempt, exported for real over OTLP/HTTP."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from gateway.accounting.record import RequestRecord
from gateway.observability.tracing import Tracing, otlp_endpoint

TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def finished(request_id: str = "req-1", **fields: object) -> RequestRecord:
    record = RequestRecord.begin(id=request_id, client_request_id=None)
    record.requested_model = "smart"
    for name, value in fields.items():
        setattr(record, name, value)
    return record


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def tracing(exporter: InMemorySpanExporter) -> Iterator[Tracing]:
    tracing = Tracing.to_exporter(exporter)
    yield tracing
    tracing.shutdown()


def test_off_by_default_and_free() -> None:
    tracing = Tracing.from_settings(None, {})
    assert not tracing.enabled
    record = finished()
    # The same no-op context manager every time: nothing is created per request.
    assert tracing.request_span(record) is tracing.attempt_span("openai/gpt-4o", 1)
    with tracing.request_span(record), tracing.attempt_span("openai/gpt-4o", 1):
        pass
    tracing.finish(record)


def test_the_sdk_is_not_imported_unless_tracing_is_on() -> None:
    code = (
        "import sys; from gateway.observability.tracing import Tracing; t = Tracing.from_settings(None, {}); "
        "print(any(name.startswith('opentelemetry.sdk') for name in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_endpoint_from_the_standard_variables_or_the_config() -> None:
    assert otlp_endpoint(None, {}) is None
    assert otlp_endpoint("http://collector:4318", {}) == "http://collector:4318/v1/traces"
    assert otlp_endpoint("http://c:4318/v1/traces", {}) == "http://c:4318/v1/traces"
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://env:4318/"}
    assert otlp_endpoint("http://collector:4318", env) == "http://env:4318/v1/traces"
    env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = "http://traces:9999/custom"
    assert otlp_endpoint(None, env) == "http://traces:9999/custom"
    assert otlp_endpoint("http://collector:4318", {"OTEL_SDK_DISABLED": "true"}) is None


def test_one_request_span_with_a_child_per_attempt(tracing: Tracing, exporter: InMemorySpanExporter) -> None:
    record = finished()
    with tracing.request_span(record):
        with pytest.raises(ConnectionError), tracing.attempt_span("anthropic/claude-sonnet-4", 1):
            raise ConnectionError("overloaded")
        with tracing.attempt_span("openai/gpt-4o", 2):
            pass
    assert len(exporter.get_finished_spans()) == 2  # the request span waits for `finish`
    record.model, record.provider, record.tier, record.team = "gpt-4o", "openai", "frontier", "search"
    record.status, record.attempts, record.fallback_used = 200, 2, True
    record.prompt_tokens, record.completion_tokens, record.cost_nano = 120, 30, 600_000
    record.finish()
    tracing.finish(record)

    failed, answered, request = exporter.get_finished_spans()
    # The GenAI conventions' name, "{gen_ai.operation.name} {gen_ai.request.model}".
    assert request.name == "chat smart" and request.kind is SpanKind.SERVER
    assert request.parent is None
    for attempt in (failed, answered):
        assert attempt.kind is SpanKind.CLIENT
        assert attempt.parent is not None and attempt.parent.span_id == request.context.span_id
        assert attempt.context.trace_id == request.context.trace_id
    assert failed.status.status_code is StatusCode.ERROR
    assert failed.events[0].name == "exception"
    assert (
        failed.attributes is not None
        and failed.attributes["tollgate.deployment"] == "anthropic/claude-sonnet-4"
    )
    assert answered.attributes is not None and answered.attributes["tollgate.attempt"] == 2
    attributes = request.attributes or {}
    assert attributes["tollgate.request_id"] == "req-1"
    assert attributes["tollgate.model"] == "gpt-4o"
    assert attributes["gen_ai.request.model"] == "smart"
    assert attributes["gen_ai.usage.input_tokens"] == 120
    assert attributes["tollgate.cost_nano_usd"] == 600_000
    assert attributes["tollgate.fallback_used"] is True
    assert request.status.status_code is StatusCode.UNSET
    assert request.start_time is not None and request.end_time is not None
    assert request.start_time <= failed.start_time <= answered.end_time <= request.end_time  # type: ignore[operator]


def test_a_stream_ends_its_span_after_the_handler_returned(
    tracing: Tracing, exporter: InMemorySpanExporter
) -> None:
    record = finished("req-stream", stream=True)
    with tracing.request_span(record), tracing.attempt_span("local/llama", 1):
        pass
    assert [s.name for s in exporter.get_finished_spans()] == ["upstream local/llama"]
    record.fail(status=502, error_type="upstream_error", message="dropped mid-stream")
    record.finish()
    tracing.finish(record)
    tracing.finish(record)  # a second call is harmless
    request = exporter.get_finished_spans()[-1]
    assert request.status.status_code is StatusCode.ERROR
    assert (request.attributes or {})["error.type"] == "upstream_error"


def test_a_caller_traceparent_makes_the_request_part_of_its_trace(
    tracing: Tracing, exporter: InMemorySpanExporter
) -> None:
    record = finished()
    with tracing.request_span(record, headers={"traceparent": TRACEPARENT}):
        pass
    record.status = 200
    record.finish()
    tracing.finish(record)
    (span,) = exporter.get_finished_spans()
    assert f"{span.context.trace_id:032x}" == "0af7651916cd43dd8448eb211c80319c"
    assert span.parent is not None and f"{span.parent.span_id:016x}" == "b7ad6b7169203331"


class Collector(BaseHTTPRequestHandler):
    """A minimal OTLP/HTTP receiver: keeps every decoded export request."""

    received: list[ExportTraceServiceRequest] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["content-length"]))
        message = ExportTraceServiceRequest()
        message.ParseFromString(body)
        type(self).received.append(message)
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_spans_are_exported_over_otlp_http() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    Collector.received.clear()
    try:
        endpoint = f"http://127.0.0.1:{server.server_address[1]}"
        tracing = Tracing.from_settings(endpoint, {"OTEL_SERVICE_NAME": "tollgate-test"})
        assert tracing.enabled
        record = finished()
        with tracing.request_span(record), tracing.attempt_span("openai/gpt-4o", 1):
            pass
        record.status = 200
        record.finish()
        tracing.finish(record)
        tracing.shutdown()  # flushes the batch
    finally:
        server.shutdown()
        server.server_close()
    spans = [
        (span.name, resource.resource)
        for message in Collector.received
        for resource in message.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    ]
    assert sorted(name for name, _ in spans) == ["chat smart", "upstream openai/gpt-4o"]
    service = {a.key: a.value.string_value for a in spans[0][1].attributes}["service.name"]
    assert service == "tollgate-test"
