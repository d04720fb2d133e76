"""What the real adapters share: their config, the retry loop that runs before the first chunk,
and the one stream reader (``SSEAdapter``): the SDK's streaming response, read as bytes, through
the shared SSE parser, into the adapter's chunk translation — no SDK model object per chunk.

Imports the domain, httpx2 (the SDKs' HTTP client), jiter, the SSE parser and
app.observability; the SDK-specific parts (request, chunk and error translations) live in each
adapter. Every failed attempt is logged once and counted here, whoever raised it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, cast

import httpx2
import jiter

from app.domain import (
    ContentBlockDelta,
    ContentBlockStart,
    ContentBlockStop,
    Message,
    MessageStop,
    ModelResponse,
    ProviderError,
    ReasoningDone,
    RequestOptions,
    StreamChunk,
    ToolSpec,
    ToolUse,
    collect_response,
)
from app.domain.adapter import DEFAULT_OPTIONS
from app.domain.attachment_blocks import Files
from app.domain.attachments import attachments_of
from app.observability import metrics
from app.providers.errors import UpstreamError, bad_response
from app.providers.sse import SSEEvent, SSEParser

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RetryPolicy:
    """When a failed request is tried again: only before its first chunk, never waiting long.

    ``max_wait`` bounds every wait: a provider that asks for a longer one (``retry-after``)
    gets its error raised at once, carrying the delay it asked for.
    """

    max_retries: int = 2
    max_wait: float = 20.0
    backoff: float = 0.5

    def wait_before_retry(self, retries_done: int, error: ProviderError) -> float | None:
        """Seconds to wait before retry number ``retries_done + 1``, or None to give up."""
        if not error.retryable or retries_done >= self.max_retries:
            return None
        if error.retry_after is not None:
            wait = max(error.retry_after, 0.0)
            return wait if wait <= self.max_wait else None
        backoff = self.backoff * 2.0**retries_done * (1 - 0.25 * random.random())
        return min(backoff, self.max_wait)


HttpClient = Literal["httpx", "aiohttp"]
"""The SDK client's transport: its default (httpx2), or aiohttp (``DefaultAioHttpClient``)."""


@dataclass(frozen=True)
class ProviderConfig:
    """Where and how a real adapter talks to its provider (built from the settings)."""

    api_key: str = field(repr=False)
    base_url: str | None = None
    default_model: str = ""
    connect_timeout: float = 10.0
    read_timeout: float = 120.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    http_client: HttpClient = "aiohttp"

    def timeout(self) -> httpx2.Timeout:
        """The SDK client's timeouts: ``read_timeout`` is the longest wait for the next bytes."""
        return httpx2.Timeout(self.read_timeout, connect=self.connect_timeout)


Attempt = Callable[[], AsyncGenerator[StreamChunk, None]]
"""Sends the request once and yields its chunks; raises ProviderError on failure."""


async def stream_with_retries(
    attempt: Attempt, policy: RetryPolicy, provider: str = "unknown"
) -> AsyncGenerator[StreamChunk, None]:
    """Yield the chunks of ``attempt()``, retrying per ``policy`` until a chunk has been yielded.

    After the first chunk a failure is raised as it is: the caller has already seen part of
    the reply. Closing this generator closes the attempt, and so the upstream response.
    Each failed attempt is logged and counted once (``upstream_failed``).
    """
    retries_done = 0
    while True:
        started = False
        try:
            async with aclosing(attempt()) as chunks:
                async for chunk in chunks:
                    started = True
                    yield chunk
            return
        except ProviderError as error:
            wait = None if started else policy.wait_before_retry(retries_done, error)
            upstream_failed(provider, error, attempt=retries_done + 1, retrying=wait is not None)
            if wait is None:
                raise
        await asyncio.sleep(wait)
        retries_done += 1


async def read_files(messages: Sequence[Message], options: RequestOptions) -> Files:
    """The bytes of the messages' attachments that the run can read, by file id: read before
    the request is built (each file once per run, ``RunAttachments``); none without a reader."""
    if options.attachments is None:
        return {}
    return await options.attachments.load(attachments_of(messages))


