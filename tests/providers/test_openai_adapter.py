"""The ``openai`` adapter through the real SDK against a fake chat-completions server: what it
yields, what a conversation stores, and what went upstream."""

from __future__ import annotations

import json
from typing import Any

import pytest

from app.domain import (
    AgentMessage,
    ContentBlockDelta,
    ContentBlockStart,
    ContentBlockStop,
    MessageStop,
    RequestOptions,
    Role,
    TextMessage,
    Tool,
    ToolCallMessage,
    ToolSpec,
    ToolUse,
    Usage,
)
from app.providers.openai_chat import OpenAIAdapter, OpenAIConfig

from . import wire
from .fake_server import FakeServer, Reply
from .helpers import check_openai_request, conversation, drain, run

OPTIONS = RequestOptions()
WEATHER = ToolSpec("get_weather", "Weather in a city.", {"type": "object", "properties": {}})


def get_weather(city: str) -> dict[str, Any]:
    """Weather in a city."""
    return {"city": city, "temp_c": 21}


async def test_text(server: FakeServer, openai_adapter: OpenAIAdapter) -> None:
    server.script(Reply(events=wire.oa_text("Hel", "lo")))
    messages = [AgentMessage("Be brief."), TextMessage("Hi"), TextMessage("Hi!", Role.ASSISTANT)]
    messages.append(TextMessage("Say hello"))
    chunks, error = await drain(openai_adapter.stream_message(messages, [], OPTIONS))
    assert error is None
    assert chunks == [
        ContentBlockStart(0),
        ContentBlockDelta("Hel"),
        ContentBlockDelta("lo"),
        ContentBlockStop(0),
        MessageStop("end_turn", Usage(10, 3)),
    ]
    (sent,) = server.received
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == "Bearer sk-test"
    assert sent.body["model"] == "gpt-4o-mini"
    assert sent.body["stream"] is True
    assert sent.body["stream_options"] == {"include_usage": True}
    assert sent.body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hi!"},
        {"role": "user", "content": "Say hello"},
    ]
    assert "tools" not in sent.body and "temperature" not in sent.body


async def test_options_and_tools_are_sent(
    server: FakeServer, openai_adapter: OpenAIAdapter
) -> None:
    server.script(Reply(events=wire.oa_text("ok")))
    options = RequestOptions(model="gpt-4.1", temperature=0.3, max_output_tokens=50)
    response = await openai_adapter.send_message([TextMessage("x")], [WEATHER], options)
    assert response.text == "ok"
    body = server.bodies[0]
    assert (body["model"], body["temperature"], body["max_completion_tokens"]) == (
        "gpt-4.1",
        0.3,
        50,
    )
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Weather in a city.",
                "parameters": {"type": "object", "properties": {}},
            },
        }
    ]


async def test_tool_call_in_fragments(server: FakeServer, openai_adapter: OpenAIAdapter) -> None:
    call = [
        wire.oa_chunk({"role": "assistant", "content": "Let me look."}),
        wire.oa_call(0, "call_1", "get_weather", ""),
        wire.oa_call(0, None, None, '{"ci'),
        wire.oa_call(0, None, None, 'ty": "Par'),
        wire.oa_call(0, None, None, 'is"}'),
        wire.oa_chunk({}, finish="tool_calls"),
        wire.oa_usage(20, 8),
        wire.OA_DONE,
    ]
    server.script(Reply(events=call), Reply(events=wire.oa_text("It is 21 °C in Paris.")))
    conv = conversation(
        [openai_adapter], [TextMessage("Weather in Paris?")], [Tool.from_function(get_weather)]
    )
    events, error = await run(conv)
    assert error is None
    assert ToolUse("get_weather", {"city": "Paris"}, "call_1") in events
    assert MessageStop("tool_use", Usage(20, 8)) in events
    stored = list(conv.messages)
    assert stored[1] == ToolCallMessage(
        "get_weather",
        "call_1",
        {"city": "Paris"},
        {"city": "Paris", "temp_c": 21},
        None,
        "Let me look.",
    )
    assert stored[2] == TextMessage("It is 21 °C in Paris.", Role.ASSISTANT)
    second = server.bodies[1]
    check_openai_request(second)
    assert second["messages"][1:] == [
        {
            "role": "assistant",
            "content": "Let me look.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": '{"city": "Paris", "temp_c": 21}'},
    ]


