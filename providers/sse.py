"""Server-sent events: an incremental decoder that survives events split across reads, and the encoder.

Follows the WHATWG event-stream rules that matter to LLM APIs: `data:` lines joined with newlines,
`event:` names, comments ignored, and lines ending in LF, CRLF or CR.
"""

from __future__ import annotations

from dataclasses import dataclass

from providers.http import MAX_EVENT_BYTES, AnswerTooLarge

DONE = b"[DONE]"


@dataclass(slots=True, frozen=True)
class ServerSentEvent:
    data: bytes
    event: str | None = None


class SSEDecoder:
    """Feed it raw bytes as they arrive; it returns the events completed so far.

    An event may not grow past `limit` bytes (`AnswerTooLarge`), and reads without a line break
    are kept aside and joined once, when the line ends: appending each read to the unfinished line
    cost time quadratic in its length, which an upstream that never sends a newline would control.
    """

    __slots__ = ("_buffer", "_data", "_data_size", "_event", "_limit", "_pending", "_pending_size")

    def __init__(self, *, limit: int = MAX_EVENT_BYTES) -> None:
        self._buffer = b""  # the unfinished last line
        self._pending: list[bytes] = []  # reads since `_buffer` that held no line break
        self._pending_size = 0
        self._data: list[bytes] = []
        self._data_size = 0
        self._event: str | None = None
        self._limit = limit

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        if self._buffer or self._pending:
            if b"\n" not in chunk and b"\r" not in chunk:
                self._pending.append(chunk)
                self._pending_size += len(chunk)
                if len(self._buffer) + self._pending_size > self._limit:
                    raise self._too_large()
                return []
            if self._pending:
                buffer = b"".join([self._buffer, *self._pending, chunk])
                self._pending = []
                self._pending_size = 0
            else:
                buffer = self._buffer + chunk
        else:
            buffer = chunk
        if b"\r" in buffer:
            # A trailing CR may be the first half of a CRLF: keep it until the next read says.
            tail = b"\r" if buffer.endswith(b"\r") else b""
            body = buffer[:-1] if tail else buffer
            buffer = body.replace(b"\r\n", b"\n").replace(b"\r", b"\n") + tail
        lines = buffer.split(b"\n")
        self._buffer = lines.pop()
        events: list[ServerSentEvent] = []
        for line in lines:
            if not line:
                if self._data:
                    events.append(ServerSentEvent(b"\n".join(self._data), self._event))
                    self._data = []
                    self._data_size = 0
                self._event = None
                continue
            self._take_line(line)
        if len(self._buffer) + self._data_size > self._limit:
            raise self._too_large()
        return events

    def flush(self) -> list[ServerSentEvent]:
        """Events left when the stream ends without a final blank line."""
        if self._pending:
            self._buffer = b"".join([self._buffer, *self._pending])
            self._pending = []
            self._pending_size = 0
        if self._buffer and self._buffer != b"\r":
            self._take_line(self._buffer)
        self._buffer = b""
        events = [ServerSentEvent(b"\n".join(self._data), self._event)] if self._data else []
        self._data = []
        self._data_size = 0
        self._event = None
        return events

    def _too_large(self) -> AnswerTooLarge:
        return AnswerTooLarge(f"a stream event over {self._limit >> 20} MiB")

    def _take_line(self, line: bytes) -> None:
        if line[:1] == b":":
            return
        name, _, value = line.partition(b":")
        if value[:1] == b" ":
            value = value[1:]
        if name == b"data":
            self._data.append(value)
            self._data_size += len(value)
        elif name == b"event":
            self._event = value.decode("utf-8", "replace")


def encode_data(data: bytes) -> bytes:
    """One `data:` event; JSON payloads never contain raw newlines, so one line suffices."""
    return b"data: " + data + b"\n\n"


def encode_event(event: str, data: bytes) -> bytes:
    return b"event: " + event.encode() + b"\ndata: " + data + b"\n\n"


DONE_EVENT = encode_data(DONE)
