"""Both chunk translations over the shared parser: each provider's events, split anywhere,
become the same StreamChunks. Pure translation here (SSE bytes in, chunks out); the real
adapters over the wire, with CRLF frames, an error mid-stream and a cut connection, below."""

from __future__ import annotations

import json

import pytest

from app.domain import (
    ContentBlockDelta,
    ContentBlockStart,
    ContentBlockStop,
    MessageStop,
    ProviderError,
    ReasoningDone,
    RequestOptions,
    StreamChunk,
    TextMessage,
    ToolUse,
    Usage,
)
from app.providers.anthropic_messages import AnthropicAdapter, _EventReader
from app.providers.base import ChunkTranslator
from app.providers.openai_chat import OpenAIAdapter, OpenAIConfig, _ChunkReader
from app.providers.sse import SSEParser

from . import wire
from .fake_server import FakeServer, Reply
from .helpers import drain


def translate(translator: ChunkTranslator, frames: list[str], step: int = 0) -> list[StreamChunk]:
    """The chunks of ``frames``, fed whole or ``step`` bytes at a time, then finished."""
    body = "".join(frames).encode()
    pieces = [body[i : i + step] for i in range(0, len(body), step)] if step else [body]
    parser = SSEParser()
    out = [c for piece in pieces for e in parser.feed(piece) for c in translator.feed(e)]
    return [*out, translator.finish()]


OA_TOOLS = [
    wire.oa_chunk({"role": "assistant", "content": "Let me check."}),
    wire.oa_call(0, "call_a", "weather", '{"ci'),
    wire.oa_call(1, "call_b", "time", '{"zone":'),
    wire.oa_call(0, None, None, 'ty": "Oslo"}'),
    wire.oa_call(1, None, None, ' "CET"}'),
    wire.oa_chunk({}, finish="tool_calls"),
    wire.oa_usage(20, 9),
    "data: [DONE]\n\n",
]
OA_TOOLS_CHUNKS = [
    ContentBlockStart(0),
    ContentBlockDelta("Let me check.", 0),
    ContentBlockStop(0),
    ToolUse("weather", {"city": "Oslo"}, "call_a"),
    ToolUse("time", {"zone": "CET"}, "call_b"),
    MessageStop("tool_use", Usage(20, 9)),
]


@pytest.mark.parametrize("step", [0, 1, 3, 17])
def test_openai_parallel_tool_calls_in_fragments_and_the_usage_chunk(step: int) -> None:
    assert translate(_ChunkReader(), OA_TOOLS, step) == OA_TOOLS_CHUNKS


def test_openai_text_then_done_and_nothing_after_done() -> None:
    frames = [*wire.oa_text("Hel", "lo", usage=(4, 2)), wire.oa_chunk({"content": "late"})]
    assert translate(_ChunkReader(), frames) == [
        ContentBlockStart(0),
        ContentBlockDelta("Hel", 0),
        ContentBlockDelta("lo", 0),
        ContentBlockStop(0),
        MessageStop("end_turn", Usage(4, 2)),
    ]


def test_openai_error_chunk_mid_stream_is_classified() -> None:
    error = wire.oa_frame({"error": {"message": "Overloaded", "type": "server_error"}})
    with pytest.raises(ProviderError) as raised:
        translate(_ChunkReader(), [wire.oa_chunk({"content": "a"}), error])
    assert (raised.value.code, raised.value.retryable) == ("upstream_unavailable", True)


def test_openai_stream_cut_before_finish_reason_is_a_bad_response() -> None:
    with pytest.raises(ProviderError) as raised:
        translate(_ChunkReader(), [wire.oa_chunk({"content": "a"})])
    assert raised.value.code == "bad_response"


def test_openai_chunk_that_is_not_an_object_is_a_bad_response() -> None:
    with pytest.raises(ProviderError) as raised:
        translate(_ChunkReader(), ["data: [1, 2]\n\n"])
    assert raised.value.code == "bad_response"


