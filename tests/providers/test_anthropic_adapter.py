"""The ``anthropic`` adapter through the real SDK against a fake messages server: what it
yields, what a conversation stores, and what went upstream."""

from __future__ import annotations

from typing import Any

from app.domain import (
    AgentMessage,
    ContentBlockDelta,
    ContentBlockStart,
    ContentBlockStop,
    MessageStop,
    ReasoningDone,
    RequestOptions,
    Role,
    TextMessage,
    Tool,
    ToolCallMessage,
    ToolSpec,
    ToolUse,
    Usage,
)
from app.providers.anthropic_messages import AnthropicAdapter, anthropic_turns
from app.providers.anthropic_request import EPHEMERAL

from . import wire
from .fake_server import FakeServer, Reply
from .helpers import check_anthropic_request, conversation, drain, run, uncached

OPTIONS = RequestOptions()


def get_weather(city: str) -> dict[str, Any]:
    """Weather in a city."""
    return {"city": city, "temp_c": 21}


async def test_text(server: FakeServer, anthropic_adapter: AnthropicAdapter) -> None:
    server.script(Reply(events=wire.an_text("Hel", "lo")))
    messages = [
        AgentMessage("Be brief."),
        TextMessage("Some context."),
        TextMessage("Say hello"),
        AgentMessage("Never shout."),
    ]
    chunks, error = await drain(anthropic_adapter.stream_message(messages, [], OPTIONS))
    assert error is None
    assert chunks == [
        ContentBlockStart(0),
        ContentBlockDelta("Hel"),
        ContentBlockDelta("lo"),
        ContentBlockStop(0),
        MessageStop("end_turn", Usage(12, 5)),
    ]
    (sent,) = server.received
    assert sent.path == "/v1/messages"
    assert sent.headers["authorization"] == "Bearer sk-ant-test"
    assert sent.body["system"] == [
        {"type": "text", "text": "Be brief.\n\nNever shout.", "cache_control": EPHEMERAL}
    ]
    body = uncached(sent.body)
    assert body["model"] == "claude-test" and body["max_tokens"] == 4096
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Some context."},
                {"type": "text", "text": "Say hello"},
            ],
        }
    ]


async def test_options_and_tools_are_sent(
    server: FakeServer, anthropic_adapter: AnthropicAdapter
) -> None:
    server.script(Reply(events=wire.an_text("ok")))
    spec = ToolSpec("get_weather", "Weather.", {"type": "object", "properties": {}})
    options = RequestOptions(model="claude-opus-4-8", temperature=1.7, max_output_tokens=64)
    response = await anthropic_adapter.send_message([TextMessage("x")], [spec], options)
    assert response.text == "ok"
    body = uncached(server.bodies[0])
    assert (body["model"], body["max_tokens"]) == ("claude-opus-4-8", 64)
    assert "temperature" not in body  # the messages API has none
    assert body["tools"] == [
        {"name": "get_weather", "description": "Weather.", "input_schema": spec.parameters}
    ]
    assert "system" not in body


async def test_tool_call_in_fragments(
    server: FakeServer, anthropic_adapter: AnthropicAdapter
) -> None:
    reply = [
        wire.an_start(),
        *wire.an_text_block(0, "Let me look."),
        *wire.an_tool_block(1, "toolu_1", "get_weather", '{"ci', 'ty": "Par', 'is"}'),
        *wire.an_stop("tool_use"),
    ]
    server.script(Reply(events=reply), Reply(events=wire.an_text("21 °C in Paris.")))
    tools = [Tool.from_function(get_weather)]
    conv = conversation([anthropic_adapter], [TextMessage("Weather in Paris?")], tools)
    events, error = await run(conv)
    assert error is None
    assert ToolUse("get_weather", {"city": "Paris"}, "toolu_1") in events
    assert MessageStop("tool_use", Usage(12, 5)) in events
    assert conv.messages[1] == ToolCallMessage(
        "get_weather",
        "toolu_1",
        {"city": "Paris"},
        {"city": "Paris", "temp_c": 21},
        None,
        "Let me look.",
    )
    second = uncached(server.bodies[1])
    check_anthropic_request(second)
    assert second["messages"][1:] == [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me look."},
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "get_weather",
                    "input": {"city": "Paris"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": '{"city": "Paris", "temp_c": 21}',
                }
            ],
        },
    ]


async def test_lone_surrogates_in_text_and_input_become_u_fffd(
    server: FakeServer, anthropic_adapter: AnthropicAdapter
) -> None:
    # json.dumps writes "\ud800" as the escape jiter refuses: in a text delta, in an input
    # fragment, and in the input's own JSON text.
    reply = [
        wire.an_start(),
        *wire.an_text_block(0, "a\ud800b"),
        *wire.an_tool_block(1, "toolu_1", "get_weather", '{"city": "P\ud800', 'Q\\udc00"}'),
        *wire.an_stop("tool_use"),
    ]
    server.script(Reply(events=reply), Reply(events=wire.an_text("x\udfffy")))
    tools = [Tool.from_function(get_weather)]
    conv = conversation([anthropic_adapter], [TextMessage("Weather in Paris?")], tools)
    events, error = await run(conv)
    assert error is None
    assert ContentBlockDelta("a\ufffdb") in events
    assert ToolUse("get_weather", {"city": "P\ufffdQ\ufffd"}, "toolu_1") in events
    assert conv.messages[1] == ToolCallMessage(
        "get_weather",
        "toolu_1",
        {"city": "P\ufffdQ\ufffd"},
        {"city": "P\ufffdQ\ufffd", "temp_c": 21},
        None,
        "a\ufffdb",
    )
    assert conv.messages[2] == TextMessage("x\ufffdy", Role.ASSISTANT)


