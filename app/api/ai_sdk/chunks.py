"""Parley's run events as the AI SDK's UI message stream chunks (protocol ``v1``).

May import the runs layer's vocabulary (app/runs/payloads.py) and the domain. One translator
serves every route that speaks the protocol (``/ai-sdk/chat``, ``?protocol=ai-sdk``): a run's
events, in order, become ``data: {json}`` frames —

    run_started          start {messageId}, start-step
    content_block_start  (a new model round: finish-step, start-step); an ``image`` block
                         (an image the model made, stored): file {url, mediaType}
    content_block_delta  text-start | reasoning-start at the block's first text, then
                         text-delta | reasoning-delta
    content_block_stop   text-end | reasoning-end
    tool_use             tool-input-start, tool-input-delta, tool-input-available
    message              a server tool's outcome: tool-output-available | tool-output-error,
                         then a file per file it carries; others: nothing
    message_stop         (the round ends: its finish-step comes with what follows)
    requires_action      nothing more: the client tools' inputs are out; finish says tool-calls
    error                error {errorText}
    done                 text-end/reasoning-end for blocks left open, finish-step, abort (when
                         aborted), finish {finishReason}, then ``data: [DONE]``

A client tool's call ends the message awaiting its result (``finishReason: tool-calls``); its
result comes back in the next request (``app.api.ai_sdk.request``). A file's ``url`` is the
public path of its content (``GET /files/{id}/content``, under the root path): ``file_url``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any

from app.runs.events import EventName, RunEvent
from app.runs.payloads import dumps

Chunk = dict[str, Any]

HEADER = "x-vercel-ai-ui-message-stream"
"""The response header the AI SDK's transports look for, and its value."""
VERSION = "v1"
DONE_FRAME = b"data: [DONE]\n\n"

FINISH_REASONS = {
    "completed": "stop",
    "requires_action": "tool-calls",
    "aborted": "other",
    "failed": "error",
    "interrupted": "error",
}
"""The AI SDK's finish reason for each way a run ends (``done``'s status)."""


def frame(chunk: Chunk) -> bytes:
    """One chunk as the protocol's SSE frame: a ``data:`` line, no event name, no id."""
    return f"data: {dumps(chunk)}\n\n".encode()


FileUrl = Callable[[str], str]
"""The URL of a file's content, by file id."""


def content_path(file_id: str) -> str:
    """A file's content route, at the root (no ``--root-path``)."""
    return f"/files/{file_id}/content"


def file_chunk(file_id: str, media_type: str, file_url: FileUrl) -> Chunk:
    """The ``file`` chunk of a stored file: its content's URL and its media type."""
    return {"type": "file", "url": file_url(file_id), "mediaType": media_type}