async def test_lone_surrogates_in_text_and_arguments_become_u_fffd(
    server: FakeServer, openai_adapter: OpenAIAdapter
) -> None:
    # json.dumps writes "\ud800" as the escape jiter refuses: in a chunk's text, in an
    # arguments fragment, and in the arguments' own JSON text.
    call = [
        wire.oa_chunk({"role": "assistant", "content": "a\ud800b"}),
        wire.oa_call(0, "call_1", "get_weather", '{"city": "P\ud800'),
        wire.oa_call(0, None, None, 'Q\\udc00"}'),
        wire.oa_chunk({}, finish="tool_calls"),
        wire.OA_DONE,
    ]
    server.script(Reply(events=call), Reply(events=wire.oa_text("x\udfffy")))
    tools = [Tool.from_function(get_weather)]
    conv = conversation([openai_adapter], [TextMessage("Weather in Paris?")], tools)
    events, error = await run(conv)
    assert error is None
    assert ContentBlockDelta("a\ufffdb") in events
    assert ToolUse("get_weather", {"city": "P\ufffdQ\ufffd"}, "call_1") in events
    assert conv.messages[1] == ToolCallMessage(
        "get_weather",
        "call_1",
        {"city": "P\ufffdQ\ufffd"},
        {"city": "P\ufffdQ\ufffd", "temp_c": 21},
        None,
        "a\ufffdb",
    )
    assert conv.messages[2] == TextMessage("x\ufffdy", Role.ASSISTANT)


async def test_two_parallel_calls(server: FakeServer, openai_adapter: OpenAIAdapter) -> None:
    calls = [
        wire.oa_call(0, "call_a", "lookup", '{"q":'),
        wire.oa_call(1, "call_b", "lookup", '{"q": "b"}'),
        wire.oa_call(0, None, None, ' "a"}'),
        wire.oa_chunk({}, finish="tool_calls"),
        wire.OA_DONE,
    ]
    server.script(Reply(events=calls), Reply(events=wire.oa_text("Both found.")))
    conv = conversation([openai_adapter], [TextMessage("Look up a and b")], [Tool.client("lookup")])
    events, error = await run(conv)
    assert error is None
    uses = [e for e in events if isinstance(e, ToolUse)]
    assert uses == [
        ToolUse("lookup", {"q": "a"}, "call_a"),
        ToolUse("lookup", {"q": "b"}, "call_b"),
    ]
    assert conv.status == "requires_action"
    assert [m.tool_call_id for _, m in conv.messages.pending_tool_calls()] == ["call_a", "call_b"]
    conv.add_tool_result("call_b", {"found": "b"})
    conv.add_tool_result("call_a", error="not found")
    events, error = await run(conv)
    assert error is None and conv.messages[-1] == TextMessage("Both found.", Role.ASSISTANT)
    second = server.bodies[1]
    check_openai_request(second)
    assistant, tool_a, tool_b = second["messages"][1:]
    assert [c["id"] for c in assistant["tool_calls"]] == ["call_a", "call_b"]
    assert tool_a == {"role": "tool", "tool_call_id": "call_a", "content": "Error: not found"}
    assert tool_b == {"role": "tool", "tool_call_id": "call_b", "content": '{"found": "b"}'}


async def test_pending_calls_are_not_sent(
    server: FakeServer, openai_adapter: OpenAIAdapter
) -> None:
    server.script(Reply(events=wire.oa_text("ok")))
    pending = ToolCallMessage("lookup", "call_p", {"q": 1}, pending=True)
    await drain(openai_adapter.stream_message([TextMessage("x"), pending], [], OPTIONS))
    assert server.bodies[0]["messages"] == [{"role": "user", "content": "x"}]


async def test_injected_assistant_message_is_history(
    server: FakeServer, openai_adapter: OpenAIAdapter
) -> None:
    server.script(Reply(events=wire.oa_text("Blue light scatters more.")))
    conv = conversation([openai_adapter], [AgentMessage("One sentence.")])
    conv.continuation.assistant("Sure, ask away.").request(
        "Why is the sky blue?"
    ).prompt_conversation()
    _, error = await run(conv)
    assert error is None
    assert [m["role"] for m in server.bodies[0]["messages"]] == ["system", "assistant", "user"]
    assert server.bodies[0]["messages"][1] == {"role": "assistant", "content": "Sure, ask away."}


