"""The fake upstream of bench/stream.py: an OpenAI- and Anthropic-compatible streaming server.

Standard library and jiter only; raw asyncio HTTP/1.1 with keep-alive, so that it costs the
measurement as little as possible. ``POST /v1/chat/completions`` streams chat-completion
chunks, ``POST /v1/responses`` OpenAI Responses events (one message item, the ``*.done``
events repeating the whole text as the real API does), ``POST /v1/messages`` Anthropic
message events. The request's ``model`` says
what to send: ``bench-<tokens>-<pace ms>``, e.g. ``bench-150-20`` is 150 tokens, one every
20 ms on an absolute schedule (no drift), the first at once; pace 0 is a burst. Token ``i``
is the text `` w<i>``, so a client can check that every token arrived, in order.

Run: ``python -m bench.stream_upstream PORT``.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Iterator

import jiter

_BATCH = 64  # burst frames per write


def token(i: int) -> str:
    return f" w{i}"


def openai_frames(model: str, tokens: int) -> Iterator[bytes]:
    """A chat-completions stream: role, one chunk per token, finish, usage, [DONE]."""
    head = f'data: {{"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1,"model":"{model}","choices":[{{"index":0,"delta":'  # noqa: E501
    yield (head + '{"role":"assistant","content":""},"finish_reason":null}]}\n\n').encode()
    for i in range(tokens):
        delta = json.dumps({"content": token(i)})
        yield (head + delta + ',"logprobs":null,"finish_reason":null}]}\n\n').encode()
    yield (head + '{},"finish_reason":"stop"}]}\n\n').encode()
    usage = {"prompt_tokens": 5, "completion_tokens": tokens, "total_tokens": tokens + 5}
    chunk = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1}
    last = json.dumps({**chunk, "model": model, "choices": [], "usage": usage})
    yield f"data: {last}\n\n".encode()
    yield b"data: [DONE]\n\n"


_RESPONSE = {"id": "resp_bench", "object": "response", "created_at": 1, "output": []}
_MESSAGE = {"id": "msg_bench", "type": "message", "role": "assistant", "content": []}


def responses_frames(model: str, tokens: int) -> Iterator[bytes]:
    """A Responses stream: created, in_progress, one message item of ``tokens`` text deltas
    (``output_text.done``, ``content_part.done`` and ``output_item.done`` with the whole text),
    completed with the output and usage."""
    seq = iter(range(tokens + 16))

    def event(name: str, **data: object) -> bytes:
        return _event(name, {"sequence_number": next(seq), **data})

    where = {"item_id": "msg_bench", "output_index": 0, "content_index": 0}
    response = {**_RESPONSE, "model": model, "status": "in_progress", "usage": None}
    yield event("response.created", response=response)
    yield event("response.in_progress", response=response)
    item = {**_MESSAGE, "status": "in_progress"}
    yield event("response.output_item.added", output_index=0, item=item)
    part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
    yield event("response.content_part.added", **where, part=part)
    for i in range(tokens):
        yield event("response.output_text.delta", **where, delta=token(i), logprobs=[])
    text = "".join(token(i) for i in range(tokens))
    yield event("response.output_text.done", **where, text=text, logprobs=[])
    part = {**part, "text": text}
    yield event("response.content_part.done", **where, part=part)
    item = {**item, "status": "completed", "content": [part]}
    yield event("response.output_item.done", output_index=0, item=item)
    usage = {
        "input_tokens": 5,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": tokens + 5,
    }
    response = {**response, "status": "completed", "output": [item], "usage": usage}
    yield event("response.completed", response=response)


def _event(name: str, data: dict[str, object]) -> bytes:
    return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n".encode()


def anthropic_frames(model: str, tokens: int) -> Iterator[bytes]:
    """A messages stream: message_start, ping, one text block of ``tokens`` deltas, the stop."""
    message = {
        "id": "msg_bench",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 5, "output_tokens": 1},
    }
    yield _event("message_start", {"message": message}) + _event("ping", {})
    yield _event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}})
    for i in range(tokens):
        yield _event(
            "content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": token(i)}}
        )
    yield _event("content_block_stop", {"index": 0})
    delta = {"stop_reason": "end_turn", "stop_sequence": None}
    yield _event("message_delta", {"delta": delta, "usage": {"output_tokens": tokens}})
    yield _event("message_stop", {})


def plan(model: str) -> tuple[int, float]:
    """``(tokens, pace in seconds)`` from a ``bench-<tokens>-<pace ms>`` model name."""
    _, tokens, pace = model.split("-")
    return int(tokens), float(pace) / 1000


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


_TOKEN_MARKS = {"openai": b'"content": " w', "responses": b'"delta": " w', "anthropic": b'" w'}
"""What only a token's frame holds, by wire format (a Responses ``*.done`` frame holds them all)."""


async def _send(
    writer: asyncio.StreamWriter, frames: Iterator[bytes], pace: float, mark: bytes
) -> None:
    writer.write(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    )
    if pace == 0:
        batch: list[bytes] = []
        for frame in frames:
            batch.append(frame)
            if len(batch) == _BATCH:
                writer.write(_chunk(b"".join(batch)))
                batch = []
                await writer.drain()
        writer.write(_chunk(b"".join(batch)) if batch else b"")
    else:
        start = time.monotonic()
        sent = 0
        for frame in frames:
            if mark in frame:  # a token: token k goes at start + k * pace, the first at once
                wait = start + sent * pace - time.monotonic()
                sent += 1
                if wait > 0:
                    await asyncio.sleep(wait)
            writer.write(_chunk(frame))
    writer.write(b"0\r\n\r\n")
    await writer.drain()


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Answer requests on one connection until the client closes it."""
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            request_line, *headers = head.decode("latin-1").split("\r\n")
            length = next(
                (
                    int(h.split(":", 1)[1])
                    for h in headers
                    if h.lower().startswith("content-length")
                ),
                0,
            )
            body = jiter.from_json(await reader.readexactly(length)) if length else {}
            model = str(body.get("model", "bench-10-0"))
            tokens, pace = plan(model)
            path = request_line.split(" ")[1]
            wire = (
                "anthropic"
                if path.endswith("/messages")
                else "responses"
                if path.endswith("/responses")
                else "openai"
            )
            frames = {
                "anthropic": anthropic_frames,
                "responses": responses_frames,
                "openai": openai_frames,
            }[wire](model, tokens)
            await _send(writer, frames, pace, _TOKEN_MARKS[wire])
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
        pass
    finally:
        writer.close()


async def serve(port: int) -> None:
    server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=1024)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    try:
        import uvloop

        uvloop.install()
    except ImportError:  # pragma: no cover
        pass
    asyncio.run(serve(int(sys.argv[1])))
