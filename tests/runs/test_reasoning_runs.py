"""Reasoning in the runs layer with a scripted adapter, on both databases: the log replays a
reasoning block and its message exactly, usage adds up by kind, and a dead run's recovery keeps
only the reply's text, never its reasoning."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import pytest

from app.domain import (
    ContentBlockDelta,
    ContentBlockStart,
    ContentBlockStop,
    MessageStop,
    ReasoningDone,
    StreamChunk,
    ToolUse,
    Usage,
)
from app.runs.events import RunEvent, chunk_event
from app.runs.follow import RunReader
from app.runs.log_codec import merged_rows
from app.runs.services import Services
from app.storage import RunRepository
from tests.domain.domain_support import ScriptedAdapter, Step
from tests.runs.conftest import (
    OWNER,
    MakeServices,
    all_events,
    conversations,
    new_conversation,
    start_run,
    stored_events,
)

SIGNED = {"type": "thinking", "signature": "c2ln"}


def thinking(text: str, index: int = 0) -> list[Step]:
    return [
        ContentBlockStart(index, "reasoning"),
        *(ContentBlockDelta(word, index) for word in text.split("|")),
        ContentBlockStop(index),
        ReasoningDone(text.replace("|", ""), SIGNED, index),
    ]


def body(event: RunEvent) -> Any:
    return json.loads(event.data)


async def test_a_reasoning_block_is_logged_and_replayed_exactly(
    make_services: MakeServices,
) -> None:
    reply: list[Step] = [
        *thinking("Think|ing."),
        ContentBlockStart(1),
        ContentBlockDelta("Hi", 1),
        ContentBlockStop(1),
        MessageStop("end_turn", Usage(10, 4, 2, 6, 1)),
    ]
    services = await make_services(ScriptedAdapter([reply]))
    conv_id = await new_conversation(services, "hi")
    run = await start_run(services, conv_id)
    live = await all_events(run)
    assert [e.name for e in live] == [
        "run_started",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "message",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_stop",
        "message",
        "done",
    ]
    assert body(live[1]) == {"index": 0, "type": "reasoning"}
    assert body(live[6]) == {"index": 1, "type": "text"}
    assert body(live[5])["message"] == {
        "type": "ReasoningMessage",
        "text": "Thinking.",
        "provider": "scripted",
        "payload": SIGNED,
        "role": "assistant",
    }
    assert body(live[9])["usage"] == {
        "input_tokens": 10,
        "output_tokens": 4,
        "reasoning_tokens": 2,
        "cache_read_tokens": 6,
        "cache_write_tokens": 1,
    }
    other = await make_services(ScriptedAdapter([]))  # another process reads the log
    replayed = await stored_events(other, conv_id, run.run_id)
    assert [(e.seq, e.name, e.data) for e in replayed] == [(e.seq, e.name, e.data) for e in live]


async def test_a_runs_usage_adds_up_every_kind_over_its_replies(
    make_services: MakeServices,
) -> None:
    first: list[Step] = [
        *thinking("Add|ing."),
        ToolUse("add_numbers", {"numbers": [1, 2]}, "c1"),
        MessageStop("tool_use", Usage(10, 3, 2, 8, 2)),
    ]
    second: list[Step] = [
        ContentBlockStart(0),
        ContentBlockDelta("3"),
        ContentBlockStop(0),
        MessageStop("end_turn", Usage(20, 1, None, 12, None)),
    ]
    services = await make_services(ScriptedAdapter([first, second]))
    conv_id = await new_conversation(services, "add", tools=["add_numbers"])
    events = await all_events(await start_run(services, conv_id))
    stored = [body(e)["message"]["type"] for e in events if e.name == "message"]
    assert stored == ["ReasoningMessage", "ToolCallMessage", "TextMessage"]
    [record], _ = await RunReader(services, OWNER).list(conv_id, 10, None)
    assert record.usage == {
        "input_tokens": 30,
        "output_tokens": 4,
        "reasoning_tokens": 2,
        "cache_read_tokens": 20,
        "cache_write_tokens": 2,
    }


async def dead_run(
    services: Services, conv_id: str, run_id: str, chunks: Sequence[StreamChunk]
) -> None:
    """A run whose process died after streaming ``chunks``: its lease (0.05 s) left to expire,
    its row ``running``, its log the chunks' events."""
    async with services.repository(None) as repo:
        await repo.acquire_lease(conv_id, run_id, 0.05)
        runs = RunRepository(repo.session)
        await runs.create(run_id, conv_id, OWNER, "cancel")
        events = [chunk_event(i, c) for i, c in enumerate(chunks)]
        await runs.add_events(merged_rows(run_id, events))


REASONING_THEN_TEXT = [
    ContentBlockStart(0, "reasoning"),
    ContentBlockDelta("I will ", 0),
    ContentBlockDelta("say it.", 0),
    ContentBlockStop(0),
    ContentBlockStart(1, "text"),
    ContentBlockDelta("half ", 1),
    ContentBlockDelta("done", 1),
]


@pytest.mark.parametrize(
    ("chunks", "kept"),
    [
        (REASONING_THEN_TEXT, "half done"),
        (REASONING_THEN_TEXT[:3], None),  # it died thinking: no reply to keep
        # a text block reusing a reasoning block's index is text again
        ([*REASONING_THEN_TEXT[:4], ContentBlockStart(0), ContentBlockDelta("so")], "so"),
    ],
)
async def test_a_dead_runs_recovery_keeps_its_text_without_its_reasoning(
    make_services: MakeServices, chunks: list[StreamChunk], kept: str | None
) -> None:
    services = await make_services(ScriptedAdapter([]))
    conv_id = await new_conversation(services, "hi")
    run_id = "0" * 31 + "2"
    await dead_run(services, conv_id, run_id, chunks)
    await asyncio.sleep(0.1)
    reader = RunReader(services, OWNER)
    resume = await reader.resume(conv_id, f"{run_id}:{len(chunks)}")
    assert resume is not None
    rest = [e async for batch in reader.follow(resume) for e in batch]  # ends the run
    view = await conversations(services).get(conv_id)
    assert view.status == "idle"
    if kept is None:
        assert [e.name for e in rest] == ["error", "done"]
        assert view.record.message_count == 2  # the system prompt and the user's
        return
    assert [e.name for e in rest] == ["message", "error", "done"]
    assert body(rest[0])["message"] == {
        "type": "TextMessage",
        "text": kept,
        "role": "assistant",
        "incomplete": True,
    }
    assert body(rest[2])["status"] == "interrupted"
    assert view.record.message_count == 3