def upstream_failed(provider: str, error: ProviderError, *, attempt: int, retrying: bool) -> None:
    """Log and count one failed attempt: provider, HTTP status, code, attempt — never the
    upstream's message (it may quote the conversation) and never a key."""
    status = error.status if isinstance(error, UpstreamError) else None
    metrics.upstream_error(provider, error.code)
    if retrying:
        metrics.upstream_retry(provider, error.code)
    log.warning(
        "upstream request failed: provider=%s status=%s code=%s attempt=%d retrying=%s",
        provider,
        status if status is not None else "-",
        error.code,
        attempt,
        "yes" if retrying else "no",
        extra={
            "provider": provider,
            "status": status,
            "code": error.code,
            "attempt": attempt,
            "retrying": retrying,
        },
    )


_SECRET_KEY_LENGTH = 8
"""Keys this long or longer are secrets; a shorter one (a local server's ``none``) is a word."""


def hide_key(error: ProviderError, key: str) -> None:
    """Take ``key`` out of the error's detail: an upstream that quotes the key it was sent
    (a proxy's 401 may) must not pass it on to clients and the run's stored events — nor
    the start of it, where the detail was cut at its length limit (``…``) inside the key."""
    if len(key) < _SECRET_KEY_LENGTH:
        return
    detail = error.detail.replace(key, "[the API key]")
    if detail.endswith("…"):
        cut = detail[:-1]
        for size in range(min(len(key) - 1, len(cut)), 3, -1):
            if cut.endswith(key[:size]):
                detail = f"{cut[:-size]}[the API key]…"
                break
    if detail != error.detail:
        error.detail = detail
        error.args = (detail,)


class RetryingAdapter:
    """What the SDK adapters share: ``send_message`` gathers ``stream_message``, which runs
    single attempts (``_attempt``) of one request (``_request``), retried before the first chunk.

    Subclasses set ``config`` (with its ``retry`` policy) and implement the two methods.
    """

    name: str
    config: ProviderConfig
    _client: Any = None

    async def aclose(self) -> None:
        """Close the SDK client and its connections."""
        if self._client is not None:
            await self._client.close()
            self._client = None

    async def send_message(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        options: RequestOptions = DEFAULT_OPTIONS,
    ) -> ModelResponse:
        """The whole reply: the stream below, gathered."""
        return await collect_response(self.stream_message(messages, tools, options))

    async def stream_message(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        options: RequestOptions = DEFAULT_OPTIONS,
    ) -> AsyncIterator[StreamChunk]:
        """The reply as StreamChunks, retried before its first chunk.

        Raises ProviderError; closing the iterator early closes the upstream response.
        """
        files = await read_files(messages, options)
        request = self._request(messages, tools, options, files)
        try:
            async with aclosing(
                stream_with_retries(lambda: self._attempt(request), self.config.retry, self.name)
            ) as chunks:
                async for chunk in chunks:
                    yield chunk
        except ProviderError as error:
            hide_key(error, self.config.api_key)
            raise

    def _request(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        options: RequestOptions,
        files: Files | None = None,
    ) -> dict[str, Any]:
        """The SDK call's keyword arguments, the attachments' bytes (``files``, by file id)
        inlined; may raise ProviderError before any request."""
        raise NotImplementedError

    def _attempt(self, request: dict[str, Any]) -> AsyncGenerator[StreamChunk, None]:
        """One request: its events as our chunks; SDK and transport errors as ProviderError."""
        raise NotImplementedError


def event_json(data: str) -> Any:
    """The JSON value of an event's data: jiter's, or Python's when jiter refuses it.

    jiter (the fast path) refuses a lone surrogate (``"a\\ud800b"``), which a model may well
    send; Python's reader keeps it, and the run replaces it with U+FFFD (docs/runs.md). Data
    that neither reads raises jiter's ValueError, as before.
    """
    try:
        return jiter.from_json(data.encode())
    except ValueError as exc:
        try:
            return json.loads(data)
        except (ValueError, RecursionError):
            raise exc from None


class ChunkTranslator(Protocol):
    """One response's events as StreamChunks: ``feed`` each event, then ``finish`` at its end.

    Both may raise ProviderError (an error event, a reply that cannot be read).
    """

    def feed(self, event: SSEEvent) -> list[StreamChunk]: ...

    def finish(self) -> StreamChunk: ...


