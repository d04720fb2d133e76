"""The providers' streaming wire formats, as SSE frames for the fake server to replay.

Standard library only. OpenAI chat completions: ``data: <chat.completion.chunk>`` frames ending
in ``data: [DONE]``. OpenAI Responses: named events (``response.created`` …
``response.completed``). Anthropic: named events (``message_start`` … ``message_stop``).
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


# --- OpenAI Responses --------------------------------------------------------------------------
# Named events (``event: response.output_text.delta``) whose data repeats the name as ``type``,
# numbered by ``sequence_number``; the stream ends with ``response.completed`` (or
# ``.incomplete`` / ``.failed``), without [DONE].


def rs_event(name: str, **data: Any) -> str:
    return f"event: {name}\ndata: {json.dumps({'type': name, 'sequence_number': 0, **data})}\n\n"


def rs_response(
    status: str = "in_progress",
    output: list[dict[str, Any]] | None = None,
    usage: dict[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 1,
        "model": "gpt-test",
        "status": status,
        "output": output or [],
        "usage": usage,
        "error": None,
        "incomplete_details": None,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        **extra,
    }


def rs_created() -> list[str]:
    return [
        rs_event("response.created", response=rs_response()),
        rs_event("response.in_progress", response=rs_response()),
    ]


def rs_usage(
    input_tokens: int = 10, output_tokens: int = 3, reasoning: int = 0, cached: int = 0
) -> dict[str, Any]:
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": input_tokens + output_tokens,
    }


def rs_message(output_index: int, item_id: str, *pieces: str) -> list[str]:
    """An assistant message item of one output_text part, streamed piece by piece."""
    text = "".join(pieces)
    part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
    added = {"id": item_id, "type": "message", "status": "in_progress", "role": "assistant"}
    done = {**added, "status": "completed", "content": [{**part, "text": text}]}
    where = {"item_id": item_id, "output_index": output_index, "content_index": 0}
    return [
        rs_event(
            "response.output_item.added", output_index=output_index, item={**added, "content": []}
        ),
        rs_event("response.content_part.added", **where, part=part),
        *(rs_event("response.output_text.delta", **where, delta=p, logprobs=[]) for p in pieces),
        rs_event("response.output_text.done", **where, text=text, logprobs=[]),
        rs_event("response.content_part.done", **where, part={**part, "text": text}),
        rs_event("response.output_item.done", output_index=output_index, item=done),
    ]


def rs_reasoning_item(
    item_id: str, summary: list[str], encrypted: str | None = "gAAAAABenc+/=="
) -> dict[str, Any]:
    """A reasoning item as ``response.output_item.done`` gives it."""
    item: dict[str, Any] = {
        "id": item_id,
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": t} for t in summary],
    }
    if encrypted is not None:
        item["encrypted_content"] = encrypted
    return item


def rs_reasoning(output_index: int, item: dict[str, Any], *, pieces: int = 2) -> list[str]:
    """A reasoning item streamed: each summary part in ``pieces`` deltas, then the item."""
    item_id = item["id"]
    frames = [
        rs_event(
            "response.output_item.added",
            output_index=output_index,
            item={**item, "summary": [], "encrypted_content": None},
        )
    ]
    for i, part in enumerate(item["summary"]):
        where = {"item_id": item_id, "output_index": output_index, "summary_index": i}
        text = part["text"]
        cut = [text[k * len(text) // pieces : (k + 1) * len(text) // pieces] for k in range(pieces)]
        frames.append(
            rs_event(
                "response.reasoning_summary_part.added",
                **where,
                part={"type": "summary_text", "text": ""},
            )
        )
        frames += [
            rs_event("response.reasoning_summary_text.delta", **where, delta=c) for c in cut if c
        ]
        frames.append(rs_event("response.reasoning_summary_text.done", **where, text=text))
        frames.append(
            rs_event(
                "response.reasoning_summary_part.done",
                **where,
                part={"type": "summary_text", "text": text},
            )
        )
    frames.append(rs_event("response.output_item.done", output_index=output_index, item=item))
    return frames


def rs_call_item(item_id: str, call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {
        "id": item_id,
        "type": "function_call",
        "status": "completed",
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
    }


def rs_call(output_index: int, item: dict[str, Any], *fragments: str) -> list[str]:
    """A function_call item whose arguments stream in ``fragments`` (default: in one)."""
    pieces = fragments or (item["arguments"],)
    where = {"item_id": item["id"], "output_index": output_index}
    return [
        rs_event(
            "response.output_item.added",
            output_index=output_index,
            item={**item, "status": "in_progress", "arguments": ""},
        ),
        *(rs_event("response.function_call_arguments.delta", **where, delta=p) for p in pieces),
        rs_event("response.function_call_arguments.done", **where, arguments=item["arguments"]),
        rs_event("response.output_item.done", output_index=output_index, item=item),
    ]


def rs_completed(
    usage: dict[str, Any] | None = None, output: list[dict[str, Any]] | None = None
) -> str:
    return rs_event(
        "response.completed",
        response=rs_response("completed", output, usage if usage is not None else rs_usage()),
    )


def rs_text(*pieces: str, usage: dict[str, Any] | None = None) -> list[str]:
    """A whole text reply: created, one message item, completed."""
    return [*rs_created(), *rs_message(0, "msg_1", *pieces), rs_completed(usage)]


def rs_failed(code: str, message: str) -> str:
    error = {"code": code, "message": message}
    return rs_event("response.failed", response=rs_response("failed", error=error))


def rs_error(code: str | None, message: str) -> str:
    return rs_event("error", code=code, message=message, param=None)


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
