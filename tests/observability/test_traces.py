"""Traces through the real gateway: the request span follows the OpenTelemetry GenAI conventions,
and the upstream receives a `traceparent` in the caller's trace, under the attempt span. With
tracing off, nothing is sent upstream."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from gateway.observability.tracing import Tracing
from sandbox.server import SandboxServer
from tests.conftest import gateway_config
from tests.harness import GatewayServer

CALLER_TRACE = "0af7651916cd43dd8448eb211c80319c"
TRACEPARENT = f"00-{CALLER_TRACE}-b7ad6b7169203331-01"


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


def _serve(sqlite_url: str, openai: SandboxServer, vllm: SandboxServer) -> GatewayServer:
    return GatewayServer(gateway_config(sqlite_url, openai.base_url, vllm.base_url))


@pytest.fixture
def traced(
    monkeypatch: pytest.MonkeyPatch,
    exporter: InMemorySpanExporter,
    sqlite_url: str,
    openai_upstream: SandboxServer,
    vllm_upstream: SandboxServer,
) -> Iterator[GatewayServer]:
    # The gateway's own tracer, handing spans to the in-memory exporter instead of OTLP.
    monkeypatch.setattr(
        Tracing, "from_settings", classmethod(lambda cls, *a, **k: Tracing.to_exporter(exporter))
    )
    with _serve(sqlite_url, openai_upstream, vllm_upstream) as gateway:
        yield gateway


def _chat(gateway: GatewayServer, **extra: Any) -> httpx.Response:
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}], **extra}
    answer = httpx.post(
        gateway.base_url + "/v1/chat/completions", json=body, headers={"traceparent": TRACEPARENT}, timeout=20
    )
    assert answer.status_code == 200, answer.text
    return answer


def _upstream_headers(server: SandboxServer) -> list[dict[str, str]]:
    entries = httpx.get(server.base_url + "/_sandbox/requests").json()
    return [e["headers"] for e in entries if e["path"].endswith("/chat/completions")]


def _spans(exporter: InMemorySpanExporter, kind: SpanKind) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.kind is kind]


def test_the_upstream_gets_a_traceparent_in_the_callers_trace(
    traced: GatewayServer, exporter: InMemorySpanExporter, openai_upstream: SandboxServer
) -> None:
    _chat(traced, max_tokens=40, temperature=0.2)
    (headers,) = _upstream_headers(openai_upstream)
    version, trace_id, parent_id, flags = headers["traceparent"].split("-")
    assert (version, trace_id, flags) == ("00", CALLER_TRACE, "01")
    (attempt,) = _spans(exporter, SpanKind.CLIENT)
    # The upstream's parent is the attempt span, itself under the request span, under the caller's.
    assert parent_id == f"{attempt.context.span_id:016x}"
    (request,) = _spans(exporter, SpanKind.SERVER)
    assert attempt.parent is not None and attempt.parent.span_id == request.context.span_id
    assert request.parent is not None and f"{request.parent.span_id:016x}" == "b7ad6b7169203331"


def test_the_request_span_follows_the_genai_conventions(
    traced: GatewayServer, exporter: InMemorySpanExporter
) -> None:
    answer = _chat(traced, max_tokens=40, temperature=0.2)
    (request,) = _spans(exporter, SpanKind.SERVER)
    assert request.name == "chat gpt-4o-mini"
    attributes = dict(request.attributes or {})
    print(attributes)
    assert attributes["gen_ai.operation.name"] == "chat"
    assert attributes["gen_ai.request.model"] == "gpt-4o-mini"
    assert attributes["gen_ai.response.model"] == "gpt-4o-mini"
    assert attributes["gen_ai.provider.name"] == "openai"  # the provider's type, as the registry names it
    assert attributes["gen_ai.request.max_tokens"] == 40
    assert attributes["gen_ai.request.temperature"] == 0.2
    usage = answer.json()["usage"]
    assert attributes["gen_ai.usage.input_tokens"] == usage["prompt_tokens"]
    assert attributes["gen_ai.usage.output_tokens"] == usage["completion_tokens"]
    assert attributes["tollgate.request_id"] == answer.headers["x-request-id"]
    (attempt,) = _spans(exporter, SpanKind.CLIENT)
    assert (attempt.attributes or {})["gen_ai.provider.name"] == "openai"


def test_a_self_hosted_provider_reports_its_own_name(
    traced: GatewayServer, exporter: InMemorySpanExporter
) -> None:
    body = {"model": "llama", "messages": [{"role": "user", "content": "hi"}]}
    httpx.post(traced.base_url + "/v1/chat/completions", json=body, timeout=20)
    spans = _spans(exporter, SpanKind.CLIENT)
    assert spans and {(s.attributes or {})["gen_ai.provider.name"] for s in spans} == {"local"}


def test_without_tracing_nothing_is_forwarded(
    sqlite_url: str, openai_upstream: SandboxServer, vllm_upstream: SandboxServer
) -> None:
    with _serve(sqlite_url, openai_upstream, vllm_upstream) as gateway:
        assert not gateway.runtime.tracing.enabled
        _chat(gateway)
    (headers,) = _upstream_headers(openai_upstream)
    assert "traceparent" not in headers


def test_provider_names_are_the_conventions_well_known_ones_by_type(exporter: InMemorySpanExporter) -> None:
    from types import SimpleNamespace

    tracing = Tracing.to_exporter(exporter)
    providers = {"up": "openai", "claude": "anthropic", "goog": "gemini", "groq": "openai_compatible"}
    config = SimpleNamespace(providers={n: SimpleNamespace(type=t) for n, t in providers.items()})
    tracing.use_config(config)  # type: ignore[arg-type]
    for name in providers:
        with tracing.attempt_span(f"{name}/some-model", 1):
            pass
    named = [(s.attributes or {})["gen_ai.provider.name"] for s in exporter.get_finished_spans()]
    assert named == ["openai", "anthropic", "gcp.gemini", "groq"]
    tracing.shutdown()


def test_the_access_line_names_the_trace(
    traced: GatewayServer, exporter: InMemorySpanExporter, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tollgate.access")  # what --access-log does
    answer = _chat(traced)
    (line,) = [r for r in caplog.records if r.name == "tollgate.access"]
    fields = line.fields  # type: ignore[attr-defined]
    assert fields["request_id"] == answer.headers["x-request-id"]
    assert fields["trace_id"] == CALLER_TRACE


def test_a_streamed_request_forwards_the_trace_too(
    traced: GatewayServer, exporter: InMemorySpanExporter, openai_upstream: SandboxServer
) -> None:
    assert "data: [DONE]" in _chat(traced, stream=True).text
    (headers,) = _upstream_headers(openai_upstream)
    assert headers["traceparent"].split("-")[1] == CALLER_TRACE
    (attempt,) = _spans(exporter, SpanKind.CLIENT)
    assert headers["traceparent"].split("-")[2] == f"{attempt.context.span_id:016x}"
