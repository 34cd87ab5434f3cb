"""What the batch runner needs from a provider's own Batch API (OpenAI's `/v1/batches`, Anthropic's
`/v1/messages/batches`), in canonical terms so the runner never sees a provider's dialect.

Items go in as canonical chat requests (OpenAI Chat Completions in shape, the model already the
upstream one) and come back as canonical completions with their usage, whichever provider ran them;
turning those into the client's dialect (an OpenAI output file, Anthropic results) is the runner's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from providers.types import ChatRequest, Completion

# The provider's view of a batch, reduced to what decides the runner's next step.
RemoteState = Literal["in_progress", "ended", "cancelling", "cancelled", "expired", "failed"]


@dataclass(frozen=True, slots=True)
class RemoteItem:
    custom_id: str
    request: ChatRequest


@dataclass(frozen=True, slots=True)
class RemoteStatus:
    state: RemoteState
    # Items the provider reports finished, succeeded or not (for progress only).
    done: int = 0
    # Why the provider failed the whole batch (validation errors, an expired file), when it did.
    message: str | None = None


@dataclass(frozen=True, slots=True)
class RemoteError:
    code: str
    message: str
    status: int = 500


@dataclass(frozen=True, slots=True)
class RemoteResult:
    """One item's outcome: a completion (canonical bytes and usage) or an error, never both.
    Items the provider expired or cancelled come back as errors with code `expired`/`cancelled`."""

    custom_id: str
    completion: Completion | None = None
    error: RemoteError | None = None


class RemoteBatchAPI(Protocol):
    async def submit(self, items: list[RemoteItem], *, metadata: dict[str, str]) -> str:
        """Send the items as one provider batch; returns the provider's batch id."""
        ...

    async def poll(self, upstream_id: str) -> RemoteStatus: ...

    async def results(self, upstream_id: str) -> list[RemoteResult]:
        """Every item's outcome, once `poll` says the batch ended (or was cancelled/expired)."""
        ...

    async def cancel(self, upstream_id: str) -> None: ...
