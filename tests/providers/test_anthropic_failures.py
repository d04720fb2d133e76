"""The ``anthropic`` adapter when things go wrong: HTTP errors, retries, error events, broken
streams, and a consumer that stops early (the fake server sees the upstream request closed)."""

from __future__ import annotations

import asyncio
import time
from contextlib import aclosing

import pytest

from app.domain import (
    ContentBlockDelta,
    MessageList,
    RequestOptions,
    Role,
    TextMessage,
    Tool,
    ToolCallMessage,
)
from app.providers.anthropic_messages import AnthropicAdapter, AnthropicConfig
from app.providers.base import RetryPolicy

from . import wire
from .fake_server import FakeServer, Reply
from .helpers import conversation, drain, run

OPTIONS = RequestOptions()


async def test_429_then_success(server: FakeServer, anthropic_adapter: AnthropicAdapter) -> None:
    limited = wire.an_error_body(
        "rate_limit_error", "Number of requests has exceeded your rate limit"
    )
    server.script(Reply(429, limited, {"retry-after": "0"}), Reply(events=wire.an_text("ok")))
    chunks, error = await drain(anthropic_adapter.stream_message([TextMessage("x")], [], OPTIONS))
    assert error is None and ContentBlockDelta("ok") in chunks and len(server.received) == 2


async def test_long_retry_after_fails_at_once(
    server: FakeServer, anthropic_adapter: AnthropicAdapter
) -> None:
    limited = wire.an_error_body(
        "rate_limit_error", "Number of requests has exceeded your rate limit"
    )
    server.script(Reply(429, limited, {"retry-after": "45"}))
    started = time.monotonic()
    _, error = await drain(anthropic_adapter.stream_message([TextMessage("x")], [], OPTIONS))
    assert time.monotonic() - started < 1
    assert error is not None
    assert (error.code, error.retryable, error.retry_after) == ("rate_limited", True, 45)
    assert len(server.received) == 1


async def test_401_is_not_retried(server: FakeServer, anthropic_adapter: AnthropicAdapter) -> None:
    server.script(Reply(401, wire.an_error_body("authentication_error", "invalid x-api-key")))
    _, error = await drain(anthropic_adapter.stream_message([TextMessage("x")], [], OPTIONS))
    assert error is not None and (error.code, error.retryable) == ("authentication", False)
    assert "invalid x-api-key" in error.detail and "sk-ant-test" not in error.detail
    assert len(server.received) == 1


async def test_500_and_529_are_retried_then_reported(
    server: FakeServer, anthropic_adapter: AnthropicAdapter
) -> None:
    overloaded = wire.an_error_body("overloaded_error", "Overloaded")
    server.script(
        Reply(500, wire.an_error_body("api_error", "Internal server error")),
        Reply(529, overloaded),
        Reply(529, overloaded),
    )
    _, error = await drain(anthropic_adapter.stream_message([TextMessage("x")], [], OPTIONS))
    assert error is not None and (error.code, error.retryable) == ("upstream_unavailable", True)
    assert "Overloaded" in error.detail and len(server.received) == 3


async def test_prompt_too_long(server: FakeServer, anthropic_adapter: AnthropicAdapter) -> None:
    body = wire.an_error_body("invalid_request_error", "prompt is too long: 210000 tokens > 200000")
    server.script(Reply(400, body))
    _, error = await drain(anthropic_adapter.stream_message([TextMessage("x")], [], OPTIONS))
    assert error is not None and (error.code, error.retryable) == ("context_too_long", False)


async def test_error_event_before_any_text_is_retried(
    server: FakeServer, anthropic_adapter: AnthropicAdapter
) -> None:
    failing = [wire.an_start(), wire.an_error_event("overloaded_error", "Overloaded")]
    server.script(Reply(events=failing), Reply(events=wire.an_text("fine")))
    chunks, error = await drain(anthropic_adapter.stream_message([TextMessage("x")], [], OPTIONS))
    assert error is None and ContentBlockDelta("fine") in chunks and len(server.received) == 2


