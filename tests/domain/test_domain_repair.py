"""History repair (issue 14): each rule on a small history, what it keeps, and that the stored
history is never changed; plus the seed's tool errors (an exception serializes as its text)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from app.domain import (
    AgentMessage,
    Message,
    MessageList,
    Role,
    TextMessage,
    ToolCallMessage,
)
from app.domain.repair import INTERRUPTED, repair_history, repair_with_sources

from .domain_support import ScriptedAdapter, conversation_on, text_reply

USER, ASSISTANT = Role.USER, Role.ASSISTANT


def call(call_id: str, message: str = "", **outcome: Any) -> ToolCallMessage:
    return ToolCallMessage("clock", call_id, {}, message=message, **outcome)


CASES: list[tuple[str, list[Message], list[Message]]] = [
    (
        "a call with no result gets an interrupted error",
        [TextMessage("q"), call("c1", pending=True)],
        [TextMessage("q"), call("c1", error=INTERRUPTED)],
    ),
    (
        "a result whose call id was already used is dropped",
        [TextMessage("q"), call("c1", result=1), call("c1", "again", result=2)],
        [TextMessage("q"), call("c1", result=1)],
    ),
    (
        "two user turns are merged",
        [TextMessage("a"), TextMessage("b")],
        [TextMessage("a\n\nb")],
    ),
    (
        "an empty incomplete reply is dropped, and the user turns around it merge",
        [TextMessage("a"), TextMessage(" ", ASSISTANT, incomplete=True), TextMessage("b")],
        [TextMessage("a\n\nb")],
    ),
    (
        "an incomplete reply keeps its text",
        [TextMessage("a"), TextMessage("half an ans", ASSISTANT, incomplete=True)],
        [TextMessage("a"), TextMessage("half an ans", ASSISTANT)],
    ),
    (
        "assistant text before a call becomes the call's text",
        [TextMessage("a"), TextMessage("let me see", ASSISTANT), call("c1", result=1)],
        [TextMessage("a"), call("c1", "let me see", result=1)],
    ),
    (
        "system prompts stay where they are",
        [AgentMessage("s"), TextMessage("a"), AgentMessage("t"), TextMessage("b")],
        [AgentMessage("s"), TextMessage("a"), AgentMessage("t"), TextMessage("b")],
    ),
]


@pytest.mark.parametrize(("name", "stored", "sent"), CASES, ids=[c[0] for c in CASES])
def test_repair_rule(name: str, stored: list[Message], sent: list[Message]) -> None:
    before = list(stored)
    assert repair_history(stored) == sent, name
    assert stored == before  # the stored history is untouched


def test_repair_names_the_sources_of_each_message() -> None:
    stored = [TextMessage("a"), TextMessage("", ASSISTANT, incomplete=True), TextMessage("b")]
    assert [r.sources for r in repair_with_sources(stored)] == [(0, 2)]


async def test_the_run_sends_the_repaired_history_and_stores_the_original() -> None:
    adapter = ScriptedAdapter([text_reply("fine")])
    stored: list[Message] = [TextMessage("a"), TextMessage("b")]
    conversation = conversation_on(adapter, MessageList(stored))
    _ = [m async for m in conversation]
    assert adapter.requests[0].messages == [TextMessage("a\n\nb")]
    assert list(conversation.messages) == [*stored, TextMessage("fine", ASSISTANT)]


# --- seed 001's tool errors ----------------------------------------------------------------


def test_a_tool_error_may_be_the_exception_the_tool_raised() -> None:
    failed = ToolCallMessage("clock", "c1", {}, None, ValueError("no clock"))
    data = MessageList([failed]).to_dict()
    assert data["messages"][0]["error"] == "no clock"
    assert data["version"] == "1.0"
    loaded = MessageList.from_dict(json.loads(json.dumps(data)))[0]
    assert isinstance(loaded, ToolCallMessage) and loaded.error == "no clock"
    assert loaded.result_text() == failed.result_text() == "Error: no clock"


def test_an_exception_without_a_message_serializes_as_its_class_name() -> None:
    failed = ToolCallMessage("clock", "c1", error=KeyError())
    assert failed.to_serializable_dict()["error"] == "KeyError"


def test_seed_001_execute_tool_call_flow_serializes() -> None:
    def execute_tool_call(name: str, arguments: dict[str, Any]) -> tuple[Any, Exception | None]:
        try:
            raise RuntimeError(f"{name} is broken")
        except Exception as e:  # as the seed's _execute_tool_call does
            return None, e

    result, error = execute_tool_call("clock", {})
    message = ToolCallMessage(
        message="", tool_name="clock", tool_call_id="c1", arguments={}, result=result, error=error
    )
    assert MessageList([message]).to_dict()["messages"][0]["error"] == "clock is broken"


def test_an_error_of_another_type_is_refused() -> None:
    with pytest.raises(TypeError, match="error must be a str, an exception or None"):
        ToolCallMessage("clock", "c1", error=42)  # type: ignore[arg-type]
