"""The event vocabulary: ids, merged delta rows and their expansion, the unfinished reply."""

from __future__ import annotations

import asyncio
import json

import pytest

from app.domain import ContentBlockDelta, ContentBlockStart, ProviderError
from app.providers.errors import _BY_KIND, _BY_STATUS
from app.runs.events import (
    ErrorCode,
    chunk_event,
    error_for,
    event_id,
    make_event,
    merged_rows,
    parse_event_id,
    stored_events,
    unfinished_reply,
)
from app.runs.live import LiveRun


def test_event_ids_name_the_run_and_the_position() -> None:
    assert parse_event_id(event_id("abc", 12)) == ("abc", 12)
    for bad in ("", "abc", "abc:", ":3", "abc:x", "abc:-1", "abc:1e3", "abc:" + "9" * 10):
        with pytest.raises(ValueError):
            parse_event_id(bad)


def test_consecutive_deltas_of_a_block_share_a_row_and_expand_as_sent() -> None:
    events = [
        chunk_event(1, ContentBlockStart(0)),
        chunk_event(2, ContentBlockDelta("a")),
        chunk_event(3, ContentBlockDelta("b\n")),
        chunk_event(4, ContentBlockDelta("c", index=1)),
        make_event(5, "message_stop", {"stop_reason": "end_turn"}),
        chunk_event(6, ContentBlockDelta("é")),
    ]
    rows = merged_rows("r", events)
    assert [(r.seq, r.count, r.name) for r in rows] == [
        (1, 1, "content_block_start"),
        (2, 2, "content_block_delta"),
        (4, 1, "content_block_delta"),
        (5, 1, "message_stop"),
        (6, 1, "content_block_delta"),
    ]
    assert json.loads(rows[1].data) == {"index": 0, "deltas": ["a", "b\n"]}
    expanded = [e for row in rows for e in stored_events(row)]
    assert [(e.seq, e.name, e.data) for e in expanded] == [(e.seq, e.name, e.data) for e in events]
    assert (
        expanded[2].frame("r")
        == b'id: r:3\nevent: content_block_delta\ndata: {"index":0,"delta":"b\\n"}\n\n'
    )


def test_the_unfinished_reply_is_the_text_after_the_last_message() -> None:
    events = [
        chunk_event(1, ContentBlockDelta("old")),
        make_event(2, "message", {"index": 1}),
        chunk_event(3, ContentBlockDelta("new ")),
        chunk_event(4, ContentBlockDelta("text")),
    ]
    assert unfinished_reply(merged_rows("r", events)) == "new text"


def test_every_code_a_provider_error_can_carry_is_in_the_vocabulary() -> None:
    codes = {code for code, _ in [*_BY_STATUS.values(), *_BY_KIND.values()]}
    assert codes <= set(ErrorCode)
    assert error_for(ProviderError("timeout", "slow", retryable=True))["code"] == "timeout"
    assert error_for(RuntimeError("bug"))["code"] == ErrorCode.INTERNAL


async def test_a_live_run_followed_from_past_its_end_sends_only_what_comes_after() -> None:
    """An id beyond a live run's last event (a client of a process that sent events it never
    stored, or a made-up one): only later events are sent, and none if the run ends first."""
    run = LiveRun("r", "c", "owner", "cancel", 1, 1, [make_event(1, "run_started", {})])

    async def read(after: int) -> list[int]:
        return [e.seq async for batch in run.follow(after) for e in batch]

    ahead, far_ahead = asyncio.create_task(read(3)), asyncio.create_task(read(99))
    await asyncio.sleep(0)
    for seq in range(2, 6):
        run.publish([make_event(seq, "done" if seq == 5 else "content_block_delta", {})])
        await asyncio.sleep(0)
    assert await asyncio.wait_for(ahead, 1) == [4, 5]
    assert await asyncio.wait_for(far_ahead, 1) == []
    assert await read(0) == [1, 2, 3, 4, 5]
