"""A Responses API event stream as our StreamChunks: ``ResponseReader``.

May import the domain and the provider helpers. Reads the events' JSON as it comes (no SDK
object per event): output text and refusals become text blocks, reasoning summaries (and raw
reasoning text, where a server streams it) a reasoning block ended by ``ReasoningDone`` whose
payload is the reasoning item exactly as ``response.output_item.done`` gave it, function calls
``ToolUse`` once their item is done, and ``response.completed`` / ``response.incomplete`` the
``MessageStop``; ``error`` and ``response.failed`` raise ProviderError.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any

from app.domain import (
    ContentBlockDelta,
    ContentBlockStart,
    ContentBlockStop,
    ImageDone,
    MessageStop,
    ProviderError,
    ReasoningDone,
    StreamChunk,
    ToolUse,
    Usage,
)
from app.providers.base import event_json
from app.providers.errors import bad_response, stream_error
from app.providers.sse import SSEEvent

SUMMARY_SEPARATOR = "\n\n"
"""Between two parts of one reasoning summary, streamed and stored alike."""

_IGNORED = frozenset(
    {
        "response.created",
        "response.in_progress",
        "response.queued",
        "response.output_item.added",
        "response.content_part.added",
        "response.content_part.done",
        "response.output_text.done",
        "response.refusal.done",
        "response.output_text.annotation.added",
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_part.done",
        "response.reasoning_summary_text.done",
        "response.reasoning_text.done",
        "response.function_call_arguments.done",
        "response.image_generation_call.partial_image",
    }
)
"""Events that add nothing to what the deltas and ``output_item.done`` say: not even parsed
(``*.done`` events repeat a whole text)."""

_INCOMPLETE_REASONS = {"max_output_tokens": "max_tokens", "content_filter": "refusal"}

# ResponseError codes that are the request's fault (a bad image, a refused prompt): not retried.
_REFUSED_PREFIXES = ("invalid_", "image_", "unsupported_", "empty_", "failed_to_download")
_REFUSED_CODES = frozenset(
    {"bio_policy", "misalignment_policy_violation", "data_residency_mismatch"}
)


def response_usage(usage: dict[str, Any] | None) -> Usage:
    """A Responses ``usage`` object as our Usage, split by kind."""
    if not usage:
        return Usage()
    given = usage.get("input_tokens_details") or {}
    made = usage.get("output_tokens_details") or {}
    return Usage(
        usage.get("input_tokens"),
        usage.get("output_tokens"),
        reasoning_tokens=made.get("reasoning_tokens"),
        cache_read_tokens=given.get("cached_tokens"),
        cache_write_tokens=given.get("cache_write_tokens"),
    )


def failed_response_error(response: dict[str, Any]) -> ProviderError:
    """``response.failed``'s error as a ProviderError (its code classified as the SDK would)."""
    error = response.get("error") or {}
    code = error.get("code") if isinstance(error, dict) else None
    message = (error.get("message") if isinstance(error, dict) else None) or "the response failed"
    kind = code
    if isinstance(code, str) and (code.startswith(_REFUSED_PREFIXES) or code in _REFUSED_CODES):
        kind = "invalid_request_error"
    return stream_error("openai", {"code": kind, "message": f"{message} ({code})"})


@dataclass
class _Reasoning:
    """One reasoning item being streamed: its block (once a delta came) and its text."""

    index: int
    started: bool = False
    text: list[str] = field(default_factory=list)
    part: tuple[str, int] | None = None
    """The summary part or content part the last delta belonged to."""