AN_ALL = [
    wire.an_start(input_tokens=12),
    wire.an_event("ping", {"type": "ping"}),
    *wire.an_text_block(0, "Hi", " there"),
    *wire.an_thinking_block(1, "Hm", "m.", signature="sig-1"),
    wire.an_event(
        "content_block_start",
        {"type": "content_block_start", "index": 2, "content_block": {"type": "web_search"}},
    ),
    wire.an_event("content_block_stop", {"type": "content_block_stop", "index": 2}),
    *wire.an_tool_block(3, "toolu_1", "weather", '{"city"', ': "Oslo"}'),
    wire.an_event("future_event", {"type": "future_event"}),
    *wire.an_stop("tool_use", output_tokens=7),
]


@pytest.mark.parametrize("step", [0, 1, 5, 64])
def test_anthropic_every_event_type_split_anywhere(step: int) -> None:
    assert translate(_EventReader(), AN_ALL, step) == [
        ContentBlockStart(0),
        ContentBlockDelta("Hi", 0),
        ContentBlockDelta(" there", 0),
        ContentBlockStop(0),
        ContentBlockStart(1, "reasoning"),
        ContentBlockDelta("Hm", 1),
        ContentBlockDelta("m.", 1),
        ContentBlockStop(1),
        ReasoningDone("Hmm.", {"type": "thinking", "signature": "sig-1"}, 1),
        ToolUse("weather", {"city": "Oslo"}, "toolu_1"),
        MessageStop("tool_use", Usage(12, 7)),
    ]


def test_anthropic_error_event_mid_stream_is_classified() -> None:
    frames = [
        wire.an_start(),
        *wire.an_text_block(0, "a"),
        wire.an_error_event("overloaded_error", "Overloaded"),
    ]
    with pytest.raises(ProviderError) as raised:
        translate(_EventReader(), frames)
    assert (raised.value.code, raised.value.retryable) == ("upstream_unavailable", True)
    assert "Overloaded" in raised.value.detail


def test_anthropic_stream_cut_before_message_stop_is_a_bad_response() -> None:
    with pytest.raises(ProviderError) as raised:
        translate(_EventReader(), [wire.an_start(), *wire.an_text_block(0, "a")])
    assert raised.value.code == "bad_response"


def test_anthropic_delta_for_a_block_never_started_is_a_bad_response() -> None:
    delta = {
        "type": "content_block_delta",
        "index": 3,
        "delta": {"type": "text_delta", "text": "x"},
    }
    with pytest.raises(ProviderError) as raised:
        translate(_EventReader(), [wire.an_start(), wire.an_event("content_block_delta", delta)])
    assert raised.value.code == "bad_response"


def crlf(frames: list[str]) -> list[str]:
    return [frame.replace("\n", "\r\n") for frame in frames]


async def test_openai_adapter_reads_crlf_frames(
    server: FakeServer, openai_adapter: OpenAIAdapter
) -> None:
    server.script(Reply(events=crlf(OA_TOOLS)))
    chunks, error = await drain(
        openai_adapter.stream_message([TextMessage("x")], [], RequestOptions())
    )
    assert error is None and chunks == OA_TOOLS_CHUNKS


async def test_anthropic_adapter_cut_mid_stream_after_chunks_is_not_retried(
    server: FakeServer, anthropic_adapter: AnthropicAdapter
) -> None:
    server.script(Reply(events=crlf([wire.an_start(), *wire.an_text_block(0, "a")]), then="cut"))
    chunks, error = await drain(
        anthropic_adapter.stream_message([TextMessage("x")], [], RequestOptions())
    )
    assert chunks == [ContentBlockStart(0), ContentBlockDelta("a", 0), ContentBlockStop(0)]
    assert error is not None and error.code in ("upstream_unavailable", "bad_response")
    assert len(server.received) == 1


async def test_openai_adapter_error_chunk_before_any_chunk_is_retried(
    server: FakeServer, openai_adapter: OpenAIAdapter
) -> None:
    error = wire.oa_frame({"error": {"message": "busy", "type": "server_error"}})
    server.script(Reply(events=[error]), Reply(events=wire.oa_text("ok")))
    chunks, failure = await drain(
        openai_adapter.stream_message([TextMessage("x")], [], RequestOptions())
    )
    assert failure is None and ContentBlockDelta("ok") in chunks
    assert len(server.received) == 2
    assert json.dumps(server.bodies[0]) == json.dumps(server.bodies[1])


