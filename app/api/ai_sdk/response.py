"""The HTTP response that carries a run in the AI SDK's UI message stream protocol.

May import Starlette, the api's deps and the runs layer. Every route that speaks
the protocol answers through ``chat_stream``: the protocol's header, ``data:`` frames from the
one translator (``app.api.ai_sdk.chunks``), the pings and send timeout of every stream.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from app.api.ai_sdk.chunks import HEADER, VERSION, stream_frames
from app.api.ai_sdk.messages import reply_id
from app.api.deps import Caller
from app.api.event_stream import EventStream
from app.api.paths import file_content_path
from app.runs.events import RunEvent, event_id, parse_event_id

log = logging.getLogger(__name__)

ChatStreamer = Callable[
    [str, AsyncIterator[list[RunEvent]], Callable[[], None] | None], EventStream
]
"""Makes the protocol's response of a run: (run id, its event batches, what closing does)."""

AI_SDK_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The AI SDK's UI message stream (protocol v1, header "
        "`x-vercel-ai-ui-message-stream: v1`): `data:` JSON chunks — `start`, `start-step`, "
        "`text-*`, `reasoning-*`, `tool-*`, `file`, `finish-step`, `error`, `abort`, `finish` — "
        "then "
        "`data: [DONE]`. See docs/frontend.md.",
        "content": {"text/event-stream": {"schema": {"type": "string"}}},
    },
}


def from_start(last_event_id: str) -> str:
    """The id to resume a run's stream from its first event: the AI SDK's resume replays the
    whole reply (its transports' ``resumeStreamIsReplay``). An id not of ours stays as it is,
    to be refused as one."""
    try:
        run_id, _ = parse_event_id(last_event_id)
    except ValueError:
        return last_event_id
    return event_id(run_id, 0)


AI_SDK_FRAME: dict[str, Any] = {
    "type": "object",
    "title": "ai_sdk_chunk",
    "description": "One frame of the AI SDK's UI message stream (`?protocol=ai-sdk`, "
    '`/ai-sdk/…`): no name, no id; `data` a chunk\'s JSON (`{"type": …}`, the `ai` '
    "package's `uiMessageChunkSchema`), `[DONE]` last.",
    "required": ["data"],
    "properties": {
        "event": {"const": "message"},  # a frame without a name is a `message`
        "data": {"type": "string", "pattern": '^(\\[DONE\\]|\\{"type":"[a-z-]+".*)$'},
    },
}
"""The document's schema of each frame (its ``itemSchema``, as the named events have)."""


def chat_streamer(caller: Caller, conversation_id: str) -> ChatStreamer:
    """The protocol's responses for runs of one conversation: the reply's id is read from the
    conversation as the run found it (``run_started``'s ``message_count``)."""

    def file_url(file_id: str) -> str:
        return file_content_path(caller.root_path, file_id)

    async def name(started: RunEvent) -> str:
        count = json.loads(started.data)["message_count"]
        messages = list(await caller.conversations().messages(conversation_id))
        return reply_id(conversation_id, messages[:count])

    def respond(
        run_id: str, batches: AsyncIterator[list[RunEvent]], on_close: Callable[[], None] | None
    ) -> EventStream:
        async def frames() -> AsyncIterator[bytes]:
            async for data in stream_frames(batches, name, file_url):
                yield data

        headers = {HEADER: VERSION, "X-Run-Id": run_id}
        return EventStream(frames(), headers=headers, on_close=on_close)

    return respond