async def test_error_in_the_middle_of_the_stream(
    server: FakeServer, anthropic_adapter: AnthropicAdapter
) -> None:
    events = [
        wire.an_start(),
        *wire.an_text_block(0, "The sky ", "is")[:-1],
        wire.an_error_event("overloaded_error", "Overloaded"),
    ]
    server.script(Reply(events=events))
    conv = conversation([anthropic_adapter], [TextMessage("Why is the sky blue?")])
    run_events, error = await run(conv)
    assert error is not None and (error.code, error.retryable) == ("upstream_unavailable", True)
    assert "overloaded_error" in error.detail
    assert [e for e in run_events if isinstance(e, ContentBlockDelta)] == [
        ContentBlockDelta("The sky "),
        ContentBlockDelta("is"),
    ]
    assert conv.messages[-1] == TextMessage("The sky is", Role.ASSISTANT, incomplete=True)
    assert len(server.received) == 1


async def test_cut_connection(server: FakeServer, anthropic_adapter: AnthropicAdapter) -> None:
    events = [wire.an_start(), *wire.an_text_block(0, "Half an ans")[:-1]]
    server.script(Reply(events=events, then="cut"))
    conv = conversation([anthropic_adapter], [TextMessage("x")])
    _, error = await run(conv)
    assert error is not None and (error.code, error.retryable) == ("upstream_unavailable", True)
    assert conv.messages[-1] == TextMessage("Half an ans", Role.ASSISTANT, incomplete=True)


async def test_stream_that_ends_without_message_stop(
    server: FakeServer, anthropic_adapter: AnthropicAdapter
) -> None:
    server.script(Reply(events=[wire.an_start(), *wire.an_text_block(0, "So far")]))
    chunks, error = await drain(anthropic_adapter.stream_message([TextMessage("x")], [], OPTIONS))
    assert error is not None and error.code == "bad_response"
    assert ContentBlockDelta("So far") in chunks


async def test_read_timeout(server: FakeServer) -> None:
    config = AnthropicConfig(
        api_key="k", base_url=server.url, read_timeout=0.2, retry=RetryPolicy(max_retries=0)
    )
    adapter = AnthropicAdapter(config)
    events = [wire.an_start(), *wire.an_text_block(0, "Thinking")[:-1]]
    server.script(Reply(events=events, then="hang"))
    try:
        chunks, error = await drain(adapter.stream_message([TextMessage("x")], [], OPTIONS))
    finally:
        await adapter.aclose()
    assert error is not None and (error.code, error.retryable) == ("timeout", True)
    assert ContentBlockDelta("Thinking") in chunks


async def test_closing_early_closes_the_upstream_request(
    server: FakeServer, anthropic_adapter: AnthropicAdapter
) -> None:
    events = [wire.an_start(), *wire.an_text_block(0, "One", " two")[:-1]]
    server.script(Reply(events=events, then="hang"))
    conv = conversation([anthropic_adapter], [TextMessage("Count")])
    async with aclosing(conv.stream()) as stream:
        async for event in stream:
            if isinstance(event, ContentBlockDelta) and event.delta == " two":
                break
    await asyncio.wait_for(server.disconnected.wait(), 3)
    assert conv.messages[-1] == TextMessage("One two", Role.ASSISTANT, incomplete=True)


@pytest.mark.parametrize("tool_input", ['{"q": ', "[" * 5000 + "]" * 5000], ids=["cut", "too-deep"])
async def test_tool_input_that_is_not_json_is_retried(
    server: FakeServer, anthropic_adapter: AnthropicAdapter, tool_input: str
) -> None:
    events = [
        wire.an_start(),
        *wire.an_tool_block(0, "toolu_x", "lookup", tool_input),
        *wire.an_stop(),
    ]
    server.script(Reply(events=events), Reply(events=wire.an_text("Sorry.")))
    chunks, error = await drain(anthropic_adapter.stream_message([TextMessage("x")], [], OPTIONS))
    assert error is None and ContentBlockDelta("Sorry.") in chunks  # retried: nothing yielded
    assert len(server.received) == 2


async def test_a_tool_use_block_without_an_id_gets_one_so_the_history_reads_back(
    server: FakeServer, anthropic_adapter: AnthropicAdapter
) -> None:
    call = [wire.an_start(), *wire.an_tool_block(0, "", "ask", "{}"), *wire.an_stop("tool_use")]
    server.script(Reply(events=call))
    conv = conversation([anthropic_adapter], [TextMessage("x")], [Tool.client("ask")])
    _, error = await run(conv)
    assert error is None
    pending = conv.messages[-1]
    assert isinstance(pending, ToolCallMessage) and pending.pending
    assert pending.tool_call_id.startswith("call_")
    assert MessageList.from_dict(conv.messages.to_dict()) == conv.messages
