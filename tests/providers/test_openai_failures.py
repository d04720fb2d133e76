"""The ``openai`` adapter when things go wrong: HTTP errors, retries, broken streams, and a
consumer that stops early (the fake server sees the upstream request closed)."""

from __future__ import annotations

import asyncio
import socket
import time
from contextlib import aclosing
from typing import Literal

import pytest

from app.domain import (
    ContentBlockDelta,
    MessageList,
    MessageStop,
    RequestOptions,
    Role,
    TextMessage,
)
from app.providers.base import RetryPolicy
from app.providers.openai_chat import OpenAIAdapter, OpenAIConfig

from . import wire
from .fake_server import FakeServer, Reply
from .helpers import conversation, drain, run

OPTIONS = RequestOptions()


async def test_429_then_success(server: FakeServer, openai_adapter: OpenAIAdapter) -> None:
    limited = wire.oa_error_body("Rate limit reached", "requests", "rate_limit_exceeded")
    server.script(Reply(429, limited, {"retry-after-ms": "10"}), Reply(events=wire.oa_text("ok")))
    chunks, error = await drain(openai_adapter.stream_message([TextMessage("x")], [], OPTIONS))
    assert error is None and ContentBlockDelta("ok") in chunks
    assert len(server.received) == 2
    assert server.bodies[0] == server.bodies[1]


async def test_long_retry_after_fails_at_once(
    server: FakeServer, openai_adapter: OpenAIAdapter
) -> None:
    limited = wire.oa_error_body("Rate limit reached", "requests", "rate_limit_exceeded")
    server.script(Reply(429, limited, {"retry-after": "120"}))
    started = time.monotonic()
    chunks, error = await drain(openai_adapter.stream_message([TextMessage("x")], [], OPTIONS))
    assert time.monotonic() - started < 1
    assert chunks == [] and error is not None
    assert (error.code, error.retryable, error.retry_after) == ("rate_limited", True, 120)
    assert "Rate limit reached" in error.detail
    assert len(server.received) == 1


async def test_401_is_not_retried(server: FakeServer, openai_adapter: OpenAIAdapter) -> None:
    body = wire.oa_error_body(
        "Incorrect API key provided", "invalid_request_error", "invalid_api_key"
    )
    server.script(Reply(401, body))
    _, error = await drain(openai_adapter.stream_message([TextMessage("x")], [], OPTIONS))
    assert error is not None and (error.code, error.retryable) == ("authentication", False)
    assert "sk-test" not in error.detail
    assert len(server.received) == 1


async def test_500_is_retried_then_reported(
    server: FakeServer, openai_adapter: OpenAIAdapter
) -> None:
    broken = wire.oa_error_body("The server had an error", "server_error")
    server.script(Reply(500, broken), Reply(500, broken), Reply(500, broken))
    _, error = await drain(openai_adapter.stream_message([TextMessage("x")], [], OPTIONS))
    assert error is not None and (error.code, error.retryable) == ("upstream_unavailable", True)
    assert len(server.received) == 3  # the first try and max_retries=2


async def test_context_too_long(server: FakeServer, openai_adapter: OpenAIAdapter) -> None:
    body = wire.oa_error_body(
        "This model's maximum context length is 128000 tokens.",
        "invalid_request_error",
        "context_length_exceeded",
    )
    server.script(Reply(400, body))
    _, error = await drain(openai_adapter.stream_message([TextMessage("x")], [], OPTIONS))
    assert error is not None and (error.code, error.retryable) == ("context_too_long", False)


async def test_error_event_before_any_text_is_retried(
    server: FakeServer, openai_adapter: OpenAIAdapter
) -> None:
    failing = [
        wire.oa_chunk({"role": "assistant"}),
        wire.oa_frame(wire.oa_error_body("overloaded", "server_error")),
    ]
    server.script(Reply(events=failing), Reply(events=wire.oa_text("fine")))
    chunks, error = await drain(openai_adapter.stream_message([TextMessage("x")], [], OPTIONS))
    assert error is None and ContentBlockDelta("fine") in chunks and len(server.received) == 2


async def test_error_in_the_middle_of_the_stream(
    server: FakeServer, openai_adapter: OpenAIAdapter
) -> None:
    events = [
        wire.oa_chunk({"role": "assistant", "content": "The sky "}),
        wire.oa_chunk({"content": "is"}),
        wire.oa_frame(wire.oa_error_body("The server had an error", "server_error")),
    ]
    server.script(Reply(events=events))
    conv = conversation([openai_adapter], [TextMessage("Why is the sky blue?")])
    run_events, error = await run(conv)
    assert error is not None and (error.code, error.retryable) == ("upstream_unavailable", True)
    assert [e for e in run_events if isinstance(e, ContentBlockDelta)] == [
        ContentBlockDelta("The sky "),
        ContentBlockDelta("is"),
    ]
    assert conv.messages[-1] == TextMessage("The sky is", Role.ASSISTANT, incomplete=True)
    assert len(server.received) == 1  # text had been streamed: no retry


