"""Write chat completions and stream chunks exactly as api.openai.com or vLLM shape them."""

from __future__ import annotations

import os
import time
from typing import Any

import orjson

from sandbox.core.engine import Choice, Plan
from sandbox.openai.logprobs import LogprobWriter

__all__ = ["ChatWriter"]

_OBFUSCATION = "Qx7vT2mLk9PzR4wYbN"


class ChatWriter:
    """Formats one chat answer (whole or chunked) in the ``openai`` or ``vllm`` flavour.

    Differences kept on purpose, because adapters must cope with both: OpenAI
    sends ``system_fingerprint``, ``service_tier``, ``obfuscation`` and
    ``completion_tokens_details``, a role-only first chunk and a content-less
    finish chunk, and ``usage: null`` on every chunk once ``include_usage`` is
    on; vLLM sends ``stop_reason``, ``tool_calls: []``, no usage key on chunks,
    the finish reason on the last content chunk, and ``prompt_tokens_details``
    only when ``--enable-prompt-tokens-details`` is on and something was cached.
    """

    def __init__(
        self,
        *,
        vllm: bool,
        model: str,
        fingerprint: str,
        service_tier: str | None = None,
        include_usage: bool = False,
        include_obfuscation: bool = True,
        prompt_tokens_details: bool = True,
        logprobs: LogprobWriter | None = None,
    ) -> None:
        self.vllm = vllm
        self.id = "chatcmpl-" + os.urandom(16).hex() if vllm else "chatcmpl-" + _base62(29)
        self._created = int(time.time())
        self._model = model
        self._fingerprint = fingerprint
        self._tier = service_tier or "default"
        self._include_usage = include_usage
        self._obfuscate = include_obfuscation and not vllm
        self._details = prompt_tokens_details
        self._call_ids: dict[int, str] = {}
        self._logprobs = logprobs

    def _head(self, kind: str) -> dict[str, Any]:
        head: dict[str, Any] = {
            "id": self.id,
            "object": kind,
            "created": self._created,
            "model": self._model,
        }
        if not self.vllm:
            head["service_tier"] = self._tier
            head["system_fingerprint"] = self._fingerprint
        return head

    def call_id(self, index: int) -> str:
        """The tool-call id of choice ``index`` (stable within this answer)."""
        call_id = self._call_ids.get(index)
        if call_id is None:
            call_id = "chatcmpl-tool-" + os.urandom(16).hex() if self.vllm else "call_" + _base62(24)
            self._call_ids[index] = call_id
        return call_id

    def usage(self, plan: Plan, *, in_stream: bool = False) -> dict[str, Any]:
        """The usage object; each of ``n`` choices is billed, the prompt once."""
        usage: dict[str, Any] = {
            "prompt_tokens": plan.prompt_tokens,
            "completion_tokens": plan.completion_tokens,
            "total_tokens": plan.prompt_tokens + plan.completion_tokens,
        }
        if self.vllm:
            details = {"cached_tokens": plan.cached_tokens}
            if self._details and plan.cached_tokens:
                usage["prompt_tokens_details"] = details
            elif not in_stream:
                usage["prompt_tokens_details"] = None
            return usage
        usage["prompt_tokens_details"] = {"cached_tokens": plan.cached_tokens, "audio_tokens": 0}
        usage["completion_tokens_details"] = {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        }
        return usage

    def _message(self, choice: Choice) -> dict[str, Any]:
        calls: list[dict[str, Any]] = []
        if choice.tool_name is not None:
            function = {"name": choice.tool_name, "arguments": choice.text}
            calls.append({"id": self.call_id(choice.index), "type": "function", "function": function})
        content = None if calls else choice.text
        if self.vllm:
            return {
                "role": "assistant",
                "content": content,
                "refusal": None,
                "annotations": None,
                "audio": None,
                "function_call": None,
                "tool_calls": calls,
                "reasoning_content": None,
            }
        message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
        if calls:
            message["tool_calls"] = calls
        message["annotations"] = []
        return message

    def completion(self, plan: Plan) -> bytes:
        """The whole ``chat.completion`` object."""
        choices = []
        for choice in plan.choices:
            out: dict[str, Any] = {
                "index": choice.index,
                "message": self._message(choice),
                "logprobs": self._logprobs.whole(choice) if self._logprobs else None,
                "finish_reason": choice.finish_reason,
            }
            if self.vllm:
                out["stop_reason"] = None
            choices.append(out)
        body = self._head("chat.completion")
        body["choices"] = choices
        if self.vllm:
            body.update(service_tier=None, system_fingerprint=None, usage=self.usage(plan))
            body.update(prompt_logprobs=None, prompt_token_ids=None, kv_transfer_params=None)
        else:
            body["usage"] = self.usage(plan)
        return orjson.dumps(body)

    def _chunk(
        self,
        index: int,
        delta: dict[str, Any],
        finish: str | None,
        pad: int,
        logprobs: dict[str, Any] | None = None,
    ) -> bytes:
        choice: dict[str, Any] = {
            "index": index,
            "delta": delta,
            "logprobs": logprobs,
            "finish_reason": finish,
        }
        if self.vllm and finish is not None:
            choice["stop_reason"] = None
        chunk = self._head("chat.completion.chunk")
        chunk["choices"] = [choice]
        if self._include_usage and not self.vllm:
            chunk["usage"] = None
        if self._obfuscate:
            chunk["obfuscation"] = _OBFUSCATION[: pad % len(_OBFUSCATION) + 1]
        return orjson.dumps(chunk)

    def first_chunk(self, choice: Choice) -> bytes:
        """The chunk that opens a choice: the role (and, for a tool call, its id and name)."""
        delta: dict[str, Any] = {"role": "assistant", "content": ""}
        if choice.tool_name is not None:
            delta["content"] = None
            function = {"name": choice.tool_name, "arguments": ""}
            call = {"index": 0, "id": self.call_id(choice.index), "type": "function"}
            delta["tool_calls"] = [{**call, "function": function}]
        if not self.vllm:
            delta["refusal"] = None
        return self._chunk(choice.index, delta, None, 3)

    def piece_chunk(self, choice: Choice, text: str, *, last: bool, start: int = 0, stop: int = 0) -> bytes:
        """A chunk carrying ``text``, tokens ``start:stop`` of the choice (vLLM puts the finish
        reason on the last one)."""
        if choice.tool_name is not None:
            delta: dict[str, Any] = {"tool_calls": [{"index": 0, "function": {"arguments": text}}]}
        else:
            delta = {"content": text}
        finish = choice.finish_reason if (last and self.vllm) else None
        logprobs = self._logprobs.span(choice, start, stop) if self._logprobs else None
        return self._chunk(choice.index, delta, finish, len(text) * 7, logprobs)

    def finish_chunk(self, choice: Choice) -> bytes:
        """OpenAI's content-less chunk that carries a choice's finish reason."""
        return self._chunk(choice.index, {}, choice.finish_reason, 5)

    def usage_chunk(self, plan: Plan) -> bytes:
        """The ``include_usage`` chunk: no choices, the whole request's usage."""
        chunk = self._head("chat.completion.chunk")
        chunk["choices"] = []
        chunk["usage"] = self.usage(plan, in_stream=True)
        if self._obfuscate:
            chunk["obfuscation"] = _OBFUSCATION[:4]
        return orjson.dumps(chunk)


_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def _base62(length: int) -> str:
    """A random id part like OpenAI's (``chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG``)."""
    return "".join(_ALPHABET[b % 62] for b in os.urandom(length))
