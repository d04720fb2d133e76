"""The log codec: how a run's events are stored as rows (``run_events``) and read back.

May import storage and the runs layer's events. A row holds one event, or a run of consecutive
text deltas of one block merged into one (``{"index", "deltas": [...]}``), so a reply of many
tokens is a few rows; reading a row gives back the events exactly as they were sent.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence

from app.runs.events import RunEvent
from app.runs.payloads import EventName, dumps
from app.storage import EventRow

_DELTA = EventName.CONTENT_BLOCK_DELTA


def merged_rows(run_id: str, events: Sequence[RunEvent]) -> list[EventRow]:
    """The rows that store ``events`` (in order): consecutive text deltas of one block share one."""
    rows: list[EventRow] = []
    deltas: list[str] = []
    first: RunEvent | None = None

    def close() -> None:
        if first is None:
            return
        if len(deltas) == 1:
            rows.append(EventRow(run_id, first.seq, 1, first.name, first.data))
        else:
            data = dumps({"index": first.index, "deltas": deltas})
            rows.append(EventRow(run_id, first.seq, len(deltas), _DELTA, data))

    for event in events:
        if event.delta is not None:
            if (
                first is not None
                and first.index == event.index
                and (first.seq + len(deltas) == event.seq)
            ):
                deltas.append(event.delta)
                continue
            close()
            first, deltas = event, [event.delta]
            continue
        close()
        first, deltas = None, []
        rows.append(EventRow(run_id, event.seq, 1, event.name, event.data))
    close()
    return rows


def stored_events(row: EventRow) -> Iterator[RunEvent]:
    """The events a stored row holds, as they were sent."""
    if row.count == 1:
        if row.name == _DELTA:
            body = json.loads(row.data)
            yield RunEvent(row.seq, _DELTA, row.data, body["delta"], body["index"])
        else:
            yield RunEvent(row.seq, EventName(row.name), row.data)
        return
    merged = json.loads(row.data)
    index = merged["index"]
    for offset, delta in enumerate(merged["deltas"]):
        data = dumps({"index": index, "delta": delta})
        yield RunEvent(row.seq + offset, _DELTA, data, delta, index)


def unfinished_reply(rows: Sequence[EventRow]) -> str:
    """The text a run streamed after its last stored message: the reply it was writing (its
    reasoning blocks' deltas left out)."""
    text: list[str] = []
    reasoning: set[int] = set()
    for row in rows:
        if row.name == EventName.MESSAGE:
            text.clear()
        elif row.name == EventName.CONTENT_BLOCK_START:
            body = json.loads(row.data)
            if body.get("type") == "reasoning":
                reasoning.add(body["index"])
            else:
                reasoning.discard(body["index"])
        elif row.name == _DELTA:
            text.extend(e.delta or "" for e in stored_events(row) if e.index not in reasoning)
    return "".join(text)
