"""A pure ASGI middleware that refuses JSON request bodies no database stores alike.

May import Starlette, the problems module and the domain's rule for text
(``unstorable_text``). Python's JSON reader accepts ``NaN``, ``Infinity`` and ``1e400`` (a
float that overflows), lone surrogates such as ``"\\ud800"`` and the NUL character;
PostgreSQL refuses NUL and non-finite numbers in JSON while SQLite stores them (or silently
``null``). Every JSON body is checked here, before any route, so every write route — and
every route merged later — refuses them alike: 422 problem+json naming the field.
A body that is not JSON at all is left to the framework (400 ``malformed_json``). A body in a
``Content-Encoding`` (gzip, br…) is refused with 415, and so is one sent without a JSON
``Content-Type`` (``curl -d`` sends ``application/x-www-form-urlencoded``): every body Parley
takes is JSON, and the framework would not read it (a 422 saying the body is no object).
"""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.bodies import LARGE_BODY, hand_on
from app.api.paths import route_path
from app.api.problems import (
    PayloadTooLarge,
    Unprocessable,
    UnsupportedContentEncoding,
    UnsupportedMediaType,
    problem_response,
)
from app.domain.unicode import unstorable_text

_BODY_METHODS = {"POST", "PUT", "PATCH", "DELETE"}


def _media_type(headers: dict[bytes, bytes]) -> str:
    raw = headers.get(b"content-type", b"")
    return raw.decode("latin-1").lower().partition(";")[0].strip()


def _is_json(media: str) -> bool:
    """FastAPI reads a body as JSON only with a JSON content type (``strict_content_type``)."""
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


def _content_encoding(headers: dict[bytes, bytes]) -> str:
    """The request's Content-Encoding, empty when there is none (or ``identity``)."""
    raw = headers.get(b"content-encoding", b"").decode("latin-1").strip()
    return "" if raw.lower() in ("", "identity") else raw


def _safe(part: str | int) -> str | int:
    """A location part that can be written back in a JSON response."""
    if isinstance(part, str) and unstorable_text(part):
        return part.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "\\u0000")
    return part


def find_unstorable(document: Any) -> list[dict[str, Any]]:
    """Each NUL, lone surrogate (in a key or a value) or non-finite number, located."""
    errors: list[dict[str, Any]] = []
    stack: list[tuple[tuple[str | int, ...], Any]] = [(("body",), document)]
    while stack and len(errors) < 20:
        loc, value = stack.pop()
        reason = None
        if isinstance(value, str):
            reason = unstorable_text(value)
        elif isinstance(value, float) and not math.isfinite(value):
            reason = "is not a finite number (NaN, Infinity or out of range)"
        elif isinstance(value, dict):
            for key, item in value.items():
                if (why := unstorable_text(key)) is not None:
                    errors.append(_error((*loc, key), f"key {why}"))
                stack.append(((*loc, key), item))
        elif isinstance(value, list):
            stack.extend(((*loc, i), item) for i, item in enumerate(value))
        if reason is not None:
            errors.append(_error(loc, reason))
    return errors


def _error(loc: tuple[str | int, ...], reason: str) -> dict[str, Any]:
    return {"loc": [_safe(p) for p in loc], "msg": f"the value {reason}", "type": "value_error"}


class StrictJsonBodies:
    """415 for a body not sent as JSON or in a Content-Encoding; 422 for a JSON body holding
    NUL, a lone surrogate or a non-finite number."""

    def __init__(self, app: ASGIApp, form_paths: tuple[str, ...] = ()) -> None:
        """``form_paths``: routes that take ``multipart/form-data`` (an upload), passed on
        unread, so that the form streams to the route's parser."""
        self.app = app
        self.form_paths = frozenset(form_paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in _BODY_METHODS:
            await self.app(scope, receive, send)
            return
        headers: dict[bytes, bytes] = dict(scope["headers"])
        encoding = _content_encoding(headers)
        if encoding:
            unsupported = UnsupportedContentEncoding(
                f"request bodies are read as sent: Content-Encoding {encoding!r} is not supported",
                headers={"Accept-Encoding": "identity"},
            )
            await problem_response(unsupported)(scope, receive, send)
            return
        if (
            _media_type(headers) == "multipart/form-data"
            and route_path(scope).rstrip("/") in self.form_paths
        ):
            await self.app(scope, receive, send)
            return
        try:
            body = await _read(receive)
        except HTTPException as exc:  # the size limit, read out here rather than by a route
            if exc.status_code != 413:
                raise
            await problem_response(PayloadTooLarge(str(exc.detail)))(scope, receive, send)
            return
        media = _media_type(headers)
        if body and not _is_json(media):
            sent = f"Content-Type {media!r}" if media else "no Content-Type"
            unreadable = UnsupportedMediaType(
                f"the body is JSON: send it with 'Content-Type: application/json' (got {sent})"
            )
            await problem_response(unreadable)(scope, receive, send)
            return
        errors = await _checked(scope, body)
        if errors:
            where = "; ".join(".".join(map(str, e["loc"])) for e in errors[:5])
            problem = Unprocessable(f"{where}: {errors[0]['msg']}", errors=errors)
            await problem_response(problem)(scope, receive, send)
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


async def _checked(scope: Scope, body: bytes) -> list[dict[str, Any]]:
    """What in the body no database stores; its document handed on to the route, parsed once
    (app/api/bodies.py); a large body parsed (and checked) off the event loop."""
    if len(body) <= LARGE_BODY:
        document, errors = _parse(body)
    else:
        document, errors = await asyncio.to_thread(_parse, body)
    if document is not _NOT_JSON and not errors:
        hand_on(scope, document)
    return errors


async def _read(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


_NOT_JSON = object()


def _parse(body: bytes) -> tuple[Any, list[dict[str, Any]]]:
    """The body's document (``_NOT_JSON`` when it is none) and what in it no database stores."""
    if not body:
        return _NOT_JSON, []
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):  # not JSON (or too deep): the framework's 400
        return _NOT_JSON, []
    return document, find_unstorable(document)
