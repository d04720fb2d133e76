"""Error classification, retry-after parsing and the retry loop, without a network."""

from __future__ import annotations

import email.utils
import time
from collections.abc import AsyncGenerator

import httpx2
import pytest

from app.domain import ContentBlockDelta, ProviderError, StreamChunk
from app.providers.base import RetryPolicy, stream_with_retries
from app.providers.errors import classify, retry_after_seconds, transport_error


@pytest.mark.parametrize(
    ("status", "kind", "message", "code", "retryable"),
    [
        (401, "authentication_error", "bad key", "authentication", False),
        (403, "permission_error", "no", "authentication", False),
        (429, "rate_limit_exceeded", "slow down", "rate_limited", True),
        (429, "insufficient_quota", "You exceeded your current quota", "rate_limited", False),
        (400, "context_length_exceeded", "too long", "context_too_long", False),
        (
            400,
            None,
            "This model's maximum context length is 8192 tokens",
            "context_too_long",
            False,
        ),
        (400, "invalid_request_error", "prompt is too long: 1 > 0", "context_too_long", False),
        (413, "request_too_large", "Request exceeds the maximum size", "context_too_long", False),
        (400, "invalid_request_error", "messages: roles must alternate", "invalid_request", False),
        (404, "not_found_error", "model: nope", "invalid_request", False),
        (408, None, "timeout", "timeout", True),
        (500, "server_error", "oops", "upstream_unavailable", True),
        (503, None, "<html>Service Unavailable</html>", "upstream_unavailable", True),
        (504, None, "gateway timeout", "timeout", True),
        (529, "overloaded_error", "Overloaded", "upstream_unavailable", True),
        (None, "overloaded_error", "Overloaded", "upstream_unavailable", True),
        (None, "rate_limit_error", "slow", "rate_limited", True),
        (None, "invalid_request_error", "bad", "invalid_request", False),
        (None, None, "something broke", "upstream_unavailable", True),
    ],
)
def test_classify(
    status: int | None, kind: str | None, message: str, code: str, retryable: bool
) -> None:
    error = classify("p", status=status, kind=kind, message=message)
    assert (error.code, error.retryable) == (code, retryable)
    assert error.detail.startswith("p: ") and message[:20] in error.detail


def test_classify_honours_x_should_retry_and_cuts_long_messages() -> None:
    error = classify(
        "p", status=500, kind=None, message="x" * 2000, headers={"x-should-retry": "false"}
    )
    assert not error.retryable and len(error.detail) < 600


def test_retry_after_forms() -> None:
    assert retry_after_seconds({"retry-after-ms": "1500"}) == 1.5
    assert retry_after_seconds({"retry-after": "7"}) == 7
    assert retry_after_seconds({"retry-after": "-3"}) == 0
    assert retry_after_seconds({}) is None and retry_after_seconds(None) is None
    assert retry_after_seconds({"retry-after": "soon"}) is None
    in_a_minute = email.utils.formatdate(time.time() + 60, usegmt=True)
    seconds = retry_after_seconds({"retry-after": in_a_minute})
    assert seconds is not None and 55 < seconds <= 60


def test_transport_errors() -> None:
    timeout = transport_error("p", httpx2.ReadTimeout("slow"))
    cut = transport_error("p", httpx2.RemoteProtocolError("peer closed"))
    assert timeout is not None and (timeout.code, timeout.retryable) == ("timeout", True)
    assert cut is not None and (cut.code, cut.retryable) == ("upstream_unavailable", True)
    assert transport_error("p", KeyError("x")) is None


def test_retry_policy_waits() -> None:
    policy = RetryPolicy(max_retries=2, max_wait=20, backoff=1)
    busy = ProviderError("upstream_unavailable", "x", retryable=True)
    first = policy.wait_before_retry(0, busy)
    assert first is not None and 0.75 <= first <= 1
    assert policy.wait_before_retry(2, busy) is None
    assert policy.wait_before_retry(0, ProviderError("authentication", "x")) is None
    asked = ProviderError("rate_limited", "x", retryable=True, retry_after=3)
    assert policy.wait_before_retry(0, asked) == 3
    too_long = ProviderError("rate_limited", "x", retryable=True, retry_after=21)
    assert policy.wait_before_retry(0, too_long) is None


async def test_no_retry_once_a_chunk_was_yielded() -> None:
    calls = 0

    async def attempt() -> AsyncGenerator[StreamChunk, None]:
        nonlocal calls
        calls += 1
        yield ContentBlockDelta("partial")
        raise ProviderError("upstream_unavailable", "cut", retryable=True)

    got: list[StreamChunk] = []
    with pytest.raises(ProviderError):
        async for chunk in stream_with_retries(attempt, RetryPolicy(backoff=0)):
            got.append(chunk)
    assert calls == 1 and got == [ContentBlockDelta("partial")]


async def test_retries_until_it_works() -> None:
    calls = 0

    async def attempt() -> AsyncGenerator[StreamChunk, None]:
        nonlocal calls
        calls += 1
        if calls < 3:
            raise ProviderError("rate_limited", "busy", retryable=True, retry_after=0.001)
        yield ContentBlockDelta("ok")

    chunks = [c async for c in stream_with_retries(attempt, RetryPolicy(max_retries=2))]
    assert calls == 3 and chunks == [ContentBlockDelta("ok")]
