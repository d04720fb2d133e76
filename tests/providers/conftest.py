"""Fixtures for the provider tests: a fake upstream server and the real adapters pointed at it.

The SDK clients are the real ones, talking HTTP to ``FakeServer`` on a loopback port; retries
wait a few milliseconds so the tests stay fast.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from app.providers.anthropic_messages import AnthropicAdapter, AnthropicConfig
from app.providers.base import RetryPolicy
from app.providers.openai_chat import OpenAIAdapter, OpenAIConfig
from app.providers.openai_responses import OpenAIResponsesAdapter

from .fake_server import FakeServer

FAST_RETRY = RetryPolicy(max_retries=2, max_wait=1.0, backoff=0.01)


@pytest.fixture
async def server() -> AsyncIterator[FakeServer]:
    async with FakeServer() as fake:
        yield fake


@pytest.fixture
async def openai_adapter(server: FakeServer) -> AsyncIterator[OpenAIAdapter]:
    adapter = OpenAIAdapter(
        OpenAIConfig(
            api_key="sk-test",
            base_url=f"{server.url}/v1",
            default_model="gpt-4o-mini",
            read_timeout=2.0,
            retry=FAST_RETRY,
        )
    )
    yield adapter
    await adapter.aclose()


def responses_adapter_for(
    server: FakeServer, model: str = "gpt-5.4-mini"
) -> OpenAIResponsesAdapter:
    """The Responses adapter (``PARLEY_OPENAI_API=responses``) pointed at ``server``."""
    return OpenAIResponsesAdapter(
        OpenAIConfig(
            api_key="sk-test",
            base_url=f"{server.url}/v1",
            default_model=model,
            read_timeout=2.0,
            retry=FAST_RETRY,
        )
    )


@pytest.fixture
async def responses_adapter(server: FakeServer) -> AsyncIterator[OpenAIResponsesAdapter]:
    adapter = responses_adapter_for(server)
    yield adapter
    await adapter.aclose()


@pytest.fixture
async def anthropic_adapter(server: FakeServer) -> AsyncIterator[AnthropicAdapter]:
    adapter = AnthropicAdapter(
        AnthropicConfig(
            api_key="sk-ant-test",
            base_url=server.url,
            default_model="claude-test",
            read_timeout=2.0,
            retry=FAST_RETRY,
        )
    )
    yield adapter
    await adapter.aclose()
