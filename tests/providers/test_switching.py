"""One conversation with tool history run on OpenAI, continued on Anthropic and back: every
request it sends is one its provider accepts, and the history survives save and load."""

from __future__ import annotations

from typing import Any

from app.domain import (
    AgentMessage,
    LLMConversation,
    MessageList,
    Role,
    TextMessage,
    Tool,
    ToolCallMessage,
)
from app.providers.anthropic_messages import AnthropicAdapter
from app.providers.openai_chat import OpenAIAdapter

from . import wire
from .fake_server import FakeServer, Reply
from .helpers import (
    check_anthropic_request,
    check_openai_request,
    conversation,
    run,
    uncached,
)


def get_weather(city: str) -> dict[str, Any]:
    """Weather in a city."""
    return {"city": city, "temp_c": 21}


def _openai_two_calls() -> list[str]:
    return [
        wire.oa_chunk({"role": "assistant", "content": "Checking both."}),
        wire.oa_call(0, "call_par", "get_weather", '{"city": "Paris"}'),
        wire.oa_call(1, "call_ber", "get_weather", '{"city": "Berlin"}'),
        wire.oa_chunk({}, finish="tool_calls"),
        wire.OA_DONE,
    ]


def _anthropic_one_call() -> list[str]:
    return [
        wire.an_start(),
        *wire.an_tool_block(0, "toolu_rome", "get_weather", '{"city": ', '"Rome"}'),
        *wire.an_stop("tool_use"),
    ]


async def test_openai_then_anthropic_then_openai(
    server: FakeServer, openai_adapter: OpenAIAdapter, anthropic_adapter: AnthropicAdapter
) -> None:
    server.script(
        Reply(events=_openai_two_calls()),
        Reply(events=wire.oa_text("Paris and Berlin: 21 °C.")),
        Reply(events=_anthropic_one_call()),
        Reply(events=wire.an_text("Rome: 21 °C too.")),
        Reply(events=wire.oa_text("All three are mild.")),
    )
    tools = [Tool.from_function(get_weather)]
    conv = conversation([openai_adapter, anthropic_adapter], [AgentMessage("Be brief.")], tools)
    conv.continuation.request("Weather in Paris and Berlin?").prompt_conversation()
    assert (await run(conv))[1] is None

    restored = _save_and_load(conv, tools, [openai_adapter, anthropic_adapter])
    restored.continuation.provider("anthropic").request("And Rome?").prompt_conversation()
    assert (await run(restored))[1] is None

    restored.continuation.provider("openai").request("Summarize.").prompt_conversation()
    assert (await run(restored))[1] is None

    _check_requests(server)
    assert restored.messages[-1] == TextMessage("All three are mild.", Role.ASSISTANT)


def _check_requests(server: FakeServer) -> None:
    """Five valid requests: two to OpenAI, two to Anthropic, one to OpenAI again."""
    bodies = server.bodies
    assert [r.path for r in server.received] == ["/v1/chat/completions"] * 2 + [
        "/v1/messages"
    ] * 2 + ["/v1/chat/completions"]
    for body in (bodies[0], bodies[1], bodies[4]):
        check_openai_request(body)
    for body in (bodies[2], bodies[3]):
        check_anthropic_request(body)
        assert uncached(body)["system"] == "Be brief."

    first_anthropic = bodies[2]["messages"]
    roles = ["user", "assistant", "user", "assistant", "user"]
    assert [t["role"] for t in first_anthropic] == roles
    assert [b["type"] for b in first_anthropic[1]["content"]] == ["text", "tool_use", "tool_use"]
    assert [b["type"] for b in first_anthropic[2]["content"]] == ["tool_result", "tool_result"]

    last_openai = bodies[4]["messages"]
    assert [m["role"] for m in last_openai] == [
        "system", "user", "assistant", "tool", "tool", "assistant",
        "user", "assistant", "tool", "assistant", "user",
    ]  # fmt: skip
    assert last_openai[7]["tool_calls"][0]["id"] == "toolu_rome"
    assert last_openai[8] == {
        "role": "tool",
        "tool_call_id": "toolu_rome",
        "content": '{"city": "Rome", "temp_c": 21}',
    }


def _save_and_load(
    conv: LLMConversation, tools: list[Tool], adapters: list[Any]
) -> LLMConversation:
    data = conv.messages.to_dict()
    restored = conversation(adapters, list(MessageList.from_dict(data)), tools)
    assert [type(m) for m in restored.messages] == [
        AgentMessage, TextMessage, ToolCallMessage, ToolCallMessage, TextMessage,
    ]  # fmt: skip
    return restored
