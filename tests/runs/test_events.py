"""The event vocabulary: ids, numbering, bodies, codes, merged delta rows and their expansion,
the unfinished reply."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from app.domain import (
    ContentBlockDelta,
    ContentBlockStart,
    ContextWindowError,
    MessageStop,
    ProviderError,
    Usage,
)
from app.providers.errors import _BY_KIND, _BY_STATUS
from app.runs.codes import code_for
from app.runs.events import (
    ErrorCode,
    EventName,
    RunEvent,
    chunk_event,
    done,
    error_data,
    error_for,
    event_id,
    numbered,
    parse_event_id,
    recovered_after,
)
from app.runs.live import LiveRun
from app.runs.log_codec import merged_rows, stored_events, unfinished_reply
from app.runs.payloads import dumps
from app.storage import LeaseHeld, LeaseLost


def event(seq: int, name: str, payload: Any) -> RunEvent:
    """An event at ``seq`` with any body (the tests' own, not numbered by a run)."""
    return RunEvent(seq, EventName(name), dumps(payload))


def test_event_ids_name_the_run_and_the_position() -> None:
    assert parse_event_id(event_id("abc", 12)) == ("abc", 12)
    for bad in ("", "abc", "abc:", ":3", "abc:x", "abc:-1", "abc:1e3", "abc:" + "9" * 10):
        with pytest.raises(ValueError):
            parse_event_id(bad)


def test_consecutive_deltas_of_a_block_share_a_row_and_expand_as_sent() -> None:
    events = [
        chunk_event(0, ContentBlockStart(0)),
        chunk_event(1, ContentBlockDelta("a")),
        chunk_event(2, ContentBlockDelta("b\n")),
        chunk_event(3, ContentBlockDelta("c", index=1)),
        event(5, "message_stop", {"stop_reason": "end_turn"}),
        chunk_event(5, ContentBlockDelta("é")),
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
    assert expanded[2].data == '{"index":0,"delta":"b\\n"}'


def test_the_unfinished_reply_is_the_text_after_the_last_message() -> None:
    events = [
        chunk_event(0, ContentBlockDelta("old")),
        event(2, "message", {"index": 1}),
        chunk_event(2, ContentBlockDelta("new ")),
        chunk_event(3, ContentBlockDelta("text")),
    ]
    assert unfinished_reply(merged_rows("r", events)) == "new text"


def test_every_code_a_provider_error_can_carry_is_in_the_vocabulary() -> None:
    codes = {code for code, _ in [*_BY_STATUS.values(), *_BY_KIND.values()]}
    assert codes <= set(ErrorCode)
    assert error_for(ProviderError("timeout", "slow", retryable=True)).code == "timeout"
    assert error_for(RuntimeError("bug")).code == ErrorCode.INTERNAL


def test_one_mapping_gives_an_exception_its_code() -> None:
    """The ``error`` event and problem+json ask the same table (app/runs/codes.py)."""
    assert code_for(LeaseHeld("c", "r")) == ErrorCode.CONVERSATION_RUNNING  # not its base's
    assert (
        code_for(LeaseLost("c", "r")) == ErrorCode.LEASE_LOST == error_for(LeaseLost("c", "r")).code
    )
    window = ContextWindowError("too long")
    assert code_for(window) == ErrorCode.CONTEXT_TOO_LONG == error_for(window).code
    assert code_for(KeyError("x")) == ErrorCode.INTERNAL


def test_events_are_numbered_after_the_last_one() -> None:
    bodies = [error_data(ErrorCode.TIMEOUT, "slow", True), done("failed", 3, 7)]
    first, second = numbered(4, bodies)
    assert (first.seq, first.name, second.seq, second.name) == (5, "error", 6, "done")
    assert chunk_event(6, ContentBlockDelta("x")).seq == 7
    assert recovered_after(9) == 9 + 1_000_000


def test_bodies_are_spelled_as_before() -> None:
    """Compact JSON, Unicode as is; ``retry_after`` only when named, uncounted usage null."""
    assert error_data("timeout", "lent é", True).to_json() == (
        '{"code":"timeout","detail":"lent é","retryable":true}'
    )
    retry = ProviderError("rate_limited", "wait", retryable=True, retry_after=1.5)
    assert json.loads(error_for(retry).to_json())["retry_after"] == 1.5
    stop = chunk_event(0, MessageStop("end_turn", Usage(input_tokens=3)))
    assert stop.name == "message_stop" and stop.data == (
        '{"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":null,'
        '"reasoning_tokens":null,"cache_read_tokens":null,"cache_write_tokens":null}}'
    )


async def test_a_live_run_followed_from_past_its_end_sends_only_what_comes_after() -> None:
    """An id beyond a live run's last event (a client of a process that sent events it never
    stored, or a made-up one): only later events are sent, and none if the run ends first."""
    run = LiveRun("r", "c", "owner", "cancel", 1, 1, [event(1, "run_started", {})])

    async def read(after: int) -> list[int]:
        return [e.seq async for batch in run.follow(after) for e in batch]

    ahead, far_ahead = asyncio.create_task(read(3)), asyncio.create_task(read(99))
    await asyncio.sleep(0)
    for seq in range(2, 6):
        run.publish([event(seq, "done" if seq == 5 else "content_block_delta", {})])
        await asyncio.sleep(0)
    assert await asyncio.wait_for(ahead, 1) == [4, 5]
    assert await asyncio.wait_for(far_ahead, 1) == []
    assert await read(0) == [1, 2, 3, 4, 5]