async def test_cut_connection(server: FakeServer, openai_adapter: OpenAIAdapter) -> None:
    events = [wire.oa_chunk({"role": "assistant", "content": "Half an ans"})]
    server.script(Reply(events=events, then="cut"))
    conv = conversation([openai_adapter], [TextMessage("x")])
    _, error = await run(conv)
    assert error is not None and (error.code, error.retryable) == ("upstream_unavailable", True)
    assert conv.messages[-1] == TextMessage("Half an ans", Role.ASSISTANT, incomplete=True)


async def test_stream_that_ends_without_finish(
    server: FakeServer, openai_adapter: OpenAIAdapter
) -> None:
    events = [wire.oa_chunk({"role": "assistant", "content": "So far"}), wire.OA_DONE]
    server.script(Reply(events=events))
    chunks, error = await drain(openai_adapter.stream_message([TextMessage("x")], [], OPTIONS))
    assert error is not None and error.code == "bad_response"
    assert ContentBlockDelta("So far") in chunks and not any(
        isinstance(c, MessageStop) for c in chunks
    )


async def test_read_timeout(server: FakeServer) -> None:
    retry = RetryPolicy(max_retries=0)
    adapter = OpenAIAdapter(
        OpenAIConfig(api_key="k", base_url=f"{server.url}/v1", read_timeout=0.2, retry=retry)
    )
    server.script(
        Reply(events=[wire.oa_chunk({"role": "assistant", "content": "Thinking"})], then="hang")
    )
    try:
        chunks, error = await drain(adapter.stream_message([TextMessage("x")], [], OPTIONS))
    finally:
        await adapter.aclose()
    assert error is not None and (error.code, error.retryable) == ("timeout", True)
    assert ContentBlockDelta("Thinking") in chunks


async def test_closing_early_closes_the_upstream_request(
    server: FakeServer, openai_adapter: OpenAIAdapter
) -> None:
    events = [
        wire.oa_chunk({"role": "assistant", "content": "One"}),
        wire.oa_chunk({"content": " two"}),
    ]
    server.script(Reply(events=events, then="hang"))
    conv = conversation([openai_adapter], [TextMessage("Count")])
    async with aclosing(conv.stream()) as stream:
        async for event in stream:
            if isinstance(event, ContentBlockDelta) and event.delta == " two":
                break
    await asyncio.wait_for(server.disconnected.wait(), 3)
    assert conv.messages[-1] == TextMessage("One two", Role.ASSISTANT, incomplete=True)


@pytest.mark.parametrize(
    "arguments", ["[1, 2", '{"a": ' * 5000 + "1" + "}" * 5000], ids=["cut", "too-deep"]
)
async def test_arguments_that_are_not_json(
    server: FakeServer, openai_adapter: OpenAIAdapter, arguments: str
) -> None:
    events = [wire.oa_call(0, "c", "lookup", arguments), wire.oa_chunk({}, finish="tool_calls")]
    server.script(*[Reply(events=[*events, wire.OA_DONE])] * 3)
    _, error = await drain(openai_adapter.stream_message([TextMessage("x")], [], OPTIONS))
    assert error is not None and error.code == "bad_response" and "lookup" in error.detail
    assert len(server.received) == 3  # nothing was yielded yet, so it was tried again


@pytest.mark.parametrize("http_client", ["aiohttp", "httpx"])
async def test_a_refused_connection_is_upstream_unavailable_not_a_timeout(
    http_client: Literal["aiohttp", "httpx"],
) -> None:
    """The openai SDK's aiohttp transport maps a refused connection to ConnectTimeout: it was
    reported as `timeout` ("no answer in time"), where anthropic and httpx say what happened."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens once the socket is closed
    adapter = OpenAIAdapter(
        OpenAIConfig(
            api_key="k",
            base_url=f"http://127.0.0.1:{port}/v1",
            retry=RetryPolicy(max_retries=0),
            http_client=http_client,
        )
    )
    try:
        _, error = await drain(adapter.stream_message([TextMessage("x")], [], OPTIONS))
    finally:
        await adapter.aclose()
    assert error is not None and (error.code, error.retryable) == ("upstream_unavailable", True)
    assert "connection failed" in error.detail


async def test_a_tool_call_without_a_function_name_is_a_bad_response_not_stored(
    server: FakeServer, openai_adapter: OpenAIAdapter
) -> None:
    events = [wire.oa_call(0, "call_a", None, "{}"), wire.oa_chunk({}, finish="tool_calls")]
    server.script(Reply(events=[*events, wire.OA_DONE]))
    conv = conversation([openai_adapter], [TextMessage("x")])
    _, error = await run(conv)
    assert error is not None and error.code == "bad_response"
    assert "a tool call has no tool name" in error.detail
    assert list(conv.messages) == [TextMessage("x")]
    assert MessageList.from_dict(conv.messages.to_dict()) == conv.messages
