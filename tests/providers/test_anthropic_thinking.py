"""Thinking on the ``anthropic`` adapter, through the real SDK against a fake messages server:
the stream, the usage split, ``config.reasoning`` as ``thinking``, thinking blocks in the request
exactly as received, the rules the fake enforces (``anthropic_rules``), and the Anthropic
format's round trip. Tool loops: test_anthropic_thinking_loops.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

from app.domain import (
    AgentMessage,
    ContentBlockDelta,
    ContentBlockStart,
    ContentBlockStop,
    Message,
    MessageStop,
    Reasoning,
    ReasoningDone,
    ReasoningMessage,
    RequestOptions,
    Role,
    TextMessage,
    ToolCallMessage,
    Usage,
    from_anthropic_format,
    to_anthropic_format,
)
from app.providers.anthropic_messages import AnthropicAdapter, anthropic_turns

from . import wire
from .anthropic_rules import Registry, ThinkingModel, anthropic_violations
from .fake_server import FakeServer, Reply
from .helpers import drain

HIGH = Reasoning(effort="high")


def get_weather(city: str) -> dict[str, Any]:
    """Weather in a city."""
    return {"city": city, "temp_c": 21}


@pytest.fixture
def model(server: FakeServer) -> ThinkingModel:
    """The fake thinking model behind ``server``: it refuses what Anthropic refuses."""
    return ThinkingModel().serve(server)


# --- the stream ------------------------------------------------------------------------------


async def test_thinking_streams_as_reasoning_blocks(
    server: FakeServer, anthropic_adapter: AnthropicAdapter
) -> None:
    events = [
        wire.an_start(),
        *wire.an_thinking_block(
            0, " Let me", " think.\n", signature="c2lnLTEyMw==", signature_parts=3
        ),
        *wire.an_redacted_block(1, "ENCRYPTED=="),
        *wire.an_text_block(2, "Hi."),
        *wire.an_stop(),
    ]
    server.script(Reply(events=events))
    chunks, error = await drain(
        anthropic_adapter.stream_message([TextMessage("x")], [], RequestOptions())
    )
    assert error is None
    assert chunks == [
        ContentBlockStart(0, "reasoning"),
        ContentBlockDelta(" Let me", 0),
        ContentBlockDelta(" think.\n", 0),
        ContentBlockStop(0),
        ReasoningDone(" Let me think.\n", {"type": "thinking", "signature": "c2lnLTEyMw=="}, 0),
        ContentBlockStart(1, "reasoning"),
        ContentBlockStop(1),
        ReasoningDone("", {"type": "redacted_thinking", "data": "ENCRYPTED=="}, 1),
        ContentBlockStart(2),
        ContentBlockDelta("Hi.", 2),
        ContentBlockStop(2),
        MessageStop("end_turn", Usage(12, 5)),
    ]


async def test_a_thinking_block_keeps_every_field_it_came_with(
    server: FakeServer, anthropic_adapter: AnthropicAdapter
) -> None:
    block = {"type": "thinking", "thinking": "Hm", "signature": "s1", "future": {"k": [1]}}
    events = [
        wire.an_start(),
        wire.an_event("content_block_start", {"index": 0, "content_block": block}),
        wire.an_event(
            "content_block_delta",
            {"index": 0, "delta": {"type": "signature_delta", "signature": "s2"}},
        ),
        wire.an_event("content_block_stop", {"index": 0}),
        *wire.an_stop(),
    ]
    server.script(Reply(events=events))
    reply = await anthropic_adapter.send_message([TextMessage("x")], [], RequestOptions())
    assert reply.reasoning == (
        ReasoningDone("Hm", {"type": "thinking", "signature": "s1s2", "future": {"k": [1]}}, 0),
    )


async def test_a_thinking_delta_that_is_not_text_is_a_bad_response(
    server: FakeServer, anthropic_adapter: AnthropicAdapter
) -> None:
    events = [
        wire.an_start(),
        *wire.an_thinking_block(0, "ok", signature="s")[:1],
        wire.an_event(
            "content_block_delta", {"index": 0, "delta": {"type": "thinking_delta", "thinking": 7}}
        ),
    ]
    server.script(Reply(events=events))
    _, error = await drain(
        anthropic_adapter.stream_message([TextMessage("x")], [], RequestOptions())
    )
    assert error is not None and error.code == "bad_response"


@pytest.mark.parametrize(
    ("start", "stop", "usage"),
    [
        (
            {"cache_creation_input_tokens": 5, "cache_read_input_tokens": 30},
            {"output_tokens_details": {"thinking_tokens": 7}},
            Usage(47, 20, 7, 30, 5),
        ),
        ({}, {}, Usage(12, 20, None, None, None)),
        (  # message_delta's counts are cumulative: they replace message_start's
            {"cache_read_input_tokens": 1},
            {
                "input_tokens": 2,
                "cache_read_input_tokens": 100,
                "cache_creation_input_tokens": None,
            },
            Usage(102, 20, None, 100, None),
        ),
    ],
)
async def test_usage_is_split_by_kind(
    server: FakeServer,
    anthropic_adapter: AnthropicAdapter,
    start: dict[str, Any],
    stop: dict[str, Any],
    usage: Usage,
) -> None:
    events = [
        wire.an_start(12, **start),
        *wire.an_text_block(0, "ok"),
        *wire.an_stop("end_turn", 20, **stop),
    ]
    server.script(Reply(events=events))
    reply = await anthropic_adapter.send_message([TextMessage("x")], [], RequestOptions())
    assert reply.usage == usage


# --- the request -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reasoning", "max_output", "sent"),
    [
        (None, None, {"max_tokens": 4096}),
        (Reasoning(summary="auto"), None, {"max_tokens": 4096}),
        (Reasoning(effort="none"), None, {"max_tokens": 4096, "thinking": {"type": "disabled"}}),
        (
            Reasoning(effort="none", budget_tokens=2000),
            None,
            {"max_tokens": 4096, "thinking": {"type": "disabled"}},
        ),
        *(
            (
                Reasoning(effort=effort),
                None,
                {
                    "max_tokens": 4096 + budget,
                    "thinking": {"type": "adaptive"},
                    "output_config": {"effort": effort},
                },
            )
            for effort, budget in (("low", 2048), ("medium", 8192), ("high", 24576))
        ),
        (
            Reasoning(budget_tokens=3000),
            None,
            {"max_tokens": 7096, "thinking": {"type": "enabled", "budget_tokens": 3000}},
        ),
        (
            Reasoning(effort="low", budget_tokens=1024, summary="none"),
            500,
            {
                "max_tokens": 1524,
                "thinking": {"type": "enabled", "budget_tokens": 1024, "display": "omitted"},
            },
        ),
        (
            Reasoning(effort="medium", summary="auto"),
            100,
            {
                "max_tokens": 8292,
                "thinking": {"type": "adaptive", "display": "summarized"},
                "output_config": {"effort": "medium"},
            },
        ),
    ],
)
async def test_reasoning_maps_to_thinking(
    server: FakeServer,
    anthropic_adapter: AnthropicAdapter,
    model: ThinkingModel,
    reasoning: Reasoning | None,
    max_output: int | None,
    sent: dict[str, Any],
) -> None:
    options = RequestOptions(max_output_tokens=max_output, reasoning=reasoning)
    reply = await anthropic_adapter.send_message([TextMessage("Weather?")], [], options)
    assert reply.stop_reason == "tool_use"  # the fake accepted the request (budget < max_tokens)
    body = server.bodies[0]
    keys = ("max_tokens", "thinking", "output_config")
    assert {k: body[k] for k in keys if k in body} == sent
    assert "temperature" not in body


async def test_a_prefill_with_thinking_on_is_continued_with_thinking_off(
    server: FakeServer, anthropic_adapter: AnthropicAdapter
) -> None:
    """A reply cut short by an abort is continued as a prefill, which Anthropic refuses with
    thinking on: that one request goes with thinking disabled (and the fake enforces it)."""
    ThinkingModel().serve(server)
    messages = [TextMessage("Weather?"), TextMessage("It is", Role.ASSISTANT)]
    server.script(Reply(events=wire.an_text(" sunny.")))
    response = await anthropic_adapter.send_message(messages, [], RequestOptions(reasoning=HIGH))
    assert response.text == " sunny."
    assert server.bodies[-1]["thinking"] == {"type": "disabled"}


def test_thinking_goes_back_exactly_and_first_in_its_turn() -> None:
    thinking = {"type": "thinking", "signature": "sig"}
    messages: list[Message] = [
        TextMessage("go"),
        TextMessage("Earlier words.  ", Role.ASSISTANT),
        ReasoningMessage("  \n spaced\tthinking \n", "anthropic", thinking),
        ReasoningMessage("", "anthropic", {"type": "redacted_thinking", "data": "D"}),
        ReasoningMessage("", "anthropic", {"type": "thinking", "signature": "omitted"}),
        ToolCallMessage("t", "call:1", {}, result="ok", message="  Calling.  "),
    ]
    _, turns = anthropic_turns(messages)
    assert turns[1]["content"] == [
        {"type": "thinking", "thinking": "  \n spaced\tthinking \n", "signature": "sig"},
        {"type": "redacted_thinking", "data": "D"},
        {"type": "thinking", "thinking": "", "signature": "omitted"},
        {"type": "text", "text": "Earlier words.  "},
        {"type": "text", "text": "  Calling.  "},
        {"type": "tool_use", "id": "call_1", "name": "t", "input": {}},
    ]
    assert turns[2]["content"][0]["tool_use_id"] == "call_1"


def test_a_prefill_keeps_its_thinking_and_loses_only_trailing_whitespace() -> None:
    block = {"type": "thinking", "signature": "sig"}
    messages: list[Message] = [
        TextMessage("go"),
        ReasoningMessage(" think ", "anthropic", block),
        TextMessage("Sure:  ", Role.ASSISTANT),
    ]
    _, turns = anthropic_turns(messages)
    assert turns[-1]["content"] == [
        {"type": "thinking", "thinking": " think ", "signature": "sig"},
        {"type": "text", "text": "Sure:"},
    ]
    _, turns = anthropic_turns([*messages[:2], TextMessage(" ", Role.ASSISTANT)])
    assert turns == [{"role": "user", "content": [{"type": "text", "text": "go"}]}]


def test_the_rules_on_a_request_dict() -> None:
    issued = Registry()
    block = issued.sign("a thought")
    redacted = issued.redact("secret")
    issued.issued_with(["t1"], [block, redacted])
    use = {"type": "tool_use", "id": "t1", "name": "f", "input": {}}
    result = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}],
    }

    def body(assistant: list[dict[str, Any]], **thinking: Any) -> dict[str, Any]:
        return {
            "max_tokens": 4096,
            "thinking": thinking or {"type": "adaptive"},
            "messages": [
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": assistant},
                result,
            ],
        }

    assert anthropic_violations(body([block, redacted, use]), issued) == []
    assert anthropic_violations(body([block, use], type="disabled"), issued) == []
    assert anthropic_violations(body([redacted, block, use]), issued) == [
        "messages.1.content: the thinking blocks of the final `assistant` message must be "
        "passed back unmodified and in their original order. When `thinking` is enabled, a final "
        "`assistant` message must start with a thinking block (preceeding the lastmost set of "
        "`tool_use` and `tool_result` blocks). We recommend you include thinking blocks from "
        "previous turns. To avoid this requirement, disable `thinking`. Please consult our "
        "documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
    ]
    forged = {"type": "redacted_thinking", "data": redacted["data"] + "A"}
    assert anthropic_violations(body([block, forged, use]), issued)[0] == (
        "messages.1.content.1: Invalid `data` in `redacted_thinking` block"
    )
    extra = {**block, "cache_control": {"type": "ephemeral"}}
    assert anthropic_violations(body([extra, redacted, use]), issued)[0] == (
        "messages.1.content.0.thinking.cache_control: Extra inputs are not permitted"
    )
    assert anthropic_violations(
        body([block, redacted, use], type="enabled", budget_tokens=1023), issued
    ) == ["thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"]
    too_big = anthropic_violations(
        body([block, redacted, use], type="enabled", budget_tokens=4096), issued
    )
    assert too_big[0].startswith("`max_tokens` must be greater than `thinking.budget_tokens`.")


# --- the Anthropic format ---------------------------------------------------------------------


def test_export_import_export_of_thinking_is_identity() -> None:
    issued = Registry()
    first, second = issued.sign(" first\n"), issued.sign("")
    redacted = issued.redact("r")
    messages: list[Message] = [
        AgentMessage("Be brief."),
        TextMessage("Weather?"),
        ReasoningMessage(
            first["thinking"], "anthropic", {"type": "thinking", "signature": first["signature"]}
        ),
        ReasoningMessage("", "anthropic", redacted),
        ToolCallMessage("get_weather", "toolu_1", {"city": "Paris"}, {"temp_c": 21}),
        ReasoningMessage("", "anthropic", {"type": "thinking", "signature": second["signature"]}),
        TextMessage("21 °C.", Role.ASSISTANT),
    ]
    exported = to_anthropic_format(messages)
    assert exported["messages"][1]["content"][:2] == [first, redacted]
    imported = from_anthropic_format(exported["system"], exported["messages"])
    assert imported == messages
    again = to_anthropic_format(imported)
    assert json.dumps(again, ensure_ascii=False) == json.dumps(exported, ensure_ascii=False)
