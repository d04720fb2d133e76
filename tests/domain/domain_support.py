"""Helpers of the domain tests: a scripted adapter that yields exact chunks, and builders.

The scripted adapter is a real ModelAdapter: each call to ``stream_message`` plays the next
script, records what it was sent, and counts how often its stream was opened and closed.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.domain import (
    ContentBlockDelta,
    ContentBlockStart,
    ContentBlockStop,
    ConversationConfig,
    DefaultModelSelectionStrategy,
    LLMConversation,
    Message,
    MessageList,
    MessageStop,
    ModelResponse,
    RequestOptions,
    StreamChunk,
    ToolSpec,
    ToolUse,
    Usage,
    collect_response,
)


class Hang:
    """A script step that blocks until the test cancels or closes the stream."""


HANG = Hang()

Step = StreamChunk | BaseException | Hang


def text_reply(*deltas: str) -> list[Step]:
    """A reply of text only, one ContentBlockDelta per piece."""
    return [
        ContentBlockStart(0),
        *(ContentBlockDelta(d) for d in deltas),
        ContentBlockStop(0),
        MessageStop("end_turn", Usage(10, len(deltas))),
    ]


def tool_reply(text: str, *calls: tuple[str, dict[str, Any], str]) -> list[Step]:
    """A reply that calls tools: ``(tool_name, params, id)`` each, after optional text."""
    head: list[Step] = [ContentBlockStart(0)]
    if text:
        head.append(ContentBlockDelta(text))
    head.append(ContentBlockStop(0))
    uses: list[Step] = [ToolUse(name, params, call_id) for name, params, call_id in calls]
    return [*head, *uses, MessageStop("tool_use")]


@dataclass
class Request:
    """What the adapter was sent by one model round."""

    messages: list[Message]
    tools: list[ToolSpec]
    options: RequestOptions


@dataclass
class ScriptedAdapter:
    """Plays one script per model round; records requests; counts opened and closed streams."""

    scripts: list[list[Step]]
    name: str = "scripted"
    default_model: str = "script-1"
    requests: list[Request] = field(default_factory=list)
    opened: int = 0
    closed: int = 0
    sent: list[StreamChunk] = field(default_factory=list)

    async def send_message(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], options: RequestOptions
    ) -> ModelResponse:
        return await collect_response(self.stream_message(messages, tools, options))

    async def stream_message(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], options: RequestOptions
    ) -> AsyncIterator[StreamChunk]:
        self.requests.append(Request(list(messages), list(tools), options))
        script = self.scripts.pop(0)
        self.opened += 1
        try:
            for step in script:
                await asyncio.sleep(0)
                if isinstance(step, Hang):
                    await asyncio.Event().wait()
                elif isinstance(step, BaseException):
                    raise step
                else:
                    self.sent.append(step)
                    yield step
        finally:
            self.closed += 1


def selector(*adapters: Any) -> DefaultModelSelectionStrategy:
    return DefaultModelSelectionStrategy(adapters)


def conversation_on(
    adapter: Any, messages: MessageList | None = None, **config: Any
) -> LLMConversation:
    """A conversation that runs on ``adapter`` with the given config fields."""
    return LLMConversation(messages, ConversationConfig(model_selector=selector(adapter), **config))


def texts(messages: Any) -> list[str]:
    """The text of each message (a tool call's ``message``)."""
    return [getattr(m, "text", getattr(m, "message", "")) for m in messages]
