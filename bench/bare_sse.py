"""The baseline for bench/relay.py: a bare sse-starlette endpoint sending Parley's events.

``GET /stream?tokens=N`` sends the same event names and JSON bodies as a Parley run of N words
with the offline provider, from memory, with no database and no model.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI
from sse_starlette import EventSourceResponse, ServerSentEvent

app = FastAPI()


def _events(tokens: int) -> list[tuple[str, dict[str, Any]]]:
    words = ["a" if i == 0 else " a" for i in range(tokens)]
    text = "".join(words)
    return [
        (
            "run_started",
            {"run_id": "r" * 32, "conversation_id": "c" * 32, "message_count": 1, "version": 2},
        ),
        ("content_block_start", {"index": 0}),
        *(("content_block_delta", {"index": 0, "delta": w}) for w in words),
        ("content_block_stop", {"index": 0}),
        (
            "message_stop",
            {"stop_reason": "end_turn", "usage": {"input_tokens": tokens, "output_tokens": tokens}},
        ),
        (
            "message",
            {
                "index": 1,
                "version": 3,
                "message": {"type": "TextMessage", "text": text, "role": "assistant"},
            },
        ),
        ("done", {"status": "completed", "message_count": 2, "version": 3}),
    ]


@app.get("/stream")
async def stream(tokens: int = 200) -> EventSourceResponse:
    async def encoded() -> AsyncIterator[ServerSentEvent]:
        for seq, (name, payload) in enumerate(_events(tokens), 1):
            data = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
            yield ServerSentEvent(data, event=name, id=str(seq))

    return EventSourceResponse(encoded(), ping=0)
