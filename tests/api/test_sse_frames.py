"""app/api/sse.py: a run's events as Server-Sent Events frames."""

from __future__ import annotations

from app.api.sse import frame, frames
from app.domain import ContentBlockDelta
from app.runs.events import SHUTTING_DOWN_ERROR, chunk_event, notice
from app.runs.log_codec import merged_rows, stored_events
from tests.api.sse import parse


def test_a_frame_names_the_run_and_the_position() -> None:
    event = chunk_event(2, ContentBlockDelta("b\n"))
    expected = b'id: r:3\nevent: content_block_delta\ndata: {"index":0,"delta":"b\\n"}\n\n'
    assert frame(event, "r") == expected
    replayed = [e for row in merged_rows("r", [event]) for e in stored_events(row)]
    assert frame(replayed[0], "r") == expected  # as sent, when read back from the log


def test_a_notice_outside_the_run_has_no_id() -> None:
    data = frame(notice(SHUTTING_DOWN_ERROR), "r")
    assert data.startswith(b"event: error\ndata: {") and b"id:" not in data


def test_a_batch_is_consecutive_frames() -> None:
    batch = [chunk_event(seq, ContentBlockDelta(t)) for seq, t in enumerate(["a", "é"])]
    parsed = parse(frames(batch, "r").decode())
    assert [(e.id, e.name, e.data["delta"]) for e in parsed] == [
        ("r:1", "content_block_delta", "a"),
        ("r:2", "content_block_delta", "é"),
    ]
