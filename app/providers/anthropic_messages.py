"""The ``anthropic`` adapter: the messages API through ``anthropic.AsyncAnthropic``, streamed.

May import the domain, the provider helpers and the ``anthropic`` SDK. Three translations: our
messages to a messages request (``anthropic_turns``), the event stream to our StreamChunks
(``_EventReader``, over the shared SSE parser: no SDK object per event), the SDK's exceptions
to ProviderError (``errors.anthropic_error``). The SDK client sends the request
(``SSEAdapter._send``).
"""

from __future__ import annotations

import json
import re
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
    RequestOptions,
    StreamChunk,
    ToolSpec,
    ToolUse,
    Usage,
    to_anthropic_format,
)
from app.providers.base import ProviderConfig, SSEAdapter, event_json
from app.providers.errors import anthropic_error, bad_response, stream_error
from app.providers.sse import SSEEvent

DEFAULT_ANTHROPIC_MODEL = "claude-sonnet-4-6"

_UNSAFE_ID = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True)
class AnthropicConfig(ProviderConfig):
    """``ProviderConfig`` plus the ``max_tokens`` the API requires when a conversation sets none."""

    default_model: str = DEFAULT_ANTHROPIC_MODEL
    max_tokens: int = 4096


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
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], options: RequestOptions
    ) -> dict[str, Any]:
        """The request's JSON body.

        ``options.temperature`` is not sent: the API version this SDK speaks has no sampling
        temperature (docs/providers.md).
        """
        system, turns = anthropic_turns(messages)
        request: dict[str, Any] = {
            "model": options.model or self.default_model,
            "max_tokens": options.max_output_tokens or self.config.max_tokens,
            "messages": turns,
            "stream": True,
        }
        if system:
            request["system"] = system
        if tools:
            request["tools"] = [anthropic_tool(t) for t in tools]
        return request

    def _translator(self) -> _EventReader:
        return _EventReader()

    def _error(self, exc: BaseException) -> ProviderError:
        return anthropic_error(exc)


def anthropic_tool(tool: ToolSpec) -> dict[str, Any]:
    """A tool as the messages API declares it."""
    return {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}


def anthropic_turns(messages: Sequence[Message]) -> tuple[str, list[dict[str, Any]]]:
    """``(system, messages)`` as the API takes them, from the domain's Anthropic shape.

    Pending calls are left out; blank text blocks are dropped (the API refuses them) and turns
    left empty with them; same-role turns are merged; tool ids are made safe; a final assistant
    turn is a prefill, so its trailing whitespace is cut (the API refuses that too).
    """
    shaped = to_anthropic_format(messages, include_pending=False)
    turns: list[dict[str, Any]] = []
    for turn in shaped["messages"]:
        blocks = [_safe_block(b) for b in turn["content"] if not _blank(b)]
        if not blocks:
            continue
        if turns and turns[-1]["role"] == turn["role"]:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": turn["role"], "content": blocks})
    _trim_prefill(turns)
    return shaped["system"], turns


def _blank(block: dict[str, Any]) -> bool:
    return block.get("type") == "text" and not str(block.get("text", "")).strip()


def _safe_block(block: dict[str, Any]) -> dict[str, Any]:
    """The block with a tool id the API accepts (``[A-Za-z0-9_-]``), kept consistent per id."""
    for key in ("id", "tool_use_id"):
        if key in block and block.get("type") in ("tool_use", "tool_result"):
            return {**block, key: _UNSAFE_ID.sub("_", str(block[key]))}
    return block


def _trim_prefill(turns: list[dict[str, Any]]) -> None:
    """Cut trailing whitespace off a final assistant turn, dropping what becomes empty."""
    while turns and turns[-1]["role"] == "assistant":
        blocks = turns[-1]["content"]
        last = blocks[-1]
        if last.get("type") != "text":
            return
        text = str(last["text"]).rstrip()
        if text:
            blocks[-1] = {**last, "text": text}
            return
        blocks.pop()
        if not blocks:
            turns.pop()


@dataclass
class _Block:
    """A content block being streamed: text, a tool call, or something we pass over."""

    kind: str
    id: str = ""
    name: str = ""
    fragments: list[str] = field(default_factory=list)
    initial: dict[str, Any] = field(default_factory=dict)

    def tool_use(self) -> ToolUse:
        raw = "".join(self.fragments).strip()
        try:
            params = json.loads(raw) if raw else self.initial
        except (ValueError, RecursionError):  # not JSON; nested past what Python decodes
            params = None
        if not isinstance(params, dict):
            raise bad_response(
                "anthropic", f"the input of tool call {self.name!r} is not a JSON object"
            )
        return ToolUse(self.name, params, self.id)


@dataclass
class _EventReader:
    """Turns raw message-stream events (SSE JSON) into StreamChunks; ``ping`` and unknown
    events pass, an ``error`` event is raised as the ProviderError its type says."""

    blocks: dict[int, _Block] = field(default_factory=dict)
    input_tokens: int | None = None
    output_tokens: int | None = None
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
            usage = (data.get("message") or {}).get("usage") or {}
            self.input_tokens = _input_tokens(usage)
            self.output_tokens = usage.get("output_tokens")
        elif kind == "message_delta":
            self.stop_reason = (data.get("delta") or {}).get("stop_reason") or self.stop_reason
            usage = data.get("usage") or {}
            self.output_tokens = usage.get("output_tokens", self.output_tokens)
            if usage.get("input_tokens") is not None:
                self.input_tokens = _input_tokens(usage)
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
            initial = block.get("input")
            self.blocks[index] = _Block(
                "tool_use",
                block.get("id", ""),
                block.get("name", ""),
                initial=initial if isinstance(initial, dict) else {},
            )
        else:
            self.blocks[index] = _Block(kind)  # thinking, server tools: not ours to pass on
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
        return []

    def _stop(self, index: int) -> list[StreamChunk]:
        block = self.blocks.get(index)
        if block is None or block.kind not in ("text", "tool_use"):
            return []
        return [ContentBlockStop(index) if block.kind == "text" else block.tool_use()]

    def finish(self) -> MessageStop:
        """The closing MessageStop, once the stream has ended; raises if it never stopped."""
        if not self.stopped:
            raise bad_response("anthropic", "the stream ended before its message_stop")
        return MessageStop(
            self.stop_reason or "end_turn", Usage(self.input_tokens, self.output_tokens)
        )


def _input_tokens(usage: dict[str, Any]) -> int | None:
    """All the input tokens of a request: uncached plus cache writes and reads."""
    parts = (
        usage.get("input_tokens"),
        usage.get("cache_creation_input_tokens"),
        usage.get("cache_read_input_tokens"),
    )
    first = parts[0]
    return sum(p for p in parts if isinstance(p, int)) if first is not None else None
