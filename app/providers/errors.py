"""The SDKs' exceptions as our ProviderError: a stable code, ``retryable`` and ``retry_after``.

May import the provider SDKs and their HTTP client (httpx2); each SDK is imported only by the
function that maps its errors, so an adapter never loads the other's SDK.

    code                  from
    rate_limited          429, a rate-limit error event            retryable (not: quota used up)
    authentication        401, 402, 403                            not retryable
    upstream_unavailable  5xx, 409, 529, overloaded, cut stream    retryable
    timeout               connect/read timeout, 408, 504           retryable
    context_too_long      413, "context length"/"prompt is too long"  not retryable
    invalid_request       other 4xx, a conversation the provider refuses  not retryable
    bad_response          a reply the SDK or Parley cannot read    retryable
"""

from __future__ import annotations

import email.utils
import json
import math
import time
from collections.abc import Mapping

import httpx2

from app.domain import ProviderError

_CONTEXT_HINTS = (
    "context_length_exceeded",
    "maximum context length",
    "context window",
    "context size",
    "prompt is too long",
    "too many tokens",
)

_MAX_MESSAGE = 500
"""Upstream messages are cut to this many characters (a proxy may answer with a whole page)."""

_BY_STATUS: dict[int, tuple[str, bool]] = {
    401: ("authentication", False),
    402: ("authentication", False),
    403: ("authentication", False),
    408: ("timeout", True),
    409: ("upstream_unavailable", True),
    413: ("context_too_long", False),
    429: ("rate_limited", True),
    504: ("timeout", True),
}

_BY_KIND: dict[str, tuple[str, bool]] = {
    "rate_limit_error": ("rate_limited", True),
    "rate_limit_exceeded": ("rate_limited", True),
    "insufficient_quota": ("rate_limited", False),
    "overloaded_error": ("upstream_unavailable", True),
    "api_error": ("upstream_unavailable", True),
    "server_error": ("upstream_unavailable", True),
    "authentication_error": ("authentication", False),
    "permission_error": ("authentication", False),
    "invalid_api_key": ("authentication", False),
    "billing_error": ("authentication", False),
    "request_too_large": ("context_too_long", False),
    "context_length_exceeded": ("context_too_long", False),
    "timeout_error": ("timeout", True),
    "invalid_request_error": ("invalid_request", False),
    "not_found_error": ("invalid_request", False),
}


