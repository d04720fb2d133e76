"""The ``openai`` adapter over the Responses API, through the real SDK against a fake
``/v1/responses``: what it yields and sends, what a conversation stores, and tool loops on a fake
reasoning model that refuses what the real API refuses (tests/providers/responses_rules.py)."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import pytest

from app.domain import (
    AgentMessage,
    ContentBlockDelta,
    ContentBlockStart,
    ContentBlockStop,
    LLMConversation,
    MessageAppended,
    MessageStop,
    ReasoningDone,
    ReasoningMessage,
    RequestOptions,
    Role,
    TextMessage,
    Tool,
    ToolCallMessage,
    ToolUse,
    Usage,
)
from app.providers.openai_chat import OpenAIConfig
from app.providers.openai_responses import OpenAIResponsesAdapter

from . import wire
from .conftest import responses_adapter_for
from .fake_server import FakeServer, Reply
from .helpers import conversation, drain, run
from .responses_rules import Issued, ReasoningModel, issued_from_history, responses_violations

OPTIONS = RequestOptions()


def get_weather(city: str) -> dict[str, Any]:
    """Weather in a city."""
    return {"city": city, "temp_c": 21}


@pytest.fixture
def model() -> ReasoningModel:
    return ReasoningModel()


@pytest.fixture
async def thinker(model: ReasoningModel) -> AsyncIterator[OpenAIResponsesAdapter]:
    """The adapter on a fake reasoning model that enforces the Responses rules."""
    async with FakeServer(check=model.check, responder=model.respond) as fake:
        adapter = responses_adapter_for(fake)
        adapter.fake = fake  # type: ignore[attr-defined]  # the tests read what it received
        yield adapter
        await adapter.aclose()


def bodies(adapter: OpenAIResponsesAdapter) -> list[Any]:
    fake: FakeServer = adapter.fake  # type: ignore[attr-defined]
    return fake.bodies


async def test_text(server: FakeServer, responses_adapter: OpenAIResponsesAdapter) -> None:
    server.script(Reply(events=wire.rs_text("Hel", "lo")))
    messages = [AgentMessage("Be brief."), TextMessage("Hi"), TextMessage("Hi!", Role.ASSISTANT)]
    messages.append(TextMessage("Say hello"))
    chunks, error = await drain(responses_adapter.stream_message(messages, [], OPTIONS))
    assert error is None
    assert chunks == [
        ContentBlockStart(0),
        ContentBlockDelta("Hel"),
        ContentBlockDelta("lo"),
        ContentBlockStop(0),
        MessageStop("end_turn", Usage(10, 3, 0, 0)),
    ]
    (sent,) = server.received
    assert sent.path == "/v1/responses"
    assert sent.headers["authorization"] == "Bearer sk-test"
    assert sent.body == {
        "model": "gpt-5.4-mini",
        "instructions": "Be brief.",
        "input": [
            {"type": "message", "role": "user", "content": "Hi"},
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Hi!"}],
            },
            {"type": "message", "role": "user", "content": "Say hello"},
        ],
        "stream": True,
        "store": False,
        "include": ["reasoning.encrypted_content"],
    }
    assert responses_violations(sent.body, Issued()) == []


async def test_reasoning_summary_streams_and_is_stored(
    server: FakeServer, responses_adapter: OpenAIResponsesAdapter
) -> None:
    item = wire.rs_reasoning_item("rs_1", ["First, the sky.", "Then, the sea."])
    frames = [
        *wire.rs_created(),
        *wire.rs_reasoning(0, item),
        *wire.rs_message(1, "msg_1", "Blue", "."),
        wire.rs_completed(wire.rs_usage(30, 20, reasoning=14, cached=6)),
    ]
    server.script(Reply(events=frames))
    conv = conversation([responses_adapter], [TextMessage("Why blue?")])
    events, error = await run(conv)
    assert error is None
    chunks = [e for e in events if not isinstance(e, MessageAppended)]
    assert chunks == [
        ContentBlockStart(0, "reasoning"),
        ContentBlockDelta("First, ", 0),
        ContentBlockDelta("the sky.", 0),
        ContentBlockDelta("\n\nThen, t", 0),
        ContentBlockDelta("he sea.", 0),
        ContentBlockStop(0),
        ReasoningDone("First, the sky.\n\nThen, the sea.", item, 0),
        ContentBlockStart(1),
        ContentBlockDelta("Blue", 1),
        ContentBlockDelta(".", 1),
        ContentBlockStop(1),
        MessageStop("end_turn", Usage(30, 20, reasoning_tokens=14, cache_read_tokens=6)),
    ]
    streamed = "".join(c.delta for c in chunks if isinstance(c, ContentBlockDelta) and not c.index)
    assert list(conv.messages)[1:] == [
        ReasoningMessage(streamed, "openai", item),
        TextMessage("Blue.", Role.ASSISTANT),
    ]


async def test_reasoning_without_summary_is_stored_without_a_block(
    server: FakeServer, responses_adapter: OpenAIResponsesAdapter
) -> None:
    item = wire.rs_reasoning_item("rs_1", [])
    frames = [*wire.rs_created(), *wire.rs_reasoning(0, item), *wire.rs_message(1, "m", "Hi")]
    server.script(Reply(events=[*frames, wire.rs_completed()]))
    chunks, error = await drain(responses_adapter.stream_message([TextMessage("x")], [], OPTIONS))
    assert error is None
    assert chunks[:2] == [ReasoningDone("", item, 0), ContentBlockStart(1)]


async def test_server_tool_loop_hands_the_reasoning_back(
    thinker: OpenAIResponsesAdapter, model: ReasoningModel
) -> None:
    conv = conversation(
        [thinker], [TextMessage("Weather in Paris?")], [Tool.from_function(get_weather)]
    )
    events, error = await run(conv)
    assert error is None, error
    stored = list(conv.messages)
    assert [type(m).__name__ for m in stored] == [
        "TextMessage",
        "ReasoningMessage",
        "ToolCallMessage",
        "ReasoningMessage",
        "TextMessage",
    ]
    first_item = model.issued.reasoning["rs_0001"]
    assert stored[1] == ReasoningMessage(
        "Thinking it over.\n\nChecking the tool.", "openai", first_item
    )
    assert stored[2] == ToolCallMessage(
        "get_weather", "call_0001_0", {"city": "Paris"}, {"city": "Paris", "temp_c": 21}
    )
    assert stored[4] == TextMessage(
        'The tool said: {"city": "Paris", "temp_c": 21}', Role.ASSISTANT
    )
    assert MessageStop("tool_use", Usage(40, 25, 12, 8)) in events
    second = bodies(thinker)[1]
    assert second["input"][1:] == [
        first_item,
        {
            "type": "function_call",
            "call_id": "call_0001_0",
            "name": "get_weather",
            "arguments": '{"city": "Paris"}',
        },
        {
            "type": "function_call_output",
            "call_id": "call_0001_0",
            "output": '{"city": "Paris", "temp_c": 21}',
        },
    ]
    # the next turn sends both reasoning items back, each in its place
    conv.continuation.request("And in Oslo?").prompt_conversation()
    _, error = await run(conv)
    assert error is None and model.refused == []
    kinds = [i.get("type") for i in bodies(thinker)[2]["input"]]
    first_turn = ["message", "reasoning", "function_call", "function_call_output"]
    assert kinds == [*first_turn, "reasoning", "message", "message"]


async def test_client_tool_loop(thinker: OpenAIResponsesAdapter, model: ReasoningModel) -> None:
    conv = conversation([thinker], [TextMessage("Look it up")], [Tool.client("lookup")])
    _, error = await run(conv)
    assert error is None and conv.status == "requires_action"
    assert isinstance(conv.messages[1], ReasoningMessage)
    conv.add_tool_result("call_0001_0", {"found": True})
    events, error = await run(conv)
    assert error is None, error
    assert conv.messages[-1] == TextMessage('The tool said: {"found": true}', Role.ASSISTANT)
    assert model.refused == []
    assert any(isinstance(e, ReasoningDone) for e in events)


def _without_reasoning(conv: LLMConversation) -> list[Any]:
    return [m for m in conv.messages if not isinstance(m, ReasoningMessage)]


def _altered(conv: LLMConversation) -> list[Any]:
    out = []
    for m in conv.messages:
        if isinstance(m, ReasoningMessage) and m.payload is not None:
            encrypted = m.payload["encrypted_content"]
            changed = encrypted[:-3] + ("A" if encrypted[-3] != "A" else "B") + encrypted[-2:]
            m = dataclasses.replace(m, payload={**m.payload, "encrypted_content": changed})
        out.append(m)
    return out


@pytest.mark.parametrize(
    ("change", "refusal"),
    [
        (
            _without_reasoning,
            "Item 'fc_0001_0' of type 'function_call' was provided without its required "
            "'reasoning' item: 'rs_0001'.",
        ),
        (_altered, "The encrypted content for item rs_0001 could not be verified."),
    ],
)
async def test_the_fake_refuses_a_follow_up_without_its_exact_reasoning(
    thinker: OpenAIResponsesAdapter, model: ReasoningModel, change: Any, refusal: str
) -> None:
    conv = conversation([thinker], [TextMessage("Look it up")], [Tool.client("lookup")])
    await run(conv)
    broken = conversation([thinker], change(conv), [Tool.client("lookup")])
    broken.add_tool_result("call_0001_0", {"found": True})
    events, error = await run(broken)
    assert error is not None and (error.code, error.retryable) == ("invalid_request", False)
    assert refusal in error.detail and events == []
    assert len(model.refused) == 1 and model.refused[0][0].startswith(refusal)


async def test_parallel_calls(
    server: FakeServer, responses_adapter: OpenAIResponsesAdapter
) -> None:
    a = wire.rs_call_item("fc_a", "call_a", "lookup", '{"q": "a"}')
    b = wire.rs_call_item("fc_b", "call_b", "lookup", '{"q": "b"}')
    frames = [
        *wire.rs_created(),
        *wire.rs_message(0, "msg_1", "Looking."),
        *wire.rs_call(1, a, '{"q":', ' "a"}'),
        *wire.rs_call(2, b),
        wire.rs_completed(),
    ]
    server.script(Reply(events=frames), Reply(events=wire.rs_text("Both found.")))
    conv = conversation(
        [responses_adapter], [TextMessage("Look up a and b")], [Tool.client("lookup")]
    )
    events, error = await run(conv)
    assert error is None
    uses = [e for e in events if isinstance(e, ToolUse)]
    assert uses == [
        ToolUse("lookup", {"q": "a"}, "call_a"),
        ToolUse("lookup", {"q": "b"}, "call_b"),
    ]
    assert MessageStop("tool_use", Usage(10, 3, 0, 0)) in events
    conv.add_tool_result("call_b", {"found": "b"})
    conv.add_tool_result("call_a", error="not found")
    _, error = await run(conv)
    assert error is None and conv.messages[-1] == TextMessage("Both found.", Role.ASSISTANT)
    second = server.bodies[1]
    assert [(i["type"], i.get("call_id")) for i in second["input"][1:]] == [
        ("message", None),
        ("function_call", "call_a"),
        ("function_call", "call_b"),
        ("function_call_output", "call_a"),
        ("function_call_output", "call_b"),
    ]
    assert second["input"][4]["output"] == "Error: not found"
    assert responses_violations(second, Issued()) == []


async def test_usage_by_kind_and_incomplete_reply(
    server: FakeServer, responses_adapter: OpenAIResponsesAdapter
) -> None:
    usage = wire.rs_usage(100, 50, reasoning=30, cached=64)
    usage["input_tokens_details"]["cache_write_tokens"] = 20
    response = wire.rs_response(
        "incomplete", usage=usage, incomplete_details={"reason": "max_output_tokens"}
    )
    frames = [
        *wire.rs_created(),
        *wire.rs_message(0, "msg_1", "Cut")[:3],
        wire.rs_event("response.incomplete", response=response),
    ]
    server.script(Reply(events=frames))
    chunks, error = await drain(responses_adapter.stream_message([TextMessage("x")], [], OPTIONS))
    assert error is None
    assert chunks[-2:] == [
        ContentBlockStop(0),
        MessageStop("max_tokens", Usage(100, 50, 30, 64, 20)),
    ]


async def test_a_server_that_names_no_events(
    server: FakeServer, responses_adapter: OpenAIResponsesAdapter
) -> None:
    frames = [f.split("\n", 1)[1] for f in wire.rs_text("Hi")]  # "data:" lines only
    server.script(Reply(events=frames))
    chunks, error = await drain(responses_adapter.stream_message([TextMessage("x")], [], OPTIONS))
    assert error is None and ContentBlockDelta("Hi") in chunks


@pytest.mark.parametrize(
    ("reasoning", "sent", "temperature"),
    [
        (None, None, False),
        (dict(effort="none"), {"effort": "none"}, True),
        (dict(effort="low"), {"effort": "low"}, False),
        (dict(effort="medium", summary="auto"), {"effort": "medium", "summary": "auto"}, False),
        (dict(effort="high", summary="none"), {"effort": "high"}, False),
        (dict(summary="auto"), {"summary": "auto"}, False),
        (dict(budget_tokens=2048), None, False),
        (dict(effort="none", summary="auto"), {"effort": "none"}, True),
    ],
)
def test_reasoning_config(
    responses_adapter: OpenAIResponsesAdapter,
    reasoning: dict[str, Any] | None,
    sent: dict[str, Any] | None,
    temperature: bool,
) -> None:
    from app.domain import Reasoning

    options = RequestOptions(
        temperature=0.2,
        max_output_tokens=300,
        reasoning=Reasoning(**reasoning) if reasoning else None,
    )
    body = responses_adapter._request([TextMessage("x")], [], options)
    assert body.get("reasoning") == sent
    assert ("temperature" in body) is temperature
    assert body["max_output_tokens"] == 300
    assert body["include"] == ["reasoning.encrypted_content"]
    assert responses_violations(body, Issued()) == []


def test_a_model_that_does_not_reason_gets_no_reasoning_options(
    responses_adapter: OpenAIResponsesAdapter,
) -> None:
    from app.domain import Reasoning

    options = RequestOptions(model="gpt-4.1", temperature=0.2, reasoning=Reasoning("high"))
    body = responses_adapter._request([TextMessage("x")], [], options)
    assert "include" not in body and "reasoning" not in body and body["temperature"] == 0.2
    assert responses_violations(body, Issued()) == []
    refused = responses_violations({**body, "include": ["reasoning.encrypted_content"]}, Issued())
    assert refused == ["Encrypted content is not supported with this model."]


def test_tools_system_prompts_and_foreign_reasoning(
    responses_adapter: OpenAIResponsesAdapter,
) -> None:
    from app.domain import ToolSpec

    spec = ToolSpec("lookup", "Look it up.", {"type": "object", "properties": {}})
    messages = [
        AgentMessage("One."),
        AgentMessage("Two."),
        TextMessage("Hi"),
        ReasoningMessage("thought", "openai", {"type": "reasoning_content"}),
        TextMessage("Hello", Role.ASSISTANT),
        AgentMessage("Now be terse."),
        TextMessage("And?"),
        ToolCallMessage("lookup", "call_p", {"q": 1}, pending=True),
    ]
    body = responses_adapter._request(messages, [spec], OPTIONS)
    assert body["instructions"] == "One.\n\nTwo."
    assert [i.get("role") for i in body["input"]] == ["user", "assistant", "system", "user"]
    assert body["tools"] == [
        {
            "type": "function",
            "name": "lookup",
            "description": "Look it up.",
            "parameters": {"type": "object", "properties": {}},
        }
    ]


async def test_trailing_assistant(server: FakeServer) -> None:
    messages = [TextMessage("Answer?"), TextMessage("The answer is", Role.ASSISTANT)]
    refusing = responses_adapter_for(server)
    _, error = await drain(refusing.stream_message(messages, [], OPTIONS))
    assert error is not None and error.code == "invalid_request" and "prefill" in error.detail
    assert server.received == []
    config = OpenAIConfig(api_key="k", base_url=f"{server.url}/v1", trailing_assistant="send")
    sending = OpenAIResponsesAdapter(config)
    server.script(Reply(events=wire.rs_text("42.")))
    try:
        _, error = await drain(sending.stream_message(messages, [], OPTIONS))
    finally:
        await sending.aclose()
        await refusing.aclose()
    assert error is None
    assert server.bodies[0]["input"][-1]["content"] == [
        {"type": "output_text", "text": "The answer is"}
    ]


def test_token_counter_is_the_chat_adapters(responses_adapter: OpenAIResponsesAdapter) -> None:
    counter = responses_adapter.token_counter("gpt-5.4-mini")
    assert counter is not None and counter("Why is the sky blue?") == 6
    assert responses_adapter.token_counter("llama3.1:8b") is None


async def test_the_rules_without_a_server(
    thinker: OpenAIResponsesAdapter, model: ReasoningModel
) -> None:
    conv = conversation([thinker], [TextMessage("Weather?")], [Tool.from_function(get_weather)])
    _, error = await run(conv)
    assert error is None
    history = [*conv.messages, TextMessage("And tomorrow?")]
    issued = issued_from_history(history)
    assert issued.reasoning == model.issued.reasoning
    assert responses_violations(thinker._request(history, [], OPTIONS), issued) == []
    reasoning, call = history[1], history[2]
    moved = [history[0], call, reasoning, *history[3:]]
    assert responses_violations(thinker._request(moved, [], OPTIONS), issued) == [
        "Item 'fc_call_0001_0' of type 'function_call' was provided without its required "
        "'reasoning' item: 'rs_0001'.",
        "Item 'rs_0001' of type 'reasoning' was provided without its required following item.",
    ]
    body = thinker._request(history, [], OPTIONS)
    assert responses_violations({**body, "store": True, "include": []}, issued) == [
        "Parley's requests must set store: false.",
        "Parley's requests must include reasoning.encrypted_content.",
    ]
