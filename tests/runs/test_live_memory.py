"""A run keeps in memory only the recent events the log also holds; a reader behind them reads
the log first, then memory, and misses nothing (both databases)."""

from __future__ import annotations

import asyncio

from app.runs.live import _TRIM_EVERY, KEEP_EVENTS
from tests.runs.conftest import MakeServices, new_conversation, start_run, stored_events
from tests.runs.test_runs import PacedAdapter

WORDS = 4000


async def test_a_long_run_keeps_only_recent_events_and_a_late_reader_gets_them_all(
    make_services: MakeServices,
) -> None:
    services = await make_services(PacedAdapter(WORDS, 0.0005))
    conv_id = await new_conversation(services, "hi")
    run = await start_run(services, conv_id)
    early = asyncio.create_task(stored_events(services, conv_id, run.run_id))
    most = 0
    while run.seq < WORDS // 2:  # the first half: then a reader starts from the first event
        most = max(most, len(run.events))
        await asyncio.sleep(0.005)
    assert run.base > 0, "nothing was let go"
    late = asyncio.create_task(stored_events(services, conv_id, run.run_id))
    while not run.done:
        most = max(most, len(run.events))
        await asyncio.sleep(0.005)
    # kept: the recent stored events, and what the writer has not stored yet (a flush's worth)
    assert most < KEEP_EVENTS + _TRIM_EVERY + 1000, most
    for reader in (early, late):
        events = await asyncio.wait_for(reader, 30)
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        assert events[-1].name == "done"
        deltas = [e for e in events if e.name == "content_block_delta"]
        assert len(deltas) == WORDS