@pytest.mark.parametrize("transport", ["httpx", "aiohttp"])
async def test_both_sdk_transports_stream_the_same_chunks(
    server: FakeServer, transport: str
) -> None:
    config = OpenAIConfig(
        api_key="sk-test", base_url=f"{server.url}/v1", http_client=transport, read_timeout=2.0
    )
    adapter = OpenAIAdapter(config)
    server.script(Reply(events=OA_TOOLS))
    try:
        chunks, error = await drain(
            adapter.stream_message([TextMessage("x")], [], RequestOptions())
        )
    finally:
        await adapter.aclose()
    assert error is None and chunks == OA_TOOLS_CHUNKS


def _misshapen(frame: str, old: str, new: str) -> str:
    return frame.replace(old, new)


OA_MISSHAPEN = {
    "delta a string": ['data: {"choices": [{"index": 0, "delta": "oops"}]}\n\n'],
    "usage a list": ['data: {"choices": [], "usage": [1, 2]}\n\n'],
    "text a number": [wire.oa_chunk({"content": 5})],
    "tool name a list": [_misshapen(wire.oa_call(0, "c1", "f", "{}"), '"f"', '["f"]')],
    "tool id a number": [
        _misshapen(wire.oa_call(0, "c1", "f", "{}"), '"c1"', "1"),
        wire.oa_chunk({}, finish="tool_calls"),
    ],
    "finish reason a number": [wire.oa_chunk({}, finish=5)],  # type: ignore[arg-type]
    "token counts as text": [
        wire.oa_chunk({}, finish="stop"),
        wire.oa_chunk(None, usage={"prompt_tokens": "12", "completion_tokens": "3"}),
    ],
}
AN_MISSHAPEN = {
    "block a string": [
        wire.an_start(),
        'event: content_block_start\ndata: {"type": "content_block_start", "index": 0, '
        '"content_block": "text"}\n\n',
    ],
    "index a list": [
        wire.an_start(),
        _misshapen(wire.an_text_block(0, "a")[0], '"index": 0', '"index": [0]'),
    ],
    "text a number": [
        wire.an_start(),
        wire.an_text_block(0)[0],
        _misshapen(wire.an_text_block(0, "a")[1], '"a"', "5"),
    ],
    "tool name a number": [
        wire.an_start(),
        *(_misshapen(f, '"f"', "7") for f in wire.an_tool_block(0, "toolu_1", "f", "{}")),
        *wire.an_stop("tool_use"),
    ],
    "output tokens as text": [
        wire.an_start(),
        *wire.an_text_block(0, "a"),
        *(_misshapen(f, '"output_tokens": 5', '"output_tokens": "5"') for f in wire.an_stop()),
    ],
    "stop reason an object": [
        wire.an_start(),
        *wire.an_text_block(0, "a"),
        *(_misshapen(f, '"end_turn"', '{"x": 1}') for f in wire.an_stop()),
    ],
}


@pytest.mark.parametrize("frames", OA_MISSHAPEN.values(), ids=OA_MISSHAPEN.keys())
async def test_openai_events_of_unexpected_shapes_are_bad_responses(
    server: FakeServer, openai_adapter: OpenAIAdapter, frames: list[str]
) -> None:
    """JSON that is not shaped as a chunk (a string for the delta, a number for the text) is
    the provider's unreadable reply, retried before the first chunk — not a crash of ours."""
    server.script(*(Reply(events=frames) for _ in range(3)))
    chunks, error = await drain(
        openai_adapter.stream_message([TextMessage("x")], [], RequestOptions())
    )
    assert error is not None and (error.code, error.retryable) == ("bad_response", True)
    assert all(isinstance(c, ContentBlockStart | ContentBlockDelta) for c in chunks)
    assert len(server.received) == (1 if chunks else 3)


@pytest.mark.parametrize("frames", AN_MISSHAPEN.values(), ids=AN_MISSHAPEN.keys())
async def test_anthropic_events_of_unexpected_shapes_are_bad_responses(
    server: FakeServer, anthropic_adapter: AnthropicAdapter, frames: list[str]
) -> None:
    server.script(*(Reply(events=frames) for _ in range(3)))
    chunks, error = await drain(
        anthropic_adapter.stream_message([TextMessage("x")], [], RequestOptions())
    )
    assert error is not None and (error.code, error.retryable) == ("bad_response", True)
    assert all(isinstance(c.delta, str) for c in chunks if isinstance(c, ContentBlockDelta))
    assert len(server.received) == (1 if chunks else 3)
