"""The two providers' streaming wire formats, as SSE frames for the fake server to replay.

Standard library only. OpenAI: ``data: <chat.completion.chunk>`` frames ending in
``data: [DONE]``. Anthropic: named events (``message_start`` … ``message_stop``).
"""

from __future__ import annotations

import json
from typing import Any

# --- OpenAI chat completions -------------------------------------------------------------------


def oa_frame(data: Any) -> str:
    return f"data: {json.dumps(data)}\n\n"


def oa_chunk(
    delta: dict[str, Any] | None = None, finish: str | None = None, usage: Any = None
) -> str:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    body: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-test",
        "choices": choices,
    }
    if usage is not None:
        body["usage"] = usage
    return oa_frame(body)


def oa_usage(prompt: int, completion: int) -> str:
    total = prompt + completion
    usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": total}
    return oa_chunk(None, usage=usage)


def oa_call(index: int, call_id: str | None, name: str | None, arguments: str) -> str:
    function: dict[str, Any] = {"arguments": arguments}
    if name is not None:
        function["name"] = name
    call: dict[str, Any] = {"index": index, "function": function}
    if call_id is not None:
        call |= {"id": call_id, "type": "function"}
    return oa_chunk({"tool_calls": [call]})


OA_DONE = "data: [DONE]\n\n"


def oa_text(*pieces: str, finish: str = "stop", usage: tuple[int, int] = (10, 3)) -> list[str]:
    """A whole text reply: role, one delta per piece, finish, usage, [DONE]."""
    return [
        oa_chunk({"role": "assistant", "content": ""}),
        *(oa_chunk({"content": p}) for p in pieces),
        oa_chunk({}, finish=finish),
        oa_usage(*usage),
        OA_DONE,
    ]


def oa_error_body(message: str, kind: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


# --- Anthropic messages ------------------------------------------------------------------------


def an_event(name: str, data: dict[str, Any]) -> str:
    return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n"


def an_start(input_tokens: int = 12, **usage: Any) -> str:
    """``message_start``; ``usage`` adds counts (``cache_read_input_tokens``…)."""
    message: dict[str, Any] = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": 1, **usage},
    }
    return an_event("message_start", {"message": message})


def an_text_block(index: int, *pieces: str) -> list[str]:
    return [
        an_event(
            "content_block_start", {"index": index, "content_block": {"type": "text", "text": ""}}
        ),
        *(
            an_event(
                "content_block_delta", {"index": index, "delta": {"type": "text_delta", "text": p}}
            )
            for p in pieces
        ),
        an_event("content_block_stop", {"index": index}),
    ]


def an_tool_block(index: int, call_id: str, name: str, *fragments: str) -> list[str]:
    block = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
    return [
        an_event("content_block_start", {"index": index, "content_block": block}),
        *(
            an_event(
                "content_block_delta",
                {"index": index, "delta": {"type": "input_json_delta", "partial_json": f}},
            )
            for f in fragments
        ),
        an_event("content_block_stop", {"index": index}),
    ]


def an_thinking_block(
    index: int, *pieces: str, signature: str, signature_parts: int = 1
) -> list[str]:
    """A ``thinking`` block: its text in ``thinking_delta``s, then its signature in
    ``signature_parts`` ``signature_delta``s, as the API streams it."""
    size = -(-len(signature) // signature_parts)
    parts = [signature[i : i + size] for i in range(0, len(signature), size)] or [""]
    block = {"type": "thinking", "thinking": "", "signature": ""}
    return [
        an_event("content_block_start", {"index": index, "content_block": block}),
        *(
            an_event(
                "content_block_delta",
                {"index": index, "delta": {"type": "thinking_delta", "thinking": p}},
            )
            for p in pieces
        ),
        *(
            an_event(
                "content_block_delta",
                {"index": index, "delta": {"type": "signature_delta", "signature": s}},
            )
            for s in parts
        ),
        an_event("content_block_stop", {"index": index}),
    ]


def an_redacted_block(index: int, data: str) -> list[str]:
    """A ``redacted_thinking`` block: all of it in its ``content_block_start``."""
    block = {"type": "redacted_thinking", "data": data}
    return [
        an_event("content_block_start", {"index": index, "content_block": block}),
        an_event("content_block_stop", {"index": index}),
    ]


def an_stop(stop_reason: str = "end_turn", output_tokens: int = 5, **usage: Any) -> list[str]:
    """``message_delta`` (with ``usage`` counts beside ``output_tokens``) and ``message_stop``."""
    delta = {"stop_reason": stop_reason, "stop_sequence": None}
    counts = {"output_tokens": output_tokens, **usage}
    return [
        an_event("message_delta", {"delta": delta, "usage": counts}),
        an_event("message_stop", {}),
    ]


def an_text(*pieces: str, stop_reason: str = "end_turn") -> list[str]:
    """A whole text reply."""
    return [an_start(), *an_text_block(0, *pieces), *an_stop(stop_reason)]


def an_error_event(kind: str, message: str) -> str:
    return an_event("error", {"error": {"type": kind, "message": message}})


def an_error_body(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}
