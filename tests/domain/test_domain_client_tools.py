"""Client tools: the run stops with the call pending; its result is added once, then it goes on."""

from __future__ import annotations

import pytest

from app.domain import (
    Attachment,
    ConversationConfigurationError,
    DeltaApplicationError,
    LLMPromptBuilder,
    MessageList,
    Role,
    TextMessage,
    Tool,
    ToolCallMessage,
    ToolResult,
)
from tests.domain.domain_support import (
    ScriptedAdapter,
    conversation_on,
    text_reply,
    texts,
    tool_reply,
)

ASK = Tool.client(
    "ask_user",
    "Ask the user a question.",
    {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
)


def local_add(a: int, b: int) -> int:
    """Add on the server."""
    return a + b


async def test_client_tool_left_pending_then_completed_once(llm: LLMPromptBuilder) -> None:
    conversation = llm.tools(ASK).request('call ask_user {"q": "name?"}').prompt_conversation()
    [pending] = [m async for m in conversation]
    assert pending == ToolCallMessage("ask_user", "call_1", {"q": "name?"}, pending=True)
    assert conversation.status == "requires_action"
    assert conversation.messages.pending_tool_calls() == [(1, pending)]
    assert [m async for m in conversation] == []  # nothing to do while it waits

    conversation.add_tool_result("call_1", "Ada")
    assert conversation.status == "idle"
    assert conversation.messages[1] == pending.completed("Ada")
    assert [m async for m in conversation] == [TextMessage("Ada", Role.ASSISTANT)]

    with pytest.raises(DeltaApplicationError, match="'call_1' already has its result"):
        conversation.add_tool_result("call_1", "Grace")
    assert conversation.messages[1].result == "Ada"  # type: ignore[union-attr]
    assert len(conversation.messages) == 3


async def test_completion_through_the_builder_and_a_second_run(llm: LLMPromptBuilder) -> None:
    conversation = llm.tools(ASK).request('call ask_user {"q": "x"}').prompt_conversation()
    _ = [m async for m in conversation]
    conversation.continuation.tool_result("call_1", {"answer": 42}).prompt_conversation()
    assert texts([m async for m in conversation]) == ['{"answer": 42}']
    again = conversation.continuation.tool_result("call_1", "twice")
    with pytest.raises(DeltaApplicationError, match="already has its result"):
        again.prompt_conversation()


async def test_completing_inside_the_loop_lets_the_same_iteration_go_on() -> None:
    questions = (("ask_user", {"q": "a"}, "q1"), ("ask_user", {"q": "b"}, "q2"))
    adapter = ScriptedAdapter([tool_reply("Two questions.", *questions), text_reply("Thanks!")])
    conversation = conversation_on(adapter, MessageList([TextMessage("hi")]), tools=(ASK,))
    seen = []
    async for message in conversation:
        seen.append(message)
        if isinstance(message, ToolCallMessage) and message.pending:
            conversation.add_tool_result(message.tool_call_id, message.arguments["q"].upper())
    assert [getattr(m, "tool_call_id", None) for m in seen] == ["q1", "q2", None]
    assert seen[-1] == TextMessage("Thanks!", Role.ASSISTANT)
    assert [m.result for m in adapter.requests[1].messages[1:3]] == ["A", "B"]  # type: ignore[attr-defined]


async def test_server_and_client_calls_of_one_reply() -> None:
    adapter = ScriptedAdapter(
        [tool_reply("", ("local_add", {"a": 1, "b": 2}, "s1"), ("ask_user", {"q": "ok?"}, "u1"))]
    )
    conversation = conversation_on(adapter, MessageList([TextMessage("hi")]))
    conversation.apply_config_deltas({"tools": [local_add, ASK]})
    server, client = [m async for m in conversation]
    assert server.result == 3 and not server.pending  # type: ignore[attr-defined]
    assert client.pending  # type: ignore[attr-defined]
    assert conversation.status == "requires_action" and len(adapter.requests) == 1


async def test_several_results_at_once_converted_to_json() -> None:
    adapter = ScriptedAdapter(
        [tool_reply("", ("ask_user", {"q": "a"}, "q1"), ("ask_user", {"q": "b"}, "q2"))]
    )
    conversation = conversation_on(adapter, MessageList([TextMessage("hi")]), tools=(ASK,))
    _ = [m async for m in conversation]
    with pytest.raises(DeltaApplicationError, match="tool result 1: tool call 'q1' already"):
        conversation.apply_delta(tool_results=[ToolResult("q1", 1), ToolResult("q1", 2)])
    with pytest.raises(DeltaApplicationError, match="error must be a string or null, not int"):
        conversation.apply_delta(tool_results=[ToolResult("q1", None, 5)])  # type: ignore[arg-type]
    with pytest.raises(DeltaApplicationError, match="tool result 0: a result or an error, not"):
        conversation.apply_delta(tool_results=[ToolResult("q1", 1, "down")])
    with pytest.raises(DeltaApplicationError, match="tool result 0 is a dict"):
        conversation.apply_delta(tool_results=[{"tool_call_id": "q1"}])  # type: ignore[list-item]
    assert conversation.status == "requires_action"
    conversation.apply_delta(
        [TextMessage("and then?")],
        tool_results=[ToolResult("q1", {2, 1}), ToolResult("q2", error=LookupError("no"))],  # type: ignore[arg-type]
    )
    first, second = conversation.messages[1], conversation.messages[2]
    assert first.result == [1, 2] and second.error == "LookupError: no"  # type: ignore[union-attr]
    assert conversation.messages[-1] == TextMessage("and then?")
    conversation.messages.to_dict()  # serializable


async def test_prompt_cannot_finish_a_run_waiting_for_the_client(llm: LLMPromptBuilder) -> None:
    with pytest.raises(ConversationConfigurationError, match=r"client tool calls \('call_1'\)"):
        await llm.tools(ASK).request('call ask_user {"q": "?"}').prompt()


def test_the_latest_call_of_a_repeated_id_is_the_one_completed() -> None:
    older = ToolCallMessage("ask_user", "call_1", {}, result="old")
    newer = ToolCallMessage("ask_user", "call_1", {}, pending=True)
    messages = MessageList([older, TextMessage("again"), newer])
    assert messages.find_tool_call("call_1") == (2, newer)
    assert messages.find_tool_call("call_2") is None


async def test_message_appended_marks_the_pending_call_as_the_runs_last_message() -> None:
    from app.domain import ConversationConfig, DefaultModelSelectionStrategy, LLMConversation, Tool
    from app.domain.run import MessageAppended
    from app.providers import OfflineAdapter

    config = ConversationConfig(
        model_selector=DefaultModelSelectionStrategy([OfflineAdapter()]),
        tools=(Tool.client("lookup"),),
    )
    conversation = LLMConversation(config=config)
    conversation.add("user", 'call lookup {"q": 1}')
    appended = [e async for e in conversation.stream() if isinstance(e, MessageAppended)]
    assert [e.last for e in appended] == [True]
    assert appended[0].message.pending  # type: ignore[union-attr]


async def test_a_result_carries_its_attachments_onto_the_call() -> None:
    chart = Attachment("f" * 32, "image/png", "chart.png", 120, 8, 8)
    adapter = ScriptedAdapter([tool_reply("", ("ask_user", {"q": "a"}, "q1"))])
    conversation = conversation_on(adapter, MessageList([TextMessage("hi")]), tools=(ASK,))
    _ = [m async for m in conversation]
    conversation.apply_delta(tool_results=[ToolResult("q1", "drawn", attachments=(chart,))])
    call = conversation.messages[-1]
    assert isinstance(call, ToolCallMessage) and not call.pending
    assert (call.result, call.attachments) == ("drawn", (chart,))
