"""The ``openai`` adapter over the Responses API when things go wrong: HTTP errors and error
events before and after the first token, streams that stop short, tool arguments that are not
a JSON object (and the ones sent, which are JSON text)."""

from __future__ import annotations

import json

import pytest

from app.domain import ContentBlockDelta, RequestOptions, TextMessage, ToolCallMessage
from app.providers.openai_responses import OpenAIResponsesAdapter

from . import wire
from .fake_server import FakeServer, Reply
from .helpers import drain

OPTIONS = RequestOptions()


async def test_429_is_retried_before_the_first_token(
    server: FakeServer, responses_adapter: OpenAIResponsesAdapter
) -> None:
    limited = wire.oa_error_body("Rate limit reached", "requests", "rate_limit_exceeded")
    server.script(Reply(429, limited, {"retry-after-ms": "10"}), Reply(events=wire.rs_text("ok")))
    chunks, error = await drain(responses_adapter.stream_message([TextMessage("x")], [], OPTIONS))
    assert error is None and ContentBlockDelta("ok") in chunks
    assert len(server.received) == 2 and server.bodies[0] == server.bodies[1]


@pytest.mark.parametrize(
    ("frame", "code", "retryable"),
    [
        (wire.rs_failed("server_error", "The server had an error."), "upstream_unavailable", True),
        (wire.rs_failed("rate_limit_exceeded", "Slow down."), "rate_limited", True),
        (wire.rs_failed("invalid_prompt", "Refused."), "invalid_request", False),
        (wire.rs_error("context_length_exceeded", "Too long."), "context_too_long", False),
        (wire.rs_error(None, "Something broke."), "upstream_unavailable", True),
    ],
)
async def test_failure_mid_stream_is_not_retried_after_text(
    server: FakeServer,
    responses_adapter: OpenAIResponsesAdapter,
    frame: str,
    code: str,
    retryable: bool,
) -> None:
    frames = [*wire.rs_created(), *wire.rs_message(0, "msg_1", "Part")[:3], frame]
    server.script(Reply(events=frames))
    chunks, error = await drain(responses_adapter.stream_message([TextMessage("x")], [], OPTIONS))
    assert ContentBlockDelta("Part") in chunks
    assert error is not None and (error.code, error.retryable) == (code, retryable)
    assert len(server.received) == 1


async def test_failure_before_the_first_token_is_retried(
    server: FakeServer, responses_adapter: OpenAIResponsesAdapter
) -> None:
    failed = [*wire.rs_created(), wire.rs_failed("server_error", "The server had an error.")]
    server.script(Reply(events=failed), Reply(events=wire.rs_text("ok")))
    chunks, error = await drain(responses_adapter.stream_message([TextMessage("x")], [], OPTIONS))
    assert error is None and ContentBlockDelta("ok") in chunks and len(server.received) == 2


async def test_a_stream_that_stops_before_completed(
    server: FakeServer, responses_adapter: OpenAIResponsesAdapter
) -> None:
    cut = [*wire.rs_created(), *wire.rs_message(0, "msg_1", "Hal")]
    server.script(Reply(events=cut))
    chunks, error = await drain(responses_adapter.stream_message([TextMessage("x")], [], OPTIONS))
    assert error is not None and error.code == "bad_response"
    assert "response.completed" in error.detail and ContentBlockDelta("Hal") in chunks


async def test_arguments_that_are_not_an_object(
    server: FakeServer, responses_adapter: OpenAIResponsesAdapter
) -> None:
    call = wire.rs_call_item("fc_1", "call_1", "lookup", "[1, 2]")
    frames = [*wire.rs_created(), *wire.rs_call(0, call), wire.rs_completed()]
    server.script(*[Reply(events=frames)] * 3)  # a reply that cannot be read is tried again
    _, error = await drain(responses_adapter.stream_message([TextMessage("x")], [], OPTIONS))
    assert error is not None and error.code == "bad_response" and "lookup" in error.detail


def test_arguments_are_json_text(responses_adapter: OpenAIResponsesAdapter) -> None:
    messages = [TextMessage("x"), ToolCallMessage("t", "c1", {"a": "é"}, result="ok")]
    call = responses_adapter._request(messages, [], OPTIONS)["input"][1]
    assert json.loads(call["arguments"]) == {"a": "é"}