class SSEAdapter(RetryingAdapter):
    """A RetryingAdapter whose attempt reads the SDK's streaming response as raw bytes.

    The SDK still builds and sends the request (auth, base URL, headers, timeouts) and raises
    its error classes for a failed status before the body; the body goes through one
    SSEParser into the subclass's ChunkTranslator. Subclasses implement ``client``,
    ``_request``, ``_translator`` and ``_error``, and set ``_sdk_errors`` (the SDK's base
    exception), ``_endpoint`` and ``_stream_class``.
    """

    _sdk_errors: tuple[type[BaseException], ...] = ()
    _endpoint = ""
    """The provider's streaming endpoint, a path under the SDK client's base URL."""
    _stream_class: type = object
    """The SDK's ``AsyncStream`` class, which its ``post`` asks for beside ``stream=True``."""

    @property
    def client(self) -> Any:
        """The SDK client (made on first use); its ``post`` sends the request."""
        raise NotImplementedError

    def open(self) -> None:
        """Make the SDK client now, not on the first request."""
        self.client  # noqa: B018 (the property makes it)

    async def _send(self, request: dict[str, Any]) -> httpx2.Response:
        """The SDK client's ``post`` of ``request``, as it is, to ``_endpoint``, with
        ``cast_to=httpx2.Response`` and ``stream=True``: the response, its body left unread
        (the SDKs' documented call for an endpoint by hand: the client's auth, base URL,
        headers, timeouts and error classes all apply; ``cast_to`` wins over ``stream_cls``).

        Not ``create``: it walks its arguments against the SDK's TypedDicts before sending,
        and its streaming-response wrapper adds objects of its own — about a tenth of a
        run's start, for a body that is already the JSON to send (docs/performance.md).
        """
        response = await self.client.post(
            self._endpoint,
            cast_to=httpx2.Response,
            body=request,
            stream=True,
            stream_cls=self._stream_class,
        )
        return cast(httpx2.Response, response)

    def _translator(self) -> ChunkTranslator:
        """A fresh translation of one response's events."""
        raise NotImplementedError

    def _error(self, exc: BaseException) -> ProviderError:
        """An SDK or transport exception as a ProviderError."""
        raise NotImplementedError

    async def _attempt(self, request: dict[str, Any]) -> AsyncGenerator[StreamChunk, None]:
        """One request: its events as our chunks; SDK and transport errors as ProviderError.

        Leaving early (the caller closes us) closes the HTTP response: the server stops.
        """
        errors: tuple[type[BaseException], ...] = (
            *self._sdk_errors,
            httpx2.HTTPError,
            httpx2.StreamError,
            ValueError,
        )
        try:
            response = await self._send(request)
            async with aclosing(response):
                parser = SSEParser()
                translator = self._translator()
                async for data in response.aiter_bytes():
                    for event in parser.feed(data):
                        try:
                            chunks = translator.feed(event)
                        except _SHAPE_ERRORS as exc:
                            raise self._unexpected(f"a {event.event} event", exc) from exc
                        for chunk in chunks:
                            yield self._typed(chunk)
                try:
                    last = translator.finish()
                except _SHAPE_ERRORS as exc:
                    raise self._unexpected("the stream's end", exc) from exc
                yield self._typed(last)
        except errors as exc:
            raise self._error(exc) from exc

    def _unexpected(self, where: str, exc: Exception) -> ProviderError:
        """An event whose JSON is not shaped as the provider's (a string where an object
        goes, a list as an index): the provider's reply cannot be read, not a bug of ours."""
        return bad_response(self.name, f"{where} of an unexpected shape ({exc})")

    def _typed(self, chunk: StreamChunk) -> StreamChunk:
        """The chunk, if its fields hold what the domain's chunk declares (a provider's JSON
        may put a number where text goes); a ``bad_response`` if they do not."""
        if isinstance(chunk, ContentBlockDelta):
            ok = isinstance(chunk.delta, str) and isinstance(chunk.index, int)
        elif isinstance(chunk, ContentBlockStart | ContentBlockStop):
            ok = isinstance(chunk.index, int)
        elif isinstance(chunk, ToolUse):
            ok = isinstance(chunk.tool_name, str) and isinstance(chunk.id, str)
            ok = ok and isinstance(chunk.params, dict)
        elif isinstance(chunk, ReasoningDone):
            ok = isinstance(chunk.text, str) and isinstance(chunk.index, int)
            ok = ok and (chunk.payload is None or isinstance(chunk.payload, dict))
        elif isinstance(chunk, MessageStop):
            counts = chunk.usage.as_dict().values()
            ok = isinstance(chunk.stop_reason, str)
            ok = ok and all(n is None or type(n) is int for n in counts)
        else:
            ok = True
        if not ok:
            raise bad_response(self.name, f"a {chunk.kind} whose values are not of their types")
        return chunk


_SHAPE_ERRORS = (AttributeError, TypeError, KeyError, IndexError)
"""What translating an event of an unexpected shape raises (``"delta": "x"`` → ``.get``)."""