@dataclass
class ResponseReader:
    """Turns one Responses event stream into StreamChunks; block indices are unique per reply,
    given in the order the blocks begin."""

    next_index: int = 0
    texts: dict[tuple[int, int], int] = field(default_factory=dict)
    """The text block of each (output item, content part) that has begun."""
    reasoning: dict[int, _Reasoning] = field(default_factory=dict)
    arguments: dict[int, list[str]] = field(default_factory=dict)
    calls: int = 0
    stop: MessageStop | None = None

    def feed(self, event: SSEEvent) -> list[StreamChunk]:
        if self.stop is not None or event.event in _IGNORED:
            return []
        data = event_json(event.data)
        if not isinstance(data, dict):
            raise bad_response("openai", "a stream event is not a JSON object")
        kind = data.get("type") or event.event
        if kind == "response.output_text.delta" or kind == "response.refusal.delta":
            return self._text(data)
        if kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            return self._think(data, kind)
        if kind == "response.function_call_arguments.delta":
            self.arguments.setdefault(data["output_index"], []).append(data["delta"])
            return []
        if kind == "response.output_item.done":
            return self._item_done(data["output_index"], data["item"])
        if kind in ("response.completed", "response.incomplete"):
            return self._finish(data["response"])
        if kind == "response.failed":
            raise failed_response_error(data.get("response") or {})
        if kind == "error" or (kind == "message" and "error" in data):
            raise stream_error("openai", data.get("error") or data)
        return []

    def _new_index(self) -> int:
        self.next_index += 1
        return self.next_index - 1

    def _text(self, data: dict[str, Any]) -> list[StreamChunk]:
        key = (data["output_index"], data.get("content_index", 0))
        out: list[StreamChunk] = []
        index = self.texts.get(key)
        if index is None:
            index = self.texts[key] = self._new_index()
            out.append(ContentBlockStart(index))
        delta = data["delta"]
        if delta:
            out.append(ContentBlockDelta(delta, index))
        return out

    def _think(self, data: dict[str, Any], kind: str) -> list[StreamChunk]:
        output = data["output_index"]
        state = self.reasoning.get(output)
        if state is None:
            state = self.reasoning[output] = _Reasoning(self._new_index())
        part = ("summary", data.get("summary_index", 0))
        if kind == "response.reasoning_text.delta":
            part = ("content", data.get("content_index", 0))
        delta = data["delta"]
        if not isinstance(delta, str):
            raise TypeError("a reasoning delta is not text")
        out: list[StreamChunk] = []
        if not state.started:
            state.started = True
            out.append(ContentBlockStart(state.index, "reasoning"))
        elif part != state.part and state.text:
            delta = SUMMARY_SEPARATOR + delta  # a new part of the summary
        state.part = part
        if delta:
            state.text.append(delta)
            out.append(ContentBlockDelta(delta, state.index))
        return out

    def _item_done(self, output: int, item: dict[str, Any]) -> list[StreamChunk]:
        kind = item.get("type")
        if kind == "reasoning":
            return self._reasoning_done(output, item)
        if kind == "function_call":
            return [self._call(output, item)]
        if kind == "image_generation_call":
            return generated_image(item, self._new_index())
        stops = [k for k in self.texts if k[0] == output]
        return [ContentBlockStop(self.texts.pop(k)) for k in stops]

    def _reasoning_done(self, output: int, item: dict[str, Any]) -> list[StreamChunk]:
        state = self.reasoning.pop(output, None) or _Reasoning(self._new_index())
        out: list[StreamChunk] = []
        if not state.started:  # no deltas came: the item's own summary, if it has one
            text = SUMMARY_SEPARATOR.join(
                part.get("text", "") for part in item.get("summary") or () if part.get("text")
            )
            if text:
                out += [
                    ContentBlockStart(state.index, "reasoning"),
                    ContentBlockDelta(text, state.index),
                ]
                state.started, state.text = True, [text]
        if state.started:
            out.append(ContentBlockStop(state.index))
        out.append(ReasoningDone("".join(state.text), item, state.index))
        return out

    def _call(self, output: int, item: dict[str, Any]) -> ToolUse:
        fragments = self.arguments.pop(output, [])
        raw = item.get("arguments")
        if not isinstance(raw, str):
            raw = "".join(fragments)
        name = item.get("name") or ""
        try:
            params = json.loads(raw) if raw.strip() else {}
        except (ValueError, RecursionError):  # not JSON; nested past what Python decodes
            params = None
        if not isinstance(params, dict):
            raise bad_response(
                "openai", f"the arguments of tool call {name!r} are not a JSON object"
            )
        self.calls += 1
        call_id = item.get("call_id") or item.get("id")
        return ToolUse(name, params, call_id) if call_id else ToolUse(name, params)

    def _finish(self, response: dict[str, Any]) -> list[StreamChunk]:
        """Note the stop; close what no ``output_item.done`` closed (reasoning left so has no
        item to hand back: its payload is None)."""
        out: list[StreamChunk] = [ContentBlockStop(i) for i in self.texts.values()]
        for state in self.reasoning.values():
            out.append(ContentBlockStop(state.index))
            out.append(ReasoningDone("".join(state.text), None, state.index))
        self.texts.clear()
        self.reasoning.clear()
        usage = response_usage(response.get("usage"))
        reason = "end_turn"
        if response.get("status") == "incomplete" or response.get("incomplete_details"):
            why = str((response.get("incomplete_details") or {}).get("reason") or "")
            reason = _INCOMPLETE_REASONS.get(why, why or "max_tokens")
        self.stop = MessageStop("tool_use" if self.calls else reason, usage)
        return out

    def finish(self) -> StreamChunk:
        """The closing MessageStop; raises when the stream ended before the response did."""
        if self.stop is None:
            raise bad_response("openai", "the stream ended before response.completed")
        return self.stop


def generated_image(item: dict[str, Any], index: int) -> list[StreamChunk]:
    """An ``image_generation_call`` item's image (base64 ``result``, in its ``output_format``);
    nothing for a call that made none (its ``status`` failed)."""
    result = item.get("result")
    if not isinstance(result, str) or not result:
        return []
    try:
        data = base64.b64decode(result, validate=True)
    except ValueError as exc:
        raise bad_response("openai", "an image_generation_call result is not base64") from exc
    media_type = "image/" + {"jpg": "jpeg"}.get(fmt := str(item.get("output_format") or "png"), fmt)
    return [ImageDone(data, media_type, index)]