async def test_two_parallel_calls(server: FakeServer, anthropic_adapter: AnthropicAdapter) -> None:
    reply = [
        wire.an_start(),
        *wire.an_tool_block(0, "toolu_a", "lookup", '{"q": ', '"a"}'),
        *wire.an_tool_block(1, "toolu_b", "lookup", '{"q": "b"}'),
        *wire.an_stop("tool_use"),
    ]
    server.script(Reply(events=reply), Reply(events=wire.an_text("Both found.")))
    conv = conversation(
        [anthropic_adapter], [TextMessage("Look up a and b")], [Tool.client("lookup")]
    )
    events, error = await run(conv)
    assert error is None
    assert [e for e in events if isinstance(e, ToolUse)] == [
        ToolUse("lookup", {"q": "a"}, "toolu_a"),
        ToolUse("lookup", {"q": "b"}, "toolu_b"),
    ]
    assert conv.status == "requires_action"
    conv.add_tool_result("toolu_a", {"found": "a"})
    conv.add_tool_result("toolu_b", error="timed out")
    _, error = await run(conv)
    assert error is None and conv.messages[-1] == TextMessage("Both found.", Role.ASSISTANT)
    second = uncached(server.bodies[1])
    check_anthropic_request(second)
    assistant, results = second["messages"][1:]
    assert [b["id"] for b in assistant["content"]] == ["toolu_a", "toolu_b"]
    assert results["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_a", "content": '{"found": "a"}'},
        {
            "type": "tool_result",
            "tool_use_id": "toolu_b",
            "content": "Error: timed out",
            "is_error": True,
        },
    ]


async def test_trailing_assistant_is_a_prefill(
    server: FakeServer, anthropic_adapter: AnthropicAdapter
) -> None:
    server.script(Reply(events=wire.an_text(" 42.")))
    conv = conversation([anthropic_adapter], [TextMessage("The answer?")])
    conv.continuation.assistant("Sure.").request("Really, the answer?").prompt_conversation()
    conv.messages.append(TextMessage("The answer is \n", Role.ASSISTANT))
    _, error = await run(conv)
    assert error is None
    body = uncached(server.bodies[0])
    check_anthropic_request(body)
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "The answer?"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Sure."}]},
        {"role": "user", "content": [{"type": "text", "text": "Really, the answer?"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "The answer is"}]},
    ]
    assert conv.messages[-1] == TextMessage(" 42.", Role.ASSISTANT)


def test_blank_text_is_never_sent() -> None:
    messages = [
        TextMessage("   "),
        TextMessage("Hi"),
        TextMessage("", Role.ASSISTANT),
        TextMessage("Again"),
        TextMessage(" \n", Role.ASSISTANT),
    ]
    system, turns = anthropic_turns(messages)
    assert system == ""
    assert turns == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "Hi"}, {"type": "text", "text": "Again"}],
        }
    ]


def test_tool_ids_are_made_safe_consistently() -> None:
    call = ToolCallMessage("t", "call:1/x", {}, result="ok")
    _, turns = anthropic_turns([TextMessage("go"), call])
    assert turns[1]["content"][0]["id"] == "call_1_x"
    assert turns[2]["content"][0]["tool_use_id"] == "call_1_x"


def test_no_exact_token_counter(anthropic_adapter: AnthropicAdapter) -> None:
    assert getattr(anthropic_adapter, "token_counter", None) is None


async def test_pings_are_passed_over_and_thinking_is_a_reasoning_block(
    server: FakeServer, anthropic_adapter: AnthropicAdapter
) -> None:
    thinking = {"type": "thinking", "thinking": "", "signature": ""}
    events = [
        wire.an_start(),
        'event: ping\ndata: {"type": "ping"}\n\n',
        wire.an_event("content_block_start", {"index": 0, "content_block": thinking}),
        wire.an_event(
            "content_block_delta",
            {"index": 0, "delta": {"type": "thinking_delta", "thinking": "hmm"}},
        ),
        wire.an_event("content_block_stop", {"index": 0}),
        *wire.an_text_block(1, "Answer."),
        *wire.an_stop(),
    ]
    server.script(Reply(events=events))
    chunks, error = await drain(anthropic_adapter.stream_message([TextMessage("x")], [], OPTIONS))
    assert error is None
    assert chunks[:7] == [
        ContentBlockStart(0, "reasoning"),
        ContentBlockDelta("hmm", 0),
        ContentBlockStop(0),
        ReasoningDone("hmm", {"type": "thinking", "signature": ""}, 0),
        ContentBlockStart(1),
        ContentBlockDelta("Answer.", 1),
        ContentBlockStop(1),
    ]


async def test_send_message_takes_messages_and_tools_as_seed_004_declares(
    server: FakeServer, anthropic_adapter: AnthropicAdapter
) -> None:
    server.script(Reply(events=wire.an_text("Hel", "lo")))
    reply = await anthropic_adapter.send_message([TextMessage("Say hello")], [])
    assert (reply.text, reply.stop_reason) == ("Hello", "end_turn")
    (sent,) = server.received
    assert uncached(sent.body)["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Say hello"}]}
    ]
