"""Every upstream failure is logged once — provider, HTTP status, code, attempt, request id — and
counted, with neither the key nor the upstream's message text in any log line."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator

import pytest
from prometheus_client import REGISTRY

from app.domain import ModelAdapter, RequestOptions, TextMessage
from app.observability import logs
from app.providers.anthropic_messages import AnthropicAdapter, AnthropicConfig
from app.providers.base import RetryPolicy, hide_key
from app.providers.errors import classify
from app.providers.openai_chat import OpenAIAdapter, OpenAIConfig

from . import wire
from .fake_server import FakeServer, Reply
from .helpers import drain

USER_TEXT = "my secret question"
OPTIONS = RequestOptions()


@pytest.fixture
def json_lines() -> Iterator[io.StringIO]:
    """Every log line of the test, as Parley writes them with PARLEY_LOG_FORMAT=json."""
    lines = io.StringIO()
    logs.configure_logging("json", "INFO", stream=lines)
    token = logs.start_request("req-upstream")
    try:
        yield lines
    finally:
        logs.end_request(token)
        logs.configure_logging("text", "WARNING")


def logged(lines: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in lines.getvalue().splitlines()]


def counted(name: str, provider: str, code: str) -> float:
    return REGISTRY.get_sample_value(name, {"provider": provider, "code": code}) or 0.0


async def test_an_openai_401_is_logged_once_without_the_key(
    server: FakeServer, openai_adapter: OpenAIAdapter, json_lines: io.StringIO
) -> None:
    body = wire.oa_error_body("Incorrect API key provided: sk-test", "invalid_request_error")
    server.script(Reply(401, body))
    before = counted("parley_upstream_errors_total", "openai", "authentication")
    await _fails(openai_adapter, "authentication")
    [line] = [entry for entry in logged(json_lines) if entry["logger"] == "app.providers.base"]
    assert line["level"] == "WARNING"
    assert (line["provider"], line["status"], line["code"]) == ("openai", 401, "authentication")
    assert (line["attempt"], line["retrying"], line["request_id"]) == (1, False, "req-upstream")
    text = json_lines.getvalue()
    assert "sk-test" not in text and "Incorrect API key" not in text and USER_TEXT not in text
    assert counted("parley_upstream_errors_total", "openai", "authentication") == before + 1


async def test_an_anthropic_401_is_logged_once_without_the_key(
    server: FakeServer, anthropic_adapter: AnthropicAdapter, json_lines: io.StringIO
) -> None:
    server.script(Reply(401, wire.an_error_body("authentication_error", "invalid x-api-key")))
    await _fails(anthropic_adapter, "authentication")
    [line] = [entry for entry in logged(json_lines) if entry["logger"] == "app.providers.base"]
    assert (line["provider"], line["status"], line["attempt"]) == ("anthropic", 401, 1)
    text = json_lines.getvalue()
    assert "sk-ant-test" not in text and "invalid x-api-key" not in text


async def test_each_failed_attempt_of_a_retried_request_is_logged_and_counted(
    server: FakeServer, openai_adapter: OpenAIAdapter, json_lines: io.StringIO
) -> None:
    limited = wire.oa_error_body("Rate limit reached", "requests", "rate_limit_exceeded")
    server.script(Reply(429, limited, {"retry-after-ms": "5"}), Reply(events=wire.oa_text("ok")))
    retries = counted("parley_upstream_retries_total", "openai", "rate_limited")
    chunks, error = await drain(
        openai_adapter.stream_message([TextMessage(USER_TEXT)], [], OPTIONS)
    )
    assert error is None and chunks
    [line] = [entry for entry in logged(json_lines) if entry["logger"] == "app.providers.base"]
    assert (line["status"], line["code"], line["attempt"], line["retrying"]) == (
        429,
        "rate_limited",
        1,
        True,
    )
    assert counted("parley_upstream_retries_total", "openai", "rate_limited") == retries + 1


KEY = "sk-proj-0123456789abcdef"
ONCE = RetryPolicy(max_retries=0)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_a_key_the_upstream_quotes_is_not_passed_on(
    server: FakeServer, provider: str
) -> None:
    """A proxy whose 401 (or error event) quotes the key it got: the error, which clients and
    the run's stored events get, says the provider's message without the key."""
    quoted = f"Incorrect API key provided: {KEY}."
    adapter: OpenAIAdapter | AnthropicAdapter
    if provider == "openai":
        adapter = OpenAIAdapter(OpenAIConfig(api_key=KEY, base_url=f"{server.url}/v1", retry=ONCE))
        body = wire.oa_error_body(quoted, "invalid_request_error")
        event = wire.oa_frame({"error": {"message": quoted, "type": "server_error"}})
    else:
        adapter = AnthropicAdapter(AnthropicConfig(api_key=KEY, base_url=server.url, retry=ONCE))
        body = wire.an_error_body("authentication_error", quoted)
        event = wire.an_error_event("api_error", quoted)
    server.script(Reply(401, body), Reply(events=[event]))
    try:
        _, refused = await drain(adapter.stream_message([TextMessage("x")], [], OPTIONS))
        _, failed = await drain(adapter.stream_message([TextMessage("x")], [], OPTIONS))
    finally:
        await adapter.aclose()
    for error in (refused, failed):
        assert error is not None and "Incorrect API key provided" in error.detail
        assert KEY not in error.detail and KEY not in str(error)


def test_a_key_cut_by_the_detail_s_length_limit_leaves_none_of_it() -> None:
    """The upstream's message is cut at 500 characters; a key quoted across the cut was no
    longer whole in the detail, and its first characters went on to clients."""
    quoted = "x" * 480 + f" bad key {KEY} was refused"
    error = classify("openai", status=401, kind=None, message=quoted)
    assert error.detail.endswith("…") and KEY[:8] in error.detail
    hide_key(error, KEY)
    assert error.detail.endswith(" bad key [the API key]…"), error.detail
    assert KEY[:4] not in error.detail and KEY[:4] not in str(error)


async def _fails(adapter: ModelAdapter, code: str) -> None:
    chunks, error = await drain(adapter.stream_message([TextMessage(USER_TEXT)], [], OPTIONS))
    assert chunks == [] and error is not None and error.code == code
