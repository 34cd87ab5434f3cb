"""How `auto` checks its own cheap answers: escalation (one retry a tier up when an answer is
verifiably bad) and shadow checks (a sample also asked of the tier above, off the request path, to
measure how often the two agree). Part of `routing` in the config; see `gateway.routing.escalation`
and `gateway.routing.shadow`."""

from __future__ import annotations

from pydantic import Field

from gateway.config.base import Strict


class EscalationConfig(Strict):
    """A non-streamed `auto` answer from a tier below the top that breaks the request's JSON schema,
    calls a tool wrongly, stopped at `length` with nothing usable or is empty is asked once more of
    the next tier up; the client gets that answer and pays for both."""

    enabled: bool = True
    # Mean token log-probability under which an answer counts as unsure (e.g. -1.5). Off by default:
    # logprobs are then asked of self-hosted deployments (vLLM returns them) and stripped again.
    logprob_floor: float | None = Field(default=None, lt=0)


class ShadowConfig(Strict):
    """A share of the non-streamed `auto` requests answered below the top tier is also sent to the
    tier above, in the background; the ledger keeps whether the two answers agreed."""

    sample_rate: float = Field(default=0.0, ge=0, le=1)
    # A model asked "do these two answers agree?" when neither is JSON, a tool call or short; None
    # compares the words instead (`similarity_threshold` of token overlap counts as agreement).
    judge_model: str | None = None
    similarity_threshold: float = Field(default=0.6, gt=0, le=1)
    # Shadow calls running at once; a sample beyond it is dropped (and counted), never queued.
    max_in_flight: int = Field(default=4, gt=0)
