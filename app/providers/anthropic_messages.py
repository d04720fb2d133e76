"""The ``anthropic`` adapter: the messages API through ``anthropic.AsyncAnthropic``, streamed.

May import the domain, the provider helpers and the ``anthropic`` SDK. Three translations: our
messages to a messages request (``anthropic_request``), the event stream to our StreamChunks
(``_EventReader``, over the shared SSE parser: no SDK object per event; thinking blocks become
reasoning blocks and a ``ReasoningDone`` each), the SDK's exceptions to ProviderError
(``errors.anthropic_error``). The SDK client sends the request (``SSEAdapter._send``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import anthropic

from app.domain import (
    ContentBlockDelta,
    ContentBlockStart,
    ContentBlockStop,
    Message,
    MessageStop,
    ProviderError,
    ReasoningDone,
    RequestOptions,
    StreamChunk,
    ToolSpec,
    ToolUse,
    Usage,
)
from app.domain.attachment_blocks import Files
from app.domain.formats import THINKING_BLOCKS
from app.providers.anthropic_request import anthropic_turns, messages_request
from app.providers.base import ProviderConfig, SSEAdapter, event_json
from app.providers.errors import anthropic_error, bad_response, stream_error
from app.providers.sse import SSEEvent

DEFAULT_ANTHROPIC_MODEL = "claude-sonnet-4-6"

__all__ = [
    "DEFAULT_ANTHROPIC_MODEL",
    "AnthropicAdapter",
    "AnthropicConfig",
    "anthropic_turns",
]


@dataclass(frozen=True)
class AnthropicConfig(ProviderConfig):
    """``ProviderConfig`` plus the ``max_tokens`` the API requires when a conversation sets none."""

    default_model: str = DEFAULT_ANTHROPIC_MODEL
    max_tokens: int = 4096
    prompt_caching: bool = True
    """Mark the stable prefix with ``cache_control`` breakpoints (docs/providers.md)."""


class AnthropicAdapter(SSEAdapter):
    """A ModelAdapter over Anthropic's messages API; a trailing assistant message is a prefill."""

    name = "anthropic"
    _sdk_errors = (anthropic.AnthropicError,)
    _endpoint = "/v1/messages"
    _stream_class = anthropic.AsyncStream

    config: AnthropicConfig
    _client: anthropic.AsyncAnthropic | None

    def __init__(
        self, config: AnthropicConfig, client: anthropic.AsyncAnthropic | None = None
    ) -> None:
        self.config = config
        self.default_model = config.default_model
        self._client = client

    @property
    def client(self) -> anthropic.AsyncAnthropic:
        """The SDK client, made on first use; its own retries are off (we retry, see base)."""
        if self._client is None:
            aiohttp = self.config.http_client == "aiohttp"
            self._client = anthropic.AsyncAnthropic(
                api_key=self.config.api_key,
                base_url=self.config.base_url or "https://api.anthropic.com",
                timeout=self.config.timeout(),
                max_retries=0,
                http_client=anthropic.DefaultAioHttpClient(timeout=self.config.timeout())
                if aiohttp
                else None,
            )
        return self._client

    def _request(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        options: RequestOptions,
        files: Files | None = None,
    ) -> dict[str, Any]:
        """The request's JSON body (``anthropic_request.messages_request``)."""
        return messages_request(
            messages,
            tools,
            options,
            model=options.model or self.default_model,
            max_tokens=self.config.max_tokens,
            files=files,
            cache=self.config.prompt_caching,
        )

    def _translator(self) -> _EventReader:
        return _EventReader()

    def _error(self, exc: BaseException) -> ProviderError:
        return anthropic_error(exc)


@dataclass
class _Block:
    """A content block being streamed: text, a tool call, thinking (plain or redacted), or
    something we pass over. ``start`` is the block as ``content_block_start`` gave it."""

    kind: str
    id: str = ""
    name: str = ""
    fragments: list[str] = field(default_factory=list)
    signature: list[str] = field(default_factory=list)
    start: dict[str, Any] = field(default_factory=dict)

    def tool_use(self) -> ToolUse:
        raw = "".join(self.fragments).strip()
        initial = self.start.get("input")
        try:
            params = json.loads(raw) if raw else initial if isinstance(initial, dict) else {}
        except (ValueError, RecursionError):  # not JSON; nested past what Python decodes
            params = None
        if not isinstance(params, dict):
            raise bad_response(
                "anthropic", f"the input of tool call {self.name!r} is not a JSON object"
            )
        return ToolUse(self.name, params, self.id)

    def reasoning(self, index: int) -> ReasoningDone:
        """The finished thinking: its whole text, and the block as received minus that text
        (its signature gathered from ``signature_delta``s) as the payload to send back."""
        if self.kind == "redacted_thinking":
            return ReasoningDone("", dict(self.start), index)
        payload = {k: v for k, v in self.start.items() if k != "thinking"}
        if self.signature:
            payload["signature"] = str(payload.get("signature") or "") + "".join(self.signature)
        return ReasoningDone("".join(self.fragments), payload, index)


