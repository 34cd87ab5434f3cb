"""Optional OpenTelemetry traces: one server span per request and a client span per upstream attempt
under it, exported over OTLP/HTTP when an endpoint is configured.

The SDK is an optional extra (`pip install 'tollgate[otel]'`), imported only when tracing is on.
Off, `request_span` and `attempt_span` return one shared no-op context manager and `finish` returns
at once: nothing else runs on the request path.

A streamed request outlives its handler, so the request span is not ended when `request_span`'s
block exits: `finish(record)` ends it (from `close_record`, once the record is final, which is also
when its attributes are known). The block only makes the span current, so attempt spans opened in
it nest under it. Each gateway has its own tracer provider, never the process-global one.

Attributes follow the OpenTelemetry GenAI semantic conventions (`gen_ai.operation.name`,
`gen_ai.request.model`, `gen_ai.provider.name`, `gen_ai.usage.*`; span name "{operation} {model}"),
with Tollgate's own under `tollgate.*`. Upstream calls carry the attempt span's W3C `traceparent`
(`propagating`, wrapped around the upstream client only when tracing is on), so a provider or a
self-hosted vLLM that traces joins the caller's trace.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import Span, Tracer

    from gateway.accounting.record import RequestRecord
    from gateway.config.schema import Config
    from providers.http import UpstreamHTTP

log = logging.getLogger("tollgate.tracing")

ENDPOINT_ENVS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
_TRACES_PATH = "/v1/traces"
_NOOP: AbstractContextManager[None] = nullcontext()
# Spans whose request never reached `finish` (a bug elsewhere) must not pile up forever.
_MAX_OPEN = 100_000
# Provider types whose `gen_ai.provider.name` the conventions name; other types report the
# provider's name in the config (an OpenAI-compatible "groq", "together", a vLLM fleet).
_WELL_KNOWN_PROVIDERS = {"openai": "openai", "anthropic": "anthropic", "gemini": "gcp.gemini"}


def otlp_endpoint(configured: str | None, environ: Mapping[str, str]) -> str | None:
    """Where spans go: the standard OTEL_* variables win over the config, as the database URL does.

    A base URL (`http://collector:4318`) gets OTLP's `/v1/traces`; a traces-specific one is used as is.
    """
    if environ.get("OTEL_SDK_DISABLED", "").lower() == "true":
        return None
    if environ.get(ENDPOINT_ENVS[0]):
        return environ[ENDPOINT_ENVS[0]]
    base = environ.get(ENDPOINT_ENVS[1]) or configured
    if not base:
        return None
    return base if base.rstrip("/").endswith(_TRACES_PATH) else base.rstrip("/") + _TRACES_PATH


class Tracing:
    """A gateway's tracer, or none: `Tracing.off()` costs nothing per request."""

    def __init__(self, provider: TracerProvider | None = None) -> None:
        self._provider = provider
        self._tracer: Tracer | None = provider.get_tracer("tollgate") if provider is not None else None
        self._open: dict[str, Span] = {}
        self._providers: dict[str, str] = {}

    @classmethod
    def off(cls) -> Tracing:
        return cls()

    @classmethod
    def from_settings(
        cls, configured_endpoint: str | None, environ: Mapping[str, str], *, service_name: str = "tollgate"
    ) -> Tracing:
        """Tracing to the configured OTLP endpoint, or off when there is none. Asked for but without
        the SDK installed, it says so and stays off: traces are never worth refusing to serve."""
        endpoint = otlp_endpoint(configured_endpoint, environ)
        if endpoint is None:
            return cls.off()
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
        except ImportError:
            log.warning(
                "tracing: an OTLP endpoint is set (%s) but the OpenTelemetry SDK is not installed; "
                "install 'tollgate[otel]'. Serving without traces.",
                endpoint,
            )
            return cls.off()
        provider = _provider(environ.get("OTEL_SERVICE_NAME") or service_name)
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
        log.info("tracing: exporting spans to %s", endpoint)
        return cls(provider)

    @classmethod
    def to_exporter(cls, exporter: SpanExporter, *, service_name: str = "tollgate") -> Tracing:
        """Spans handed to `exporter` as each one ends (tests, with the SDK's in-memory exporter)."""
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor

        provider = _provider(service_name)
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        return cls(provider)

    @property
    def enabled(self) -> bool:
        return self._tracer is not None

    def use_config(self, config: Config) -> None:
        """Learn which provider type each configured provider is (at start-up and on every reload)."""
        self._providers = {
            name: _WELL_KNOWN_PROVIDERS.get(spec.type, name) for name, spec in config.providers.items()
        }

    def propagating(self, client: UpstreamHTTP) -> UpstreamHTTP:
        """`client`, sending the current span's `traceparent` upstream when tracing is on; off, the
        client itself, so the upstream call path is untouched."""
        if self._tracer is None:
            return client
        from gateway.observability.propagation import PropagatingHTTP

        return PropagatingHTTP(client)

    def describe(self, record: RequestRecord, *, max_tokens: int | None, temperature: float | None) -> None:
        """The request parameters the conventions record, once the body is parsed."""
        if self._tracer is None:
            return
        span = self._open.get(record.id)
        if span is None:
            return
        if max_tokens is not None:
            span.set_attribute("gen_ai.request.max_tokens", max_tokens)
        if temperature is not None:
            span.set_attribute("gen_ai.request.temperature", float(temperature))

    def trace_id(self, record: RequestRecord) -> str | None:
        """The request's trace id (32 hex digits) while its span is open, for its log lines."""
        span = self._open.get(record.id) if self._tracer is not None else None
        if span is None:
            return None
        return format(span.get_span_context().trace_id, "032x")

    def request_span(
        self, record: RequestRecord, *, headers: Mapping[str, str] | None = None
    ) -> AbstractContextManager[None]:
        """Open the request's span and make it current for the block; `finish` ends it. A W3C
        `traceparent` in `headers` makes it a child of the caller's trace."""
        if self._tracer is None:
            return _NOOP
        return self._request_span(self._tracer, record, headers)

    def attempt_span(self, deployment_key: str, attempt: int) -> AbstractContextManager[None]:
        """A child span around one upstream attempt; an exception out of it marks it failed."""
        if self._tracer is None:
            return _NOOP
        return self._attempt_span(self._tracer, deployment_key, attempt)

    def finish(self, record: RequestRecord) -> None:
        """End the request's span with what the finished record says (call after `record.finish()`)."""
        if self._tracer is None:
            return
        span = self._open.pop(record.id, None)
        if span is None:
            return
        from opentelemetry.trace import Status, StatusCode

        span.set_attributes(_attributes(record, self._providers))
        span.update_name(
            f"{_operation(record.endpoint)} {record.requested_model or record.model or 'unknown'}"
        )
        if record.status >= 500 or record.status == 0:
            span.set_status(Status(StatusCode.ERROR, record.error_type or "error"))
        span.end()

    def shutdown(self) -> None:
        """Flush what is queued and stop exporting (blocking: run it off the event loop)."""
        self._end_open()
        if self._provider is not None:
            self._provider.shutdown()

    @contextmanager
    def _request_span(
        self, tracer: Tracer, record: RequestRecord, headers: Mapping[str, str] | None
    ) -> Iterator[None]:
        from opentelemetry.trace import SpanKind, use_span
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        parent = TraceContextTextMapPropagator().extract(dict(headers)) if headers else None
        span = tracer.start_span(
            # Renamed "{operation} {model}" by `finish`, once the body has said which model.
            _operation(record.endpoint),
            context=parent,
            kind=SpanKind.SERVER,
            start_time=int(record.created_at.timestamp() * 1e9),
            attributes={
                "tollgate.request_id": record.id,
                "tollgate.endpoint": record.endpoint,
                "gen_ai.operation.name": _operation(record.endpoint),
            },
        )
        if len(self._open) >= _MAX_OPEN:
            self._end_open()
        self._open[record.id] = span
        with use_span(span, end_on_exit=False, record_exception=False, set_status_on_exception=False):
            yield

    def _end_open(self) -> None:
        for span in self._open.values():
            span.end()
        self._open.clear()

    @contextmanager
    def _attempt_span(self, tracer: Tracer, deployment_key: str, attempt: int) -> Iterator[None]:
        from opentelemetry.trace import SpanKind

        provider, _, model = deployment_key.partition("/")
        attributes: dict[str, Any] = {
            "tollgate.deployment": deployment_key,
            "tollgate.provider": provider,
            "tollgate.attempt": attempt,
            "gen_ai.provider.name": self._providers.get(provider, provider),
            "gen_ai.request.model": model,
        }
        with tracer.start_as_current_span(
            f"upstream {deployment_key}", kind=SpanKind.CLIENT, attributes=attributes
        ):
            yield