class Translator:
    """Turns one run's events into chunks; ``message_id`` names the reply (its UIMessage id)."""

    def __init__(self, message_id: str, file_url: FileUrl = content_path) -> None:
        self.message_id = message_id
        self.file_url = file_url
        self.round = 0
        self.round_ended = False
        self.blocks: dict[int, str] = {}  # the open blocks of this round: index → part id
        self.kinds: dict[int, str] = {}  # index → "text" or "reasoning", this round
        self.finished = False

    def chunks(self, event: RunEvent) -> list[Chunk]:
        """The chunks of one event (none for most bookkeeping events)."""
        body: dict[str, Any] = json.loads(event.data)
        name = event.name
        if name == EventName.RUN_STARTED:
            return [{"type": "start", "messageId": self.message_id}, {"type": "start-step"}]
        if name == EventName.CONTENT_BLOCK_START and body["type"] == "image":
            image = file_chunk(body["file_id"], body["media_type"], self.file_url)
            return [*self._next_round(), image]
        if name == EventName.CONTENT_BLOCK_START:
            return [*self._next_round(), *self._block_start(body["index"], body["type"])]
        if name == EventName.CONTENT_BLOCK_DELTA:
            return self._block_delta(body["index"], event.delta or body["delta"])
        if name == EventName.CONTENT_BLOCK_STOP:
            return self._block_end(body["index"])
        if name == EventName.TOOL_USE:
            return [*self._next_round(), *_tool_input(body)]
        if name == EventName.MESSAGE_STOP:
            self.round_ended = True
            return []
        if name == EventName.MESSAGE:
            return _message_outcome(body["message"], self.file_url)
        if name == EventName.ERROR:
            return [{"type": "error", "errorText": f"{body['detail']} ({body['code']})"}]
        if name == EventName.DONE:
            return self._done(body["status"])
        return []  # requires_action: the calls' inputs are already out

    def _next_round(self) -> list[Chunk]:
        if not self.round_ended:
            return []
        self.round_ended = False
        self.round += 1
        self.kinds.clear()
        return [*self._close_blocks(), {"type": "finish-step"}, {"type": "start-step"}]

    def _block_start(self, index: int, kind: str) -> list[Chunk]:
        """A block's part begins with its first delta: an empty block (the text before a
        tool call that had none) makes no part, as the stored history has none."""
        self.kinds[index] = kind
        self.blocks[index] = ""
        return []

    def _block_delta(self, index: int, delta: str) -> list[Chunk]:
        part_id = self.blocks.get(index)
        if part_id is None or not delta:  # a block this reader never saw start; no text
            return []
        kind = self.kinds[index]
        begun: list[Chunk] = []
        if not part_id:
            part_id = self.blocks[index] = f"{kind}-{self.round}-{index}"
            begun.append({"type": f"{kind}-start", "id": part_id})
        return [*begun, {"type": f"{kind}-delta", "id": part_id, "delta": delta}]

    def _block_end(self, index: int) -> list[Chunk]:
        part_id = self.blocks.pop(index, None)
        if not part_id:
            return []
        return [{"type": f"{self.kinds[index]}-end", "id": part_id}]

    def _close_blocks(self) -> list[Chunk]:
        return [chunk for index in list(self.blocks) for chunk in self._block_end(index)]

    def _done(self, status: str) -> list[Chunk]:
        self.finished = True
        ending = [*self._close_blocks(), {"type": "finish-step"}]
        if status == "aborted":
            ending.append({"type": "abort", "reason": "the run was cancelled"})
        ending.append({"type": "finish", "finishReason": FINISH_REASONS.get(status, "other")})
        return ending


def _tool_input(body: dict[str, Any]) -> list[Chunk]:
    call_id, name, params = body["tool_call_id"], body["tool_name"], body["params"]
    return [
        {"type": "tool-input-start", "toolCallId": call_id, "toolName": name},
        {"type": "tool-input-delta", "toolCallId": call_id, "inputTextDelta": dumps(params)},
        {"type": "tool-input-available", "toolCallId": call_id, "toolName": name, "input": params},
    ]


def _message_outcome(message: dict[str, Any], file_url: FileUrl) -> list[Chunk]:
    """The chunks of a stored message the stream has not shown yet: a server tool's outcome
    and the files it carries. Text and reasoning were streamed as they came (a model's image
    with its block); a pending call waits."""
    if message.get("type") != "ToolCallMessage" or message.get("pending"):
        return []
    outcome: Chunk = {"toolCallId": message["tool_call_id"]}
    if message.get("error") is not None:
        chunks = [{"type": "tool-output-error", **outcome, "errorText": message["error"]}]
    else:
        chunks = [{"type": "tool-output-available", **outcome, "output": message["result"]}]
    files = message.get("attachments") or ()
    return chunks + [file_chunk(f["file_id"], f["media_type"], file_url) for f in files]


async def stream_frames(
    batches: AsyncIterator[list[RunEvent]],
    message_id: Callable[[RunEvent], Awaitable[str]],
    file_url: FileUrl = content_path,
) -> AsyncIterator[bytes]:
    """A run's event batches as the protocol's bytes, one write per batch; ``message_id``
    names the reply from the run's first event; ``file_url`` the files it shows. Ends with
    ``[DONE]`` after ``done``; a stream cut before it (a shutdown's notice) ends without it,
    so the client resumes."""
    translator: Translator | None = None
    async for batch in batches:
        out: list[bytes] = []
        for event in batch:
            if translator is None:
                if event.name != EventName.RUN_STARTED:
                    out.extend(_notice(event))
                    continue
                translator = Translator(await message_id(event), file_url)
            out.extend(frame(chunk) for chunk in translator.chunks(event))
        if translator is not None and translator.finished:
            out.append(DONE_FRAME)
        if out:
            yield b"".join(out)
        if translator is not None and translator.finished:
            return


def _notice(event: RunEvent) -> Iterable[bytes]:
    """An event before the run's start (a notice with no position): only an error says
    anything a chat can show."""
    if event.name != EventName.ERROR:
        return []
    body = json.loads(event.data)
    return [frame({"type": "error", "errorText": f"{body['detail']} ({body['code']})"})]
