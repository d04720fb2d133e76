"""The ``anthropic`` adapter: the messages API through ``anthropic.AsyncAnthropic``, streamed.

May import the domain, the provider helpers and the ``anthropic`` SDK. Three translations: our
messages to a messages request (``anthropic_turns``), the event stream to our StreamChunks
(``_EventReader``), the SDK's exceptions to ProviderError (``errors.anthropic_error``).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any, cast

import anthropic
import httpx2
from anthropic.types import RawMessageStreamEvent

from app.domain import (
    ContentBlockDelta,
    ContentBlockStart,
    ContentBlockStop,
    Message,
    MessageStop,
    RequestOptions,
    StreamChunk,
    ToolSpec,
    ToolUse,
    Usage,
    to_anthropic_format,
)
from app.providers.base import ProviderConfig, RetryingAdapter
from app.providers.errors import anthropic_error, bad_response

DEFAULT_ANTHROPIC_MODEL = "claude-sonnet-4-6"

_UNSAFE_ID = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True)
class AnthropicConfig(ProviderConfig):
    """``ProviderConfig`` plus the ``max_tokens`` the API requires when a conversation sets none."""

    default_model: str = DEFAULT_ANTHROPIC_MODEL
    max_tokens: int = 4096


class AnthropicAdapter(RetryingAdapter):
    """A ModelAdapter over Anthropic's messages API; a trailing assistant message is a prefill."""

    name = "anthropic"

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
            self._client = anthropic.AsyncAnthropic(
                api_key=self.config.api_key,
                base_url=self.config.base_url or "https://api.anthropic.com",
                timeout=self.config.timeout(),
                max_retries=0,
            )
        return self._client

    def _request(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], options: RequestOptions
    ) -> dict[str, Any]:
        """The keyword arguments of ``messages.create``.

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

    async def _attempt(self, request: dict[str, Any]) -> AsyncGenerator[StreamChunk, None]:
        """One request: its events as our chunks; SDK and transport errors as ProviderError."""
        try:
            stream = await self.client.messages.create(**request)
        except (anthropic.AnthropicError, httpx2.HTTPError) as exc:
            raise anthropic_error(exc) from exc
        try:
            reader = _EventReader()
            async for event in cast(AsyncIterator[RawMessageStreamEvent], stream):
                for out in reader.feed(event):
                    yield out
            yield reader.finish()
        except (anthropic.AnthropicError, httpx2.HTTPError, httpx2.StreamError, ValueError) as exc:
            raise anthropic_error(exc) from exc
        finally:
            with suppress(httpx2.HTTPError):  # a failed close must not hide the real error
                await stream.close()  # closes the HTTP response: the server stops generating


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
        except ValueError:
            params = None
        if not isinstance(params, dict):
            raise bad_response(
                "anthropic", f"the input of tool call {self.name!r} is not a JSON object"
            )
        return ToolUse(self.name, params, self.id)


@dataclass
class _EventReader:
    """Turns raw message-stream events into StreamChunks."""

    blocks: dict[int, _Block] = field(default_factory=dict)
    input_tokens: int | None = None
    output_tokens: int | None = None
    stop_reason: str | None = None
    stopped: bool = False

    def feed(self, event: RawMessageStreamEvent) -> list[StreamChunk]:
        if event.type == "message_start":
            usage = event.message.usage
            self.input_tokens = _input_tokens(usage)
            self.output_tokens = usage.output_tokens
        elif event.type == "content_block_start":
            return self._start(event.index, event.content_block)
        elif event.type == "content_block_delta":
            return self._delta(event.index, event.delta)
        elif event.type == "content_block_stop":
            return self._stop(event.index)
        elif event.type == "message_delta":
            self.stop_reason = event.delta.stop_reason or self.stop_reason
            self.output_tokens = event.usage.output_tokens
            if event.usage.input_tokens is not None:
                self.input_tokens = _input_tokens(event.usage)
        elif event.type == "message_stop":
            self.stopped = True
        return []

    def _start(self, index: int, block: Any) -> list[StreamChunk]:
        if block.type == "text":
            self.blocks[index] = _Block("text")
            start: list[StreamChunk] = [ContentBlockStart(index)]
            return start + ([ContentBlockDelta(block.text, index)] if block.text else [])
        if block.type == "tool_use":
            initial = block.input if isinstance(block.input, dict) else {}
            self.blocks[index] = _Block("tool_use", block.id, block.name, initial=initial)
        else:
            self.blocks[index] = _Block(block.type)  # thinking, server tools: not ours to pass on
        return []

    def _delta(self, index: int, delta: Any) -> list[StreamChunk]:
        block = self.blocks.get(index)
        if block is None:
            raise bad_response("anthropic", f"a delta for content block {index}, never started")
        if delta.type == "text_delta" and block.kind == "text":
            return [ContentBlockDelta(delta.text, index)] if delta.text else []
        if delta.type == "input_json_delta" and block.kind == "tool_use":
            block.fragments.append(delta.partial_json)
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


def _input_tokens(usage: Any) -> int | None:
    """All the input tokens of a request: uncached plus cache writes and reads."""
    parts = (
        usage.input_tokens,
        getattr(usage, "cache_creation_input_tokens", None),
        getattr(usage, "cache_read_input_tokens", None),
    )
    return sum(p for p in parts if p is not None) if usage.input_tokens is not None else None
