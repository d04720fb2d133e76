"""Helpers for the provider tests: draining a stream, running a conversation on one adapter,
and checking that a request body is one the provider would accept."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import aclosing
from typing import Any

from app.domain import (
    ConversationConfig,
    DefaultModelSelectionStrategy,
    LLMConversation,
    Message,
    MessageList,
    ModelAdapter,
    ProviderError,
    RunEvent,
    StreamChunk,
    Tool,
)


async def drain(
    stream: AsyncIterator[StreamChunk],
) -> tuple[list[StreamChunk], ProviderError | None]:
    """Every chunk, and the ProviderError that ended the stream (if one did)."""
    chunks: list[StreamChunk] = []
    try:
        async for chunk in stream:
            chunks.append(chunk)
    except ProviderError as error:
        return chunks, error
    return chunks, None


def conversation(
    adapters: Sequence[ModelAdapter], messages: Sequence[Message], tools: Sequence[Tool] = ()
) -> LLMConversation:
    """A conversation over ``adapters`` (the first is the default) with these messages."""
    selector = DefaultModelSelectionStrategy(adapters, adapters[0].name)
    config = ConversationConfig(model_selector=selector, tools=tuple(tools))
    return LLMConversation(MessageList(messages), config)


async def run(conv: LLMConversation) -> tuple[list[RunEvent], ProviderError | None]:
    """Run the conversation once: its events, and the ProviderError that ended it (if any)."""
    events: list[RunEvent] = []
    try:
        async with aclosing(conv.stream()) as stream:
            async for event in stream:
                events.append(event)
    except ProviderError as error:
        return events, error
    return events, None


def check_openai_request(body: dict[str, Any]) -> None:
    """Every tool message answers a call of the assistant message before it, once; no call
    is left without its answer before the next non-tool message."""
    open_calls: set[str] = set()
    for i, message in enumerate(body["messages"]):
        role = message["role"]
        assert role in ("system", "user", "assistant", "tool"), (i, role)
        if role == "tool":
            assert message["tool_call_id"] in open_calls, (i, message)
            open_calls.discard(message["tool_call_id"])
            continue
        assert not open_calls, f"message {i}: calls {open_calls} have no result"
        if role == "assistant" and message.get("tool_calls"):
            open_calls = {call["id"] for call in message["tool_calls"]}
    assert not open_calls, f"calls {open_calls} have no result"


def check_anthropic_request(body: dict[str, Any]) -> None:
    """Roles alternate from a user turn; no system turn; no blank text; every tool_result
    follows its tool_use in the turn just before, and every tool_use gets one."""
    turns = body["messages"]
    assert turns and turns[0]["role"] == "user"
    for i, turn in enumerate(turns):
        assert turn["role"] == ("user" if i % 2 == 0 else "assistant"), (i, turn["role"])
        assert turn["content"], f"turn {i} is empty"
        for block in turn["content"]:
            if block["type"] == "text":
                assert block["text"].strip(), f"turn {i} has a blank text block"
        uses = [b["id"] for b in turn["content"] if b["type"] == "tool_use"]
        if uses:
            assert i + 1 < len(turns), f"turn {i}: tool_use without a following turn"
            results = [
                b["tool_use_id"] for b in turns[i + 1]["content"] if b["type"] == "tool_result"
            ]
            assert sorted(results) == sorted(uses), (i, uses, results)
            kinds = [b["type"] for b in turns[i + 1]["content"]]
            assert kinds[: len(results)] == ["tool_result"] * len(results), "results come first"
    last = turns[-1]
    if last["role"] == "assistant" and last["content"][-1]["type"] == "text":
        assert last["content"][-1]["text"] == last["content"][-1]["text"].rstrip()


def uncached(body: dict[str, Any]) -> dict[str, Any]:
    """A messages body as it reads without its prompt-cache breakpoints: no ``cache_control``
    on any block, the system prompt a string again (it is one text block to carry one)."""

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k != "cache_control"}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    plain: dict[str, Any] = strip(body)
    system = plain.get("system")
    if isinstance(system, list):
        plain["system"] = "".join(block["text"] for block in system)
    return plain
