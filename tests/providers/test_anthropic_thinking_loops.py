"""Tool loops with thinking on the ``anthropic`` adapter, through the real SDK against a fake
thinking model that enforces Anthropic's rules (``anthropic_rules``): server and client tools
whose thinking goes back exactly, the fake's own refusals of anything else, and switching
provider mid-conversation."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

import anthropic
import pytest

from app.domain import (
    AgentMessage,
    ConversationConfig,
    DefaultModelSelectionStrategy,
    LLMConversation,
    Message,
    MessageList,
    MessageStop,
    ModelAdapter,
    Reasoning,
    ReasoningMessage,
    RequestOptions,
    Role,
    TextMessage,
    Tool,
    ToolCallMessage,
    Usage,
)
from app.providers.anthropic_messages import AnthropicAdapter, anthropic_turns
from app.providers.offline import OfflineAdapter
from app.providers.openai_chat import OpenAIAdapter, OpenAIConfig

from . import wire
from .anthropic_rules import ThinkingModel
from .conftest import FAST_RETRY
from .fake_server import FakeServer, Reply
from .helpers import check_anthropic_request, check_openai_request, drain, run

HIGH = Reasoning(effort="high")


def get_weather(city: str) -> dict[str, Any]:
    """Weather in a city."""
    return {"city": city, "temp_c": 21}


@pytest.fixture
def model(server: FakeServer) -> ThinkingModel:
    """The fake thinking model behind ``server``: it refuses what Anthropic refuses."""
    return ThinkingModel().serve(server)


def thinking_conversation(
    adapters: Sequence[ModelAdapter],
    messages: Sequence[Message],
    tools: Sequence[Tool] = (),
    reasoning: Reasoning | None = HIGH,
) -> LLMConversation:
    selector = DefaultModelSelectionStrategy(adapters, adapters[0].name)
    config = ConversationConfig(model_selector=selector, tools=tuple(tools), reasoning=reasoning)
    return LLMConversation(MessageList(messages), config)


def issued_block(model: ThinkingModel, n: int) -> dict[str, Any]:
    """The ``n``-th thinking block the fake issued (from 0), as it must come back."""
    signature, text = list(model.issued.thinking.items())[n]
    return {"type": "thinking", "thinking": text, "signature": signature}


# --- tool loops on the rule-enforcing fake ---------------------------------------------------


async def test_a_server_tool_loop_sends_its_thinking_back(
    server: FakeServer, anthropic_adapter: AnthropicAdapter, model: ThinkingModel
) -> None:
    tools = [Tool.from_function(get_weather)]
    conv = thinking_conversation([anthropic_adapter], [TextMessage("Weather in Paris?")], tools)
    events, error = await run(conv)
    assert error is None
    assert [type(m) for m in conv.messages] == [
        TextMessage, ReasoningMessage, ToolCallMessage, ReasoningMessage, TextMessage,
    ]  # fmt: skip
    first = issued_block(model, 0)
    assert conv.messages[1] == ReasoningMessage(
        first["thinking"], "anthropic", {"type": "thinking", "signature": first["signature"]}
    )
    assert first["thinking"].startswith("  ") and first["thinking"].endswith("\n\n ")
    second = server.bodies[1]
    check_anthropic_request(second)
    assert second["messages"][1]["content"] == [
        first,
        {
            "type": "tool_use",
            "id": "toolu_think_1",
            "name": "get_weather",
            "input": {"city": "Paris"},
        },
    ]
    assert conv.messages[-1] == TextMessage('Done: {"city": "Paris", "temp_c": 21}', Role.ASSISTANT)
    stops = [e for e in events if isinstance(e, MessageStop)]
    assert [s.usage for s in stops] == [Usage(75, 20, 7, 30, 5)] * 2


async def test_a_client_tool_loop_sends_its_thinking_back_after_save_and_load(
    server: FakeServer, anthropic_adapter: AnthropicAdapter, model: ThinkingModel
) -> None:
    tools = [Tool.client("get_weather")]
    conv = thinking_conversation([anthropic_adapter], [TextMessage("Weather in Paris?")], tools)
    assert (await run(conv))[1] is None
    assert conv.status == "requires_action"

    saved = json.loads(json.dumps(conv.messages.to_dict()))
    restored = thinking_conversation([anthropic_adapter], list(MessageList.from_dict(saved)), tools)
    restored.add_tool_result("toolu_think_1", {"temp_c": 19})
    assert (await run(restored))[1] is None
    assert restored.status == "idle"
    assert restored.messages[-1] == TextMessage('Done: {"temp_c": 19}', Role.ASSISTANT)
    assert server.bodies[1]["messages"][1]["content"][0] == issued_block(model, 0)
    assert len(server.received) == 2


async def test_redacted_thinking_goes_back_too(
    server: FakeServer, anthropic_adapter: AnthropicAdapter, model: ThinkingModel
) -> None:
    model.redact = True
    conv = thinking_conversation(
        [anthropic_adapter], [TextMessage("Weather?")], [Tool.from_function(get_weather)]
    )
    assert (await run(conv))[1] is None
    (data,) = sorted(model.issued.redacted)[:1]
    reasoning = [m for m in conv.messages if isinstance(m, ReasoningMessage)]
    assert len(reasoning) == 4
    assert (
        ReasoningMessage("", "anthropic", {"type": "redacted_thinking", "data": data}) in reasoning
    )
    turn = server.bodies[1]["messages"][1]["content"]
    assert [b["type"] for b in turn] == ["thinking", "redacted_thinking", "tool_use"]
    assert turn[:2] == model.issued.by_call["toolu_think_1"]


# --- the fake refuses what Anthropic refuses --------------------------------------------------


async def _one_call(adapter: AnthropicAdapter) -> LLMConversation:
    conv = thinking_conversation([adapter], [TextMessage("Weather?")], [Tool.client("get_weather")])
    assert (await run(conv))[1] is None
    conv.add_tool_result("toolu_think_1", {"temp_c": 19})
    return conv


def _replace_reasoning(conv: LLMConversation, new: ReasoningMessage) -> list[Message]:
    return [(new if isinstance(m, ReasoningMessage) else m) for m in conv.messages]


@pytest.mark.parametrize(
    ("change", "refusal"),
    [
        ("trim", "messages.1.content.0: Invalid `signature` in `thinking` block"),
        ("byte", "messages.1.content.0: Invalid `signature` in `thinking` block"),
        ("signature", "messages.1.content.0: Invalid `signature` in `thinking` block"),
    ],
)
async def test_the_fake_refuses_a_follow_up_without_its_exact_thinking(
    server: FakeServer,
    anthropic_adapter: AnthropicAdapter,
    model: ThinkingModel,
    change: str,
    refusal: str,
) -> None:
    conv = await _one_call(anthropic_adapter)
    original = next(m for m in conv.messages if isinstance(m, ReasoningMessage))
    assert original.payload is not None
    changed = {
        "trim": ReasoningMessage(original.text.strip(), "anthropic", original.payload),
        "byte": ReasoningMessage(original.text.replace("#", "$"), "anthropic", original.payload),
        "signature": ReasoningMessage(
            original.text,
            "anthropic",
            {**original.payload, "signature": original.payload["signature"][:-2] + "=="},
        ),
    }[change]
    options = RequestOptions(reasoning=HIGH)
    _, error = await drain(
        anthropic_adapter.stream_message(_replace_reasoning(conv, changed), [], options)
    )
    assert error is not None and error.code == "invalid_request"
    assert refusal in error.detail
    assert (await anthropic_adapter.send_message(list(conv.messages), [], options)).text.startswith(
        "Done"
    )


@pytest.mark.parametrize(
    ("change", "refusal"),
    [
        (
            "drop",
            "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
            "`tool_use`. When `thinking` is enabled, a final `assistant` message must start "
            "with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` "
            "blocks).",
        ),
        (
            "reverse",
            "messages.1.content.1: `thinking` and `redacted_thinking` blocks must come before "
            "any other content in an `assistant` message",
        ),
    ],
)
async def test_the_fake_refuses_a_tool_loop_turn_that_lacks_or_misplaces_its_thinking(
    server: FakeServer,
    anthropic_adapter: AnthropicAdapter,
    model: ThinkingModel,
    change: str,
    refusal: str,
) -> None:
    """Sent by hand through the SDK: the adapter never sends such a turn (without its
    thinking, it turns thinking off for the request; thinking always leads)."""
    conv = await _one_call(anthropic_adapter)
    _, turns = anthropic_turns(list(conv.messages))
    if change == "drop":
        del turns[1]["content"][0]
    else:
        turns[1]["content"].reverse()  # tool_use, then thinking
    client = anthropic.AsyncAnthropic(api_key="k", base_url=server.url, max_retries=0)
    with pytest.raises(anthropic.BadRequestError) as refused:
        await client.messages.create(
            model="claude-test", max_tokens=1000, messages=turns, thinking={"type": "adaptive"}
        )
    await client.close()
    assert refused.value.body["type"] == "error"
    assert refused.value.body["error"]["type"] == "invalid_request_error"
    assert refused.value.body["error"]["message"].startswith(refusal)


# --- switching provider mid-conversation ------------------------------------------------------


@pytest.fixture
async def plain_openai() -> AsyncIterator[tuple[FakeServer, OpenAIAdapter]]:
    async with FakeServer() as fake:
        config = OpenAIConfig(api_key="sk-test", base_url=f"{fake.url}/v1", retry=FAST_RETRY)
        adapter = OpenAIAdapter(config)
        yield fake, adapter
        await adapter.aclose()


async def test_switching_provider_leaves_thinking_behind_and_comes_back_to_it(
    server: FakeServer,
    anthropic_adapter: AnthropicAdapter,
    model: ThinkingModel,
    plain_openai: tuple[FakeServer, OpenAIAdapter],
) -> None:
    openai_server, openai_adapter = plain_openai
    adapters = [anthropic_adapter, OfflineAdapter(), openai_adapter]
    tools = [Tool.from_function(get_weather)]
    conv = thinking_conversation(
        adapters, [AgentMessage("Be brief."), TextMessage("Weather?")], tools
    )
    assert (await run(conv))[1] is None

    conv.continuation.provider("offline").request("Thanks, and now?").prompt_conversation()
    assert (await run(conv))[1] is None
    offline = [
        m for m in conv.messages if isinstance(m, ReasoningMessage) and m.provider == "offline"
    ]
    assert offline, "the offline model thinks when reasoning is on"

    openai_server.script(Reply(events=wire.oa_text("Mild.")))
    conv.continuation.provider("openai").request("Summarize.").prompt_conversation()
    assert (await run(conv))[1] is None
    (sent,) = openai_server.bodies
    check_openai_request(sent)
    dumped = json.dumps(sent["messages"])  # the history; `reasoning_effort` is the config's
    assert (
        "thinking" not in dumped.lower() and "signature" not in dumped and "reasoning" not in dumped
    )
    assert sent["reasoning_effort"] == "high"

    conv.continuation.provider("anthropic").request("One more?").prompt_conversation()
    assert (await run(conv))[1] is None
    back = server.bodies[-1]
    check_anthropic_request(back)
    sent_thinking = [b for t in back["messages"] for b in t["content"] if b["type"] == "thinking"]
    assert sent_thinking == [issued_block(model, 0), issued_block(model, 1), issued_block(model, 2)]
    assert conv.messages[-1].role is Role.ASSISTANT


async def test_a_tool_loop_begun_elsewhere_continues_here_with_thinking_off_for_one_request(
    server: FakeServer, anthropic_adapter: AnthropicAdapter, model: ThinkingModel
) -> None:
    adapters = [OfflineAdapter(), anthropic_adapter]
    tools = [Tool.client("get_weather")]
    ask = [TextMessage('call get_weather {"city": "Oslo"}')]
    conv = thinking_conversation(adapters, ask, tools, reasoning=Reasoning(effort="none"))
    assert (await run(conv))[1] is None
    (call,) = conv.messages.pending_tool_calls()
    conv.add_tool_result(call[1].tool_call_id, {"temp_c": 3})
    conv.apply_config_deltas({"preferred_provider": "anthropic", "reasoning": {"effort": "high"}})
    assert (await run(conv))[1] is None
    assert server.bodies[0]["thinking"] == {"type": "disabled"}
    assert "output_config" not in server.bodies[0]
    assert conv.messages[-1] == TextMessage('Done: {"temp_c": 3}', Role.ASSISTANT)

    conv.continuation.request("And tomorrow?").prompt_conversation()
    assert (await run(conv))[1] is None
    conv.add_tool_result("toolu_think_1", {"temp_c": 4})
    assert (await run(conv))[1] is None  # the loop begun here goes on with thinking
    assert [b["thinking"] for b in server.bodies[1:]] == [{"type": "adaptive"}] * 2
    assert server.bodies[2]["messages"][-2]["content"][0] == issued_block(model, 0)
    assert conv.messages[-1] == TextMessage('Done: {"temp_c": 4}', Role.ASSISTANT)