def _provider(service_name: str) -> TracerProvider:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider

    # Shut down by the gateway itself: an atexit hook per provider would pile up across app instances.
    return TracerProvider(resource=Resource.create({"service.name": service_name}), shutdown_on_exit=False)


def _operation(endpoint: str) -> str:
    """The conventions' operation name: every chat dialect (OpenAI's, Anthropic's Messages) is "chat"."""
    return "embeddings" if endpoint == "embeddings" else "chat"


def _attributes(record: RequestRecord, providers: Mapping[str, str]) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": _operation(record.endpoint),
        "http.response.status_code": record.status,
        "tollgate.stream": record.stream,
        "tollgate.attempts": record.attempts,
        "tollgate.fallback_used": record.fallback_used,
        "tollgate.cost_nano_usd": record.cost_nano,
        "gen_ai.request.model": record.requested_model,
        "gen_ai.usage.input_tokens": record.prompt_tokens,
        "gen_ai.usage.output_tokens": record.completion_tokens,
        "tollgate.latency_ms": record.latency_ms,
    }
    optional = {
        "tollgate.model": record.model,
        "tollgate.provider": record.provider,
        "gen_ai.provider.name": None
        if record.provider is None
        else providers.get(record.provider, record.provider),
        "gen_ai.response.model": record.upstream_model,
        "tollgate.tier": record.tier,
        "tollgate.team": record.team,
        "tollgate.cache": record.cache_status,
        "error.type": record.error_type,
        "tollgate.ttft_ms": record.ttft_ms,
        "tollgate.overhead_ms": record.overhead_ms,
    }
    attributes.update({name: value for name, value in optional.items() if value is not None})
    return attributes