async def test_trailing_assistant_is_refused_before_any_request(
    server: FakeServer, openai_adapter: OpenAIAdapter
) -> None:
    conv = conversation(
        [openai_adapter], [TextMessage("Hi"), TextMessage("The answer is", Role.ASSISTANT)]
    )
    events, error = await run(conv)
    assert error is not None and error.code == "invalid_request" and not error.retryable
    assert "prefill" in error.detail and "anthropic" in error.detail
    assert events == [] and server.received == [] and len(conv.messages) == 2


async def test_trailing_assistant_continue_final_message(server: FakeServer) -> None:
    config = OpenAIConfig(
        api_key="k", base_url=f"{server.url}/v1", trailing_assistant="continue_final_message"
    )
    adapter = OpenAIAdapter(config)
    server.script(Reply(events=wire.oa_text(" 42.")))
    try:
        messages = [TextMessage("Answer?"), TextMessage("The answer is", Role.ASSISTANT)]
        chunks, error = await drain(adapter.stream_message(messages, [], OPTIONS))
    finally:
        await adapter.aclose()
    assert error is None and ContentBlockDelta(" 42.") in chunks
    body = server.bodies[0]
    assert body["continue_final_message"] is True and body["add_generation_prompt"] is False
    assert body["messages"][-1] == {"role": "assistant", "content": "The answer is"}


@pytest.mark.parametrize("model", ["gpt-4o-mini", "gpt-5.4-mini"])
def test_token_counter_is_exact_for_openai_models(
    openai_adapter: OpenAIAdapter, model: str
) -> None:
    counter = openai_adapter.token_counter(model)
    assert counter is not None and counter("Why is the sky blue?") == 6


def test_token_counter_is_none_for_other_models(openai_adapter: OpenAIAdapter) -> None:
    assert openai_adapter.token_counter("llama3.1:8b") is None


def test_arguments_are_sent_as_json(openai_adapter: OpenAIAdapter) -> None:
    request = openai_adapter._request(
        [TextMessage("x"), ToolCallMessage("t", "c1", {"a": "é"}, result="ok")], [], OPTIONS
    )
    call = request["messages"][1]["tool_calls"][0]
    assert json.loads(call["function"]["arguments"]) == {"a": "é"}


async def test_call_without_id_and_with_its_name_in_pieces(
    server: FakeServer, openai_adapter: OpenAIAdapter
) -> None:
    events = [
        wire.oa_call(0, None, "get_", ""),
        wire.oa_call(0, None, "weather", '{"city": "Oslo"}'),
        wire.oa_chunk({}, finish="stop"),
        wire.OA_DONE,
    ]
    server.script(Reply(events=events))
    chunks, error = await drain(openai_adapter.stream_message([TextMessage("x")], [], OPTIONS))
    assert error is None
    (use,) = [c for c in chunks if isinstance(c, ToolUse)]
    assert (use.tool_name, use.params) == ("get_weather", {"city": "Oslo"})
    assert use.id.startswith("call_")
    assert chunks[-1] == MessageStop("tool_use", Usage())


async def test_trailing_assistant_send(server: FakeServer) -> None:
    config = OpenAIConfig(api_key="k", base_url=f"{server.url}/v1", trailing_assistant="send")
    adapter = OpenAIAdapter(config)
    server.script(Reply(events=wire.oa_text(" 42.")))
    try:
        messages = [TextMessage("Answer?"), TextMessage("The answer is", Role.ASSISTANT)]
        _, error = await drain(adapter.stream_message(messages, [], OPTIONS))
    finally:
        await adapter.aclose()
    assert error is None and "continue_final_message" not in server.bodies[0]
    assert server.bodies[0]["messages"][-1] == {"role": "assistant", "content": "The answer is"}


async def test_send_message_takes_messages_and_tools_as_seed_004_declares(
    server: FakeServer, openai_adapter: OpenAIAdapter
) -> None:
    server.script(Reply(events=wire.oa_text("Hel", "lo")))
    reply = await openai_adapter.send_message([TextMessage("Say hello")], [])
    assert (reply.text, reply.stop_reason) == ("Hello", "end_turn")
    (sent,) = server.received
    assert sent.body["model"] == "gpt-4o-mini" and "temperature" not in sent.body