class UpstreamError(ProviderError):
    """A ProviderError from an upstream answer: also knows its HTTP ``status`` (None for an
    error event inside a stream), for logs and metrics; clients see the same ``code``."""

    def __init__(
        self,
        code: str,
        detail: str,
        *,
        status: int | None,
        retryable: bool = False,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(code, detail, retryable=retryable, retry_after=retry_after)
        self.status = status


def retry_after_seconds(headers: Mapping[str, str] | None) -> float | None:
    """The delay a response asks for: ``retry-after-ms``, or ``retry-after`` (seconds or a date)."""
    if headers is None:
        return None
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        raw = headers.get(name)
        if raw is None:
            continue
        try:
            value = float(raw) / scale
        except ValueError:
            continue
        if math.isfinite(value):
            return max(value, 0.0)
    raw = headers.get("retry-after")
    parsed = email.utils.parsedate_tz(raw) if raw else None
    if parsed is None:
        return None
    return max(float(email.utils.mktime_tz(parsed)) - time.time(), 0.0)


def classify(
    provider: str,
    *,
    status: int | None,
    kind: str | None,
    message: str,
    headers: Mapping[str, str] | None = None,
) -> UpstreamError:
    """The ProviderError for an upstream failure: an HTTP status, or an error event's kind."""
    code, retryable = _code_for(status, kind, message)
    should_retry = headers.get("x-should-retry") if headers is not None else None
    if should_retry in ("true", "false"):
        retryable = should_retry == "true"
    where = f"HTTP {status}" if status and status >= 400 else "error event"
    label = f" {kind}" if kind else ""
    text = message if len(message) <= _MAX_MESSAGE else message[: _MAX_MESSAGE - 1] + "…"
    detail = f"{provider}: {where}{label}: {text}".rstrip(": ")
    return UpstreamError(
        code,
        detail,
        status=status if status and status >= 400 else None,
        retryable=retryable,
        retry_after=retry_after_seconds(headers),
    )


def _code_for(status: int | None, kind: str | None, message: str) -> tuple[str, bool]:
    text = f"{kind or ''} {message}".lower()
    if kind == "insufficient_quota":
        return "rate_limited", False
    refused = status in (400, 413, 422) or kind in ("invalid_request_error", "request_too_large")
    if refused and any(hint in text for hint in _CONTEXT_HINTS):
        return "context_too_long", False
    if status is not None and status in _BY_STATUS:
        return _BY_STATUS[status]
    if status is not None and status >= 500:
        return "upstream_unavailable", True
    if status is not None and status >= 400:
        return "invalid_request", False
    if kind in _BY_KIND:
        return _BY_KIND[kind]
    if any(hint in text for hint in _CONTEXT_HINTS):
        return "context_too_long", False
    return "upstream_unavailable", True  # an unknown error event in the middle of a stream


def transport_error(provider: str, exc: BaseException) -> ProviderError | None:
    """A timeout, a refused or cut connection, or an unreadable event; None for anything else."""
    if isinstance(exc, httpx2.TimeoutException):
        return ProviderError(
            "timeout", f"{provider}: no answer in time ({type(exc).__name__})", retryable=True
        )
    if isinstance(exc, httpx2.TransportError):
        return ProviderError(
            "upstream_unavailable",
            f"{provider}: the connection failed or was cut ({type(exc).__name__}: {exc})",
            retryable=True,
        )
    if isinstance(exc, httpx2.HTTPError | httpx2.StreamError):
        return bad_response(provider, f"{type(exc).__name__}: {exc}")
    if isinstance(exc, json.JSONDecodeError):
        return bad_response(provider, f"an event is not JSON ({exc})")
    return None


def bad_response(provider: str, problem: str) -> ProviderError:
    """A reply that cannot be read; retryable, as a second answer may well be fine."""
    return ProviderError("bad_response", f"{provider}: {problem}", retryable=True)


def _error_fields(body: object) -> tuple[str | None, str]:
    """``(type or code, message)`` of an error body: ``{"error": {...}}`` or the inner dict."""
    inner = body.get("error", body) if isinstance(body, Mapping) else None
    if not isinstance(inner, Mapping):
        return None, str(body) if body else ""
    kind = inner.get("code") or inner.get("type")
    message = inner.get("message")
    return (str(kind) if kind else None), (str(message) if message else "")


def stream_error(provider: str, body: object) -> UpstreamError:
    """An error event inside a 200 stream (OpenAI's ``{"error": ...}`` chunk, Anthropic's
    ``error`` event), classified by its type or code as the SDKs would raise it."""
    kind, message = _error_fields(body)
    return classify(
        provider, status=None, kind=kind, message=message or "An error occurred during streaming"
    )


def _aiohttp_connection_error(exc: BaseException) -> BaseException | None:
    """The aiohttp connection error (refused, reset, cut) behind ``exc``, if any, that is not a
    timeout. The openai SDK's aiohttp transport turns every ``aiohttp.ClientConnectionError``
    into ``httpx.ConnectTimeout`` and so into ``APITimeoutError``: a server that refuses the
    connection would be reported as one that gave ``no answer in time``."""
    try:
        import aiohttp
    except ImportError:  # pragma: no cover - aiohttp comes with the SDKs' aiohttp extra
        return None
    cause = exc.__cause__ or exc.__context__
    for _ in range(8):
        if cause is None:
            return None
        if isinstance(cause, aiohttp.ClientConnectionError) and not isinstance(cause, TimeoutError):
            return cause
        cause = cause.__cause__ or cause.__context__
    return None


def openai_error(exc: BaseException) -> ProviderError:
    """An exception raised by the ``openai`` SDK (or its transport) as a ProviderError."""
    import openai

    if isinstance(exc, ProviderError):
        return exc
    if isinstance(exc, openai.APITimeoutError):
        if (refused := _aiohttp_connection_error(exc)) is not None:
            return ProviderError(
                "upstream_unavailable",
                f"openai: the connection failed or was cut ({type(refused).__name__}: {refused})",
                retryable=True,
            )
        return ProviderError("timeout", "openai: no answer in time", retryable=True)
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__
        detail = f" ({type(cause).__name__}: {cause})" if cause else ""
        return ProviderError(
            "upstream_unavailable",
            f"openai: the connection failed or was cut{detail}",
            retryable=True,
        )
    if isinstance(exc, openai.APIResponseValidationError):
        return bad_response("openai", exc.message)
    if isinstance(exc, openai.APIStatusError):
        kind, message = _error_fields(exc.body)
        return classify(
            "openai",
            status=exc.status_code,
            kind=exc.code or kind,
            message=message or exc.message,
            headers=exc.response.headers,
        )
    if isinstance(exc, openai.APIError):  # an error event inside a 200 stream
        kind, message = _error_fields(exc.body)
        return classify(
            "openai", status=None, kind=exc.code or kind, message=message or exc.message
        )
    return transport_error("openai", exc) or bad_response("openai", f"{type(exc).__name__}: {exc}")


def anthropic_error(exc: BaseException) -> ProviderError:
    """An exception raised by the ``anthropic`` SDK (or its transport) as a ProviderError."""
    import anthropic

    if isinstance(exc, ProviderError):
        return exc
    if isinstance(exc, anthropic.APITimeoutError):
        return ProviderError("timeout", "anthropic: no answer in time", retryable=True)
    if isinstance(exc, anthropic.APIConnectionError):
        cause = exc.__cause__
        detail = f" ({type(cause).__name__}: {cause})" if cause else ""
        return ProviderError(
            "upstream_unavailable",
            f"anthropic: the connection failed or was cut{detail}",
            retryable=True,
        )
    if isinstance(exc, anthropic.APIResponseValidationError):
        return bad_response("anthropic", exc.message)
    if isinstance(exc, anthropic.APIStatusError):
        kind, message = _error_fields(exc.body)
        in_stream = exc.status_code < 400  # an `error` event inside a 200 stream
        return classify(
            "anthropic",
            status=None if in_stream else exc.status_code,
            kind=exc.type or kind,
            message=exc.api_message or message or exc.message,
            headers=None if in_stream else exc.response.headers,
        )
    return transport_error("anthropic", exc) or bad_response(
        "anthropic", f"{type(exc).__name__}: {exc}"
    )
