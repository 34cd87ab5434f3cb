"""The upstream client as tracing wraps it: each POST carries the current span's W3C `traceparent`
(and `tracestate`), so an upstream that traces continues the caller's trace.

Imported only when tracing is on (`Tracing.propagating`): off, the gateway talks to the unwrapped
client and no header is added.
"""

from __future__ import annotations

from collections.abc import Mapping

from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from providers.http import Timeouts, UpstreamHTTP, UpstreamResponse

_PROPAGATOR = TraceContextTextMapPropagator()


class PropagatingHTTP:
    """An `UpstreamHTTP` that adds the trace context to every request it sends."""

    def __init__(self, client: UpstreamHTTP) -> None:
        self.inner = client

    async def send(
        self,
        url: str,
        *,
        content: bytes,
        headers: Mapping[str, str],
        timeouts: Timeouts,
        method: str = "POST",
    ) -> UpstreamResponse:
        carrier = dict(headers)
        # The current span is the executor's attempt span: the upstream's work nests under it.
        _PROPAGATOR.inject(carrier)
        return await self.inner.send(url, content=content, headers=carrier, timeouts=timeouts, method=method)

    async def aclose(self) -> None:
        await self.inner.aclose()
