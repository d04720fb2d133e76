"""The three baselines of bench/stream.py: relays from the fake upstream to SSE, no database.

A bare ASGI app (run it under uvicorn, one worker). ``POST /<kind>/<provider>`` with
``{"model": ...}`` streams ``event: content_block_delta`` frames like Parley's, where provider is
``openai`` (the Responses API), ``openai-chat`` (chat completions) or ``anthropic``, and kind is

- ``typed``: the SDK's own stream of typed chunk objects (``create(stream=True)``);
- ``parse``: Parley's adapter (the shared SSE parser and jiter, no SDK object per chunk);
- ``pipe``: the upstream's bytes passed on as they come (no parsing at all).

The upstream is OPENAI_BASE_URL / ANTHROPIC_BASE_URL, as for Parley.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anthropic
import httpx2
import openai

from app.domain import ContentBlockDelta, RequestOptions, TextMessage
from app.providers.anthropic_messages import AnthropicAdapter, AnthropicConfig
from app.providers.base import ProviderConfig, RetryPolicy
from app.providers.openai_chat import OpenAIAdapter, OpenAIConfig
from app.providers.openai_responses import OpenAIResponsesAdapter

Send = Callable[[dict[str, Any]], Awaitable[None]]
Receive = Callable[[], Awaitable[dict[str, Any]]]

OPENAI_URL = os.environ.get("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
ANTHROPIC_URL = os.environ.get("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
_NO_RETRY = RetryPolicy(max_retries=0)

oa_client = openai.AsyncOpenAI(api_key="sk-bench", base_url=OPENAI_URL, max_retries=0)
an_client = anthropic.AsyncAnthropic(api_key="sk-bench", base_url=ANTHROPIC_URL, max_retries=0)
_OPENAI_CONFIG = OpenAIConfig(api_key="sk-bench", base_url=OPENAI_URL, retry=_NO_RETRY)
adapters: dict[str, Any] = {
    "openai": OpenAIResponsesAdapter(_OPENAI_CONFIG, oa_client),
    "openai-chat": OpenAIAdapter(_OPENAI_CONFIG, oa_client),
    "anthropic": AnthropicAdapter(
        AnthropicConfig(api_key="sk-bench", base_url=ANTHROPIC_URL, retry=_NO_RETRY), an_client
    ),
}
pipe_client = httpx2.AsyncClient(
    timeout=ProviderConfig(api_key="").timeout(), limits=httpx2.Limits(max_connections=1000)
)


def frame(text: str) -> bytes:
    data = json.dumps({"index": 0, "delta": text})
    return f"event: content_block_delta\ndata: {data}\n\n".encode()


async def typed(provider: str, model: str) -> AsyncIterator[bytes]:
    messages: Any = [{"role": "user", "content": "go"}]
    if provider == "openai":
        stream: Any = await oa_client.responses.create(
            model=model, input=messages, stream=True, store=False
        )
        async for event in stream:
            if event.type == "response.output_text.delta":
                yield frame(event.delta)
    elif provider == "openai-chat":
        stream = await oa_client.chat.completions.create(
            model=model, messages=messages, stream=True
        )
        async for chunk in stream:
            for choice in chunk.choices:
                if choice.delta.content:
                    yield frame(choice.delta.content)
    else:
        stream = await an_client.messages.create(
            model=model, max_tokens=4096, messages=messages, stream=True
        )
        async for event in stream:
            if event.type == "content_block_delta" and event.delta.type == "text_delta":
                yield frame(event.delta.text)


async def parse(provider: str, model: str) -> AsyncIterator[bytes]:
    options = RequestOptions(model=model)
    async for chunk in adapters[provider].stream_message([TextMessage("go")], [], options):
        if isinstance(chunk, ContentBlockDelta):
            yield frame(chunk.delta)


async def pipe(provider: str, model: str) -> AsyncIterator[bytes]:
    if provider == "openai":
        url, body = f"{OPENAI_URL}/responses", {"model": model, "stream": True}
    elif provider == "openai-chat":
        url, body = f"{OPENAI_URL}/chat/completions", {"model": model, "stream": True}
    else:
        url, body = f"{ANTHROPIC_URL}/v1/messages", {"model": model, "stream": True}
    async with pipe_client.stream("POST", url, json=body) as response:
        async for data in response.aiter_raw():
            yield data


RELAYS = {"typed": typed, "parse": parse, "pipe": pipe}


async def app(scope: dict[str, Any], receive: Receive, send: Send) -> None:
    """``POST /<kind>/<provider>``: the relay's stream; anything else is a 404."""
    if scope["type"] != "http":
        return
    _, kind, provider = ([*scope["path"].split("/"), "", ""])[:3]
    relay = RELAYS.get(kind)
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    if relay is None or provider not in adapters:
        await send({"type": "http.response.start", "status": 404, "headers": []})
        await send({"type": "http.response.body", "body": b""})
        return
    model = json.loads(body)["model"]
    headers = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    async for data in relay(provider, model):
        await send({"type": "http.response.body", "body": data, "more_body": True})
    await send({"type": "http.response.body", "body": b""})