@dataclass
class _EventReader:
    """Turns raw message-stream events (SSE JSON) into StreamChunks; ``ping`` and unknown
    events pass, an ``error`` event is raised as the ProviderError its type says."""

    blocks: dict[int, _Block] = field(default_factory=dict)
    usage: dict[str, Any] = field(default_factory=dict)
    stop_reason: str | None = None
    stopped: bool = False

    def feed(self, event: SSEEvent) -> list[StreamChunk]:
        kind = event.event
        if kind == "ping" or not event.data:
            return []
        data = event_json(event.data)
        if not isinstance(data, dict):
            raise bad_response("anthropic", f"a {kind} event is not a JSON object")
        if kind == "content_block_delta":
            return self._delta(data.get("index", 0), data.get("delta") or {})
        if kind == "content_block_start":
            return self._start(data.get("index", 0), data.get("content_block") or {})
        if kind == "content_block_stop":
            return self._stop(data.get("index", 0))
        if kind == "error":
            raise stream_error("anthropic", data)
        self._message_event(kind, data)
        return []

    def _message_event(self, kind: str, data: dict[str, Any]) -> None:
        if kind == "message_start":
            self.usage = _counts((data.get("message") or {}).get("usage") or {})
        elif kind == "message_delta":
            self.stop_reason = (data.get("delta") or {}).get("stop_reason") or self.stop_reason
            self.usage.update(_counts(data.get("usage") or {}))  # cumulative counts
        elif kind == "message_stop":
            self.stopped = True

    def _start(self, index: int, block: dict[str, Any]) -> list[StreamChunk]:
        kind = block.get("type", "")
        if kind == "text":
            self.blocks[index] = _Block("text")
            text = block.get("text") or ""
            start: list[StreamChunk] = [ContentBlockStart(index)]
            return start + ([ContentBlockDelta(text, index)] if text else [])
        if kind == "tool_use":
            self.blocks[index] = _Block(
                "tool_use", block.get("id", ""), block.get("name", ""), start=block
            )
            return []
        if kind in THINKING_BLOCKS:
            thinking = _Block(kind, start=block)
            self.blocks[index] = thinking
            text = (block.get("thinking") or "") if kind == "thinking" else ""
            if text:
                thinking.fragments.append(text)
            start = [ContentBlockStart(index, "reasoning")]
            return start + ([ContentBlockDelta(text, index)] if text else [])
        self.blocks[index] = _Block(kind)  # server tools: not ours to pass on
        return []

    def _delta(self, index: int, delta: dict[str, Any]) -> list[StreamChunk]:
        block = self.blocks.get(index)
        if block is None:
            raise bad_response("anthropic", f"a delta for content block {index}, never started")
        kind = delta.get("type")
        if kind == "text_delta" and block.kind == "text":
            text = delta.get("text")
            return [ContentBlockDelta(text, index)] if text else []
        if kind == "input_json_delta" and block.kind == "tool_use":
            block.fragments.append(delta.get("partial_json", ""))
        elif kind == "thinking_delta" and block.kind == "thinking":
            text = delta.get("thinking")
            if text:
                block.fragments.append(text)
                return [ContentBlockDelta(text, index)]
        elif kind == "signature_delta" and block.kind == "thinking":
            block.signature.append(delta.get("signature", ""))
        return []

    def _stop(self, index: int) -> list[StreamChunk]:
        block = self.blocks.get(index)
        if block is None:
            return []
        if block.kind == "text":
            return [ContentBlockStop(index)]
        if block.kind == "tool_use":
            return [block.tool_use()]
        if block.kind in THINKING_BLOCKS:
            return [ContentBlockStop(index), block.reasoning(index)]
        return []

    def finish(self) -> MessageStop:
        """The closing MessageStop, once the stream has ended; raises if it never stopped."""
        if not self.stopped:
            raise bad_response("anthropic", "the stream ended before its message_stop")
        return MessageStop(self.stop_reason or "end_turn", usage_of(self.usage))


def _counts(usage: dict[str, Any]) -> dict[str, Any]:
    """The usage fields that are given (a ``null`` count leaves the last one standing)."""
    return {k: v for k, v in usage.items() if v is not None}


def usage_of(usage: dict[str, Any]) -> Usage:
    """Anthropic's usage by our kinds: input is uncached plus cache writes and reads; the
    thinking part of the output from ``output_tokens_details`` when the API gives it."""
    parts = (
        usage.get("input_tokens"),
        usage.get("cache_creation_input_tokens"),
        usage.get("cache_read_input_tokens"),
    )
    first = parts[0]
    details = usage.get("output_tokens_details") or {}
    return Usage(
        input_tokens=sum(p for p in parts if isinstance(p, int)) if first is not None else None,
        output_tokens=usage.get("output_tokens"),
        reasoning_tokens=details.get("thinking_tokens"),
        cache_read_tokens=parts[2],
        cache_write_tokens=parts[1],
    )
