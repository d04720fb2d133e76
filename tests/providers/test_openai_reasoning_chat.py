"""Reasoning on chat completions (``PARLEY_OPENAI_API=chat``): a server's ``reasoning_content``
(vLLM, DeepSeek, LiteLLM) or ``reasoning`` (Ollama, OpenRouter) streams as a reasoning block and
is stored, never sent back; ``reasoning_effort`` and the usage by kind."""

from __future__ import annotations

from typing import Any

import pytest

from app.domain import (
    ContentBlockDelta,
    ContentBlockStart,
    ContentBlockStop,
    MessageAppended,
    MessageStop,
    Reasoning,
    ReasoningDone,
    ReasoningMessage,
    RequestOptions,
    Role,
    TextMessage,
    Tool,
    ToolCallMessage,
    Usage,
)
from app.providers.openai_chat import OpenAIAdapter

from . import wire
from .fake_server import FakeServer, Reply
from .helpers import check_openai_request, conversation, drain, run

OPTIONS = RequestOptions()
MARK = {"type": "reasoning_content"}


def usage_chunk(prompt: int, completion: int, reasoning: int, cached: int, written: int) -> str:
    usage = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached, "cache_write_tokens": written},
        "completion_tokens_details": {"reasoning_tokens": reasoning},
    }
    return wire.oa_chunk(None, usage=usage)


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
async def test_reasoning_streams_as_its_own_block(
    server: FakeServer, openai_adapter: OpenAIAdapter, field: str
) -> None:
    frames = [
        wire.oa_chunk({"role": "assistant", "content": ""}),
        wire.oa_chunk({field: "Let me"}),
        wire.oa_chunk({field: " think."}),
        wire.oa_chunk({"content": "Hi", field: None}),
        wire.oa_chunk({"content": "!"}),
        wire.oa_chunk({}, finish="stop"),
        usage_chunk(10, 30, 25, 4, 2),
        wire.OA_DONE,
    ]
    server.script(Reply(events=frames))
    chunks, error = await drain(openai_adapter.stream_message([TextMessage("x")], [], OPTIONS))
    assert error is None
    assert chunks == [
        ContentBlockStart(0, "reasoning"),
        ContentBlockDelta("Let me", 0),
        ContentBlockDelta(" think.", 0),
        ContentBlockStop(0),
        ReasoningDone("Let me think.", MARK, 0),
        ContentBlockStart(1),
        ContentBlockDelta("Hi", 1),
        ContentBlockDelta("!", 1),
        ContentBlockStop(1),
        MessageStop("end_turn", Usage(10, 30, 25, 4, 2)),
    ]


async def test_reasoning_ends_at_a_tool_call_and_is_never_sent_back(
    server: FakeServer, openai_adapter: OpenAIAdapter
) -> None:
    frames = [
        wire.oa_chunk({"reasoning_content": "Need the tool."}),
        wire.oa_call(0, "call_1", "lookup", '{"q": 1}'),
        wire.oa_chunk({}, finish="tool_calls"),
        wire.OA_DONE,
    ]
    server.script(Reply(events=frames), Reply(events=wire.oa_text("Found.")))
    conv = conversation([openai_adapter], [TextMessage("Find it")], [Tool.client("lookup")])
    events, error = await run(conv)
    assert error is None
    done = [e for e in events if isinstance(e, ReasoningDone)]
    assert done == [ReasoningDone("Need the tool.", MARK, 0)]
    assert isinstance(events[events.index(done[0]) + 1], MessageAppended)
    assert conv.messages[1] == ReasoningMessage("Need the tool.", "openai", MARK)
    assert conv.status == "requires_action"
    conv.add_tool_result("call_1", {"found": 1})
    _, error = await run(conv)
    assert error is None and conv.messages[-1] == TextMessage("Found.", Role.ASSISTANT)
    second = server.bodies[1]
    check_openai_request(second)
    assert [m["role"] for m in second["messages"]] == ["user", "assistant", "tool"]
    assert "Need the tool." not in str(second)


async def test_reasoning_alone_ends_with_the_choice(
    server: FakeServer, openai_adapter: OpenAIAdapter
) -> None:
    frames = [wire.oa_chunk({"reasoning_content": "Hmm."}), wire.oa_chunk({}, finish="length")]
    server.script(Reply(events=[*frames, wire.OA_DONE]))
    chunks, error = await drain(openai_adapter.stream_message([TextMessage("x")], [], OPTIONS))
    assert error is None
    assert chunks[-3:] == [
        ContentBlockStop(0),
        ReasoningDone("Hmm.", MARK, 0),
        MessageStop("max_tokens", Usage()),
    ]


def test_responses_reasoning_is_left_out_and_the_calls_stay_one_reply(
    openai_adapter: OpenAIAdapter,
) -> None:
    item = {"id": "rs_1", "type": "reasoning", "summary": [], "encrypted_content": "gAAA"}
    messages = [
        TextMessage("Look up a and b"),
        ReasoningMessage("", "openai", item),
        ToolCallMessage("lookup", "call_a", {"q": "a"}, "A", message="Looking."),
        ReasoningMessage("more", "openai", MARK),
        ToolCallMessage("lookup", "call_b", {"q": "b"}, "B"),
        ReasoningMessage("done", "openai", MARK),
        TextMessage("Both.", Role.ASSISTANT),
        TextMessage("Thanks"),
    ]
    body = openai_adapter._request(messages, [], OPTIONS)
    check_openai_request(body)
    assert [m["role"] for m in body["messages"]] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
        "user",
    ]
    assert [c["id"] for c in body["messages"][1]["tool_calls"]] == ["call_a", "call_b"]
    assert "gAAA" not in str(body) and "more" not in str(body)


@pytest.mark.parametrize(
    ("reasoning", "effort"),
    [
        (None, None),
        (Reasoning("none"), "none"),
        (Reasoning("low"), "low"),
        (Reasoning("medium", summary="auto"), "medium"),
        (Reasoning("high", budget_tokens=4000), "high"),
        (Reasoning(budget_tokens=4000), None),
        (Reasoning(summary="auto"), None),
    ],
)
def test_reasoning_effort(
    openai_adapter: OpenAIAdapter, reasoning: Reasoning | None, effort: str | None
) -> None:
    options = RequestOptions(temperature=0.5, reasoning=reasoning)
    body: dict[str, Any] = openai_adapter._request([TextMessage("x")], [], options)
    assert body.get("reasoning_effort") == effort
    assert body["temperature"] == 0.5  # compatible servers take both; sent as set
    assert "reasoning" not in body and "include" not in body
