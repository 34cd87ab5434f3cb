"""OpenAI chat.completion.chunks re-encoded as the Responses API's typed stream events.

The Responses stream opens the response (`response.created`, `response.in_progress`), then opens,
fills and closes one output item at a time: a message (`output_item.added`, `content_part.added`,
`output_text.delta`…, `output_text.done`, `content_part.done`, `output_item.done`) or a function
call (`output_item.added`, `function_call_arguments.delta`…, `.done`, `output_item.done`); it ends
with the whole response in `response.completed` (or `response.incomplete`, or `response.failed`).
Every event carries a `sequence_number`, counted from 0. The openai SDK's stream helper checks
that items open before their deltas and keep their ids, so each item keeps one id throughout.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import orjson

from providers.openai_compat import from_openai_usage
from providers.responses.output import call_item, failed, finished, message_item, text_part
from providers.responses.request import new_id
from providers.sse import encode_event
from providers.types import JSON
from usage import Usage


@dataclass(slots=True)
class _Open:
    """The output item being filled: a message (key None) or the chat tool call of index `key`."""

    key: int | None
    item: JSON
    text: list[str] = field(default_factory=list)


class ResponsesStreamEncoder:
    """Feed it each chunk dict (`encode`), then call `finish` or `fail`; each returns events as
    `(type, data)` pairs ready to frame. `final` holds the finished response afterwards."""

    def __init__(self, response: JSON, *, clock: int) -> None:
        self._response = response  # the skeleton: in progress, no output
        self._clock = clock
        self._sequence = 0
        self._started = False
        self._output: list[JSON] = []
        self._open: _Open | None = None
        self._finish_reason: str | None = None
        self._usage = Usage()
        self.final: JSON | None = None

    def encode(self, chunk: JSON, *, usage: Usage | None = None) -> list[JSON]:
        events = self._start()
        if usage is not None or chunk.get("usage"):
            self._usage = usage or from_openai_usage(chunk.get("usage"))
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue  # a response has one answer
            delta = choice.get("delta") or {}
            if delta.get("content"):
                events += self._text(delta["content"])
            for call in delta.get("tool_calls") or ():
                events += self._call(call)
            if choice.get("finish_reason"):
                self._finish_reason = choice["finish_reason"]
        return events

    def finish(self, *, at: int) -> list[JSON]:
        events = [*self._start(), *self._close()]
        self.final = finished(
            self._response, output=self._output, usage=self._usage, finish_reason=self._finish_reason, at=at
        )
        kind = "response.completed" if self.final["status"] == "completed" else "response.incomplete"
        return [*events, self._event(kind, response=self.final)]

    def fail(self, message: str, *, code: str | None) -> list[JSON]:
        """A failure after the stream began: `response.failed` with what was produced so far, then
        an `error` event (which the openai SDK raises as an exception)."""
        events = self._start()
        output = [*self._output, *([self._open.item] if self._open else [])]
        response = failed(self._response, output=output, message=message)
        events.append(self._event("response.failed", response=response))
        events.append(self._event("error", code=code, message=message, param=None))
        return events

    def _start(self) -> list[JSON]:
        if self._started:
            return []
        self._started = True
        return [
            self._event("response.created", response=self._response),
            self._event("response.in_progress", response=self._response),
        ]

    def _event(self, kind: str, **fields: object) -> JSON:
        event = {"type": kind, "sequence_number": self._sequence, **fields}
        self._sequence += 1
        return event

    def _text(self, text: str) -> list[JSON]:
        events: list[JSON] = []
        if self._open is None or self._open.key is not None:
            events += self._close()
            item = message_item("", item_id=new_id("msg"), status="in_progress")
            events += self._add(_Open(None, item))
            events.append(self._in_message("response.content_part.added", part=text_part("")))
        assert self._open is not None
        self._open.text.append(text)
        events.append(self._in_message("response.output_text.delta", delta=text, logprobs=[]))
        return events

    def _call(self, call: JSON) -> list[JSON]:
        index = int(call.get("index", 0))
        function = call.get("function") or {}
        events: list[JSON] = []
        if self._open is None or self._open.key != index:
            events += self._close()
            item = call_item(
                item_id=new_id("fc"),
                call_id=str(call.get("id") or new_id("call")),
                name=str(function.get("name") or ""),
                arguments="",
                status="in_progress",
            )
            events += self._add(_Open(index, item))
        assert self._open is not None
        if function.get("arguments"):
            self._open.text.append(function["arguments"])
            events.append(
                self._event(
                    "response.function_call_arguments.delta",
                    item_id=self._open.item["id"],
                    output_index=len(self._output),
                    delta=function["arguments"],
                )
            )
        return events

    def _add(self, opened: _Open) -> list[JSON]:
        self._open = opened
        return [self._event("response.output_item.added", output_index=len(self._output), item=opened.item)]

    def _in_message(self, kind: str, **fields: object) -> JSON:
        assert self._open is not None
        return self._event(
            kind, item_id=self._open.item["id"], output_index=len(self._output), content_index=0, **fields
        )

    def _close(self) -> list[JSON]:
        opened, self._open = self._open, None
        if opened is None:
            return []
        text, index, item_id = "".join(opened.text), len(self._output), opened.item["id"]
        if opened.key is None:
            item = message_item(text, item_id=item_id)
            self._open = opened  # `_in_message` names the item still being closed
            events = [
                self._in_message("response.output_text.done", text=text, logprobs=[]),
                self._in_message("response.content_part.done", part=text_part(text)),
            ]
            self._open = None
        else:
            item = {**opened.item, "arguments": text, "status": "completed"}
            events = [
                self._event(
                    "response.function_call_arguments.done",
                    item_id=item_id,
                    output_index=index,
                    arguments=text,
                )
            ]
        self._output.append(item)
        events.append(self._event("response.output_item.done", output_index=index, item=item))
        return events


def encode_events(events: list[JSON]) -> bytes:
    """The Responses API's SSE framing: each event named by its type, its data one JSON line."""
    return b"".join(encode_event(event["type"], orjson.dumps(event)) for event in events)
