"""The translator from Parley's run events to the AI SDK's chunks, and stored messages as
UIMessages: pure functions, on events built by the runs layer's own constructors."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from app.api.ai_sdk.chunks import Translator, stream_frames
from app.api.ai_sdk.messages import index_of, reply_id, ui_messages
from app.domain import (
    AgentMessage,
    ContentBlockDelta,
    ContentBlockStart,
    ContentBlockStop,
    ReasoningMessage,
    Role,
    TextMessage,
    ToolCallMessage,
    ToolUse,
)
from app.runs.events import (
    SHUTTING_DOWN_ERROR,
    RunEvent,
    chunk_event,
    done,
    error_data,
    first_event,
    message_data,
    notice,
    numbered,
    requires_action,
    run_started,
)

CONV = "c" * 32


def run_events(*steps: Any) -> list[RunEvent]:
    """A run's events, numbered in order: chunks and bodies alike."""
    events = [first_event(run_started("r" * 32, CONV, 1, 1))]
    for step in steps:
        seq = events[-1].seq
        events.append(
            chunk_event(seq, step) if not hasattr(step, "event") else numbered(seq, [step])[0]
        )
    return events


def translate(events: list[RunEvent]) -> list[dict[str, Any]]:
    translator = Translator("m-1")
    return [chunk for event in events for chunk in translator.chunks(event)]


def test_a_stop_mid_text_closes_the_part_then_aborts_and_finishes() -> None:
    chunks = translate(
        run_events(ContentBlockStart(0), ContentBlockDelta("Hel", 0), done("aborted", 2, 2))
    )
    assert chunks == [
        {"type": "start", "messageId": "m-1"},
        {"type": "start-step"},
        {"type": "text-start", "id": "text-0-0"},
        {"type": "text-delta", "id": "text-0-0", "delta": "Hel"},
        {"type": "text-end", "id": "text-0-0"},
        {"type": "finish-step"},
        {"type": "abort", "reason": "the run was cancelled"},
        {"type": "finish", "finishReason": "other"},
    ]


def test_a_client_tool_ends_the_message_awaiting_its_result() -> None:
    call = ToolCallMessage("get_location", "call_1", {}, pending=True)
    chunks = translate(
        run_events(
            ContentBlockStart(0),
            ContentBlockStop(0),  # an empty text block makes no part
            ToolUse("get_location", {}, "call_1"),
            message_data(1, 2, call),
            requires_action([call]),
            done("requires_action", 2, 2),
        )
    )
    assert [c["type"] for c in chunks] == [
        "start",
        "start-step",
        "tool-input-start",
        "tool-input-delta",
        "tool-input-available",
        "finish-step",
        "finish",
    ]
    assert chunks[-1]["finishReason"] == "tool-calls"


def test_a_server_tools_error_is_a_tool_output_error() -> None:
    failed = ToolCallMessage("add_numbers", "call_1", {}, error="boom")
    chunks = translate(run_events(message_data(1, 2, failed)))
    assert chunks[-1] == {"type": "tool-output-error", "toolCallId": "call_1", "errorText": "boom"}


def test_a_failure_is_an_error_chunk_then_the_finish() -> None:
    chunks = translate(run_events(error_data("internal", "it broke", True), done("failed", 1, 1)))
    assert chunks[2:] == [
        {"type": "error", "errorText": "it broke (internal)"},
        {"type": "finish-step"},
        {"type": "finish", "finishReason": "error"},
    ]


async def frames_of(batches: list[list[RunEvent]]) -> str:
    async def source() -> AsyncIterator[list[RunEvent]]:
        for batch in batches:
            yield batch

    async def name(started: RunEvent) -> str:
        return f"id-{json.loads(started.data)['message_count']}"

    return b"".join([data async for data in stream_frames(source(), name)]).decode()


async def test_done_is_followed_by_the_done_frame_and_a_cut_stream_is_not() -> None:
    events = run_events(done("completed", 1, 1))
    whole = await frames_of([events[:1], events[1:]])
    assert whole.startswith('data: {"type":"start","messageId":"id-1"}\n\n')
    assert whole.endswith('data: {"type":"finish","finishReason":"stop"}\n\ndata: [DONE]\n\n')
    cut = await frames_of([events[:1], [notice(SHUTTING_DOWN_ERROR)]])
    assert "[DONE]" not in cut and '"type":"error"' in cut


def test_stored_messages_group_into_one_assistant_message_in_steps() -> None:
    messages = [
        AgentMessage("Be brief."),
        TextMessage("add 1 and 2"),
        ReasoningMessage("I will add.", "offline", {"s": "x"}),
        ToolCallMessage("add_numbers", "call_1", {"numbers": [1, 2]}, result=3, message="Sure."),
        ReasoningMessage("", "openai", {"encrypted": "…"}),  # nothing to show
        TextMessage("3", Role.ASSISTANT, incomplete=True),
        TextMessage("thanks"),
    ]
    ui = ui_messages(CONV, messages)
    assert [(m["id"], m["role"]) for m in ui] == [
        (f"{CONV}-0", "system"),
        (f"{CONV}-1", "user"),
        (f"{CONV}-2", "assistant"),
        (f"{CONV}-6", "user"),
    ]
    assert ui[2]["parts"] == [
        {"type": "step-start"},
        {"type": "reasoning", "text": "I will add.", "state": "done"},
        {"type": "text", "text": "Sure.", "state": "done"},
        {
            "type": "tool-add_numbers",
            "toolCallId": "call_1",
            "input": {"numbers": [1, 2]},
            "state": "output-available",
            "output": 3,
        },
        {"type": "step-start"},
        {
            "type": "text",
            "text": "3",
            "state": "done",
            "providerMetadata": {"parley": {"incomplete": True}},
        },
    ]
    # a run's reply id: a new message after a user's, the same one after tool results
    assert reply_id(CONV, messages) == f"{CONV}-7"
    assert reply_id(CONV, messages[:4]) == f"{CONV}-2"


def test_only_our_ids_name_an_index() -> None:
    assert index_of(CONV, f"{CONV}-12") == 12
    for other in (
        None,
        "",
        "abc",
        f"{'d' * 32}-1",
        f"{CONV}-x",
        f"{CONV}-1-2",
        f"{CONV}-" + "9" * 12,
    ):
        assert index_of(CONV, other) is None
