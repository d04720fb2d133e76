"""Errors as ``application/problem+json`` (RFC 9457), raised anywhere, written in one place.

May import FastAPI/Starlette, app.api.paths, the domain, storage and runs errors. Every
problem has a stable ``code`` (one of app/runs/codes.py's ``ErrorCode``; for an exception, the
code ``code_for`` gives it — the one mapping an ``error`` event uses too), ``type``
``/problems/<code>``, a ``title``, the HTTP ``status`` and a human ``detail``; some carry
extensions (``errors``, ``run_id``, ``pending_tool_call_ids``…).

    ApiProblem
     ├── BadRequest (400)            malformed JSON, bad cursor, If-Match or Last-Event-ID
     ├── Unauthorized (401)          a key is required and missing or unknown
     ├── Forbidden (403)             a browser request from an origin not allowed
     ├── NotFound (404)              unknown id, or one the caller may not see
     ├── Conflict (409)              a run holds it; tool calls pending; nothing to cancel
     ├── Gone (410)                  a finished run's events were pruned
     ├── PreconditionFailed (412)    stale If-Match
     ├── PayloadTooLarge (413)       body over the size limit
     ├── UnsupportedMediaType (415)  a body not sent as JSON, or in a Content-Encoding (gzip…)
     ├── Unprocessable (422)         validation: each bad field located in ``errors``
     ├── TooManyRequests (429)       a key's limit: requests a minute, runs, budget; ``Retry-After``
     └── Unavailable (503)           shutting down, the database not answering (``Retry-After``);
                                     not ready (database, schema)

A problem's ``instance`` is the request's id (the ``X-Request-ID`` response header).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import JSONResponse

from app.api.paths import documented_operations, route_path
from app.domain import ConversationError
from app.observability.logs import current_request_id
from app.runs.codes import ErrorCode, code_for
from app.runs.errors import (
    BadEventId,
    EventsExpired,
    IdempotencyKeyInUse,
    IdempotencyKeyReused,
    InvalidInput,
    NoActiveRun,
    NothingToAnswer,
    PendingToolCalls,
    RunsError,
    ShuttingDown,
)
from app.spend import KeyNotFound, KeyRefused, LimitExceeded, SpendError
from app.storage import (
    ConversationNotFound,
    DatabaseUnavailable,
    DuplicateToolCall,
    InvalidCursor,
    LeaseHeld,
    LeaseLost,
    RunNotFound,
    StorageConflict,
    StorageError,
    StoredDataError,
    ToolCallNotPending,
    VersionConflict,
    driver_said,
)
from app.storage.files import FileEmpty, FileInUse, FileNotFound, FileRefused, FileTooLarge

PROBLEM_JSON = "application/problem+json"

log = logging.getLogger(__name__)


class ApiProblem(Exception):
    """An error with its HTTP status, stable code and title."""

    status = 500
    slug: str = ErrorCode.INTERNAL
    title = "Internal server error"

    def __init__(
        self,
        detail: str,
        *,
        slug: str | None = None,
        headers: dict[str, str] | None = None,
        **extensions: Any,
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        if slug is not None:
            self.slug = slug
        self.headers = headers or {}
        self.extensions = extensions

    def body(self) -> dict[str, Any]:
        request_id = current_request_id()
        return {
            "type": f"/problems/{self.slug}",
            "title": self.title,
            "status": self.status,
            "detail": self.detail,
            "code": str(self.slug),
            **({"instance": request_id} if request_id else {}),
            **jsonable_encoder(self.extensions),
        }


class BadRequest(ApiProblem):
    status, slug, title = 400, ErrorCode.BAD_REQUEST, "Bad request"


class Unauthorized(ApiProblem):
    status, slug, title = 401, ErrorCode.UNAUTHORIZED, "Unauthorized"


class Forbidden(ApiProblem):
    status, slug, title = 403, "forbidden", "Forbidden"


class NotFound(ApiProblem):
    status, slug, title = 404, ErrorCode.NOT_FOUND, "Not found"


class Conflict(ApiProblem):
    status, slug, title = 409, ErrorCode.CONFLICT, "Conflict"


class Gone(ApiProblem):
    status, slug, title = 410, ErrorCode.RUN_EVENTS_EXPIRED, "Gone"


class PreconditionFailed(ApiProblem):
    status, slug, title = 412, ErrorCode.VERSION_MISMATCH, "Precondition failed"


class PayloadTooLarge(ApiProblem):
    status, slug, title = 413, ErrorCode.PAYLOAD_TOO_LARGE, "Payload too large"


class UnsupportedMediaType(ApiProblem):
    status, slug, title = 415, ErrorCode.UNSUPPORTED_MEDIA_TYPE, "Unsupported media type"


class UnsupportedContentEncoding(UnsupportedMediaType):
    slug = ErrorCode.UNSUPPORTED_CONTENT_ENCODING


class Unprocessable(ApiProblem):
    status, slug, title = 422, ErrorCode.VALIDATION_ERROR, "Unprocessable content"


class TooManyRequests(ApiProblem):
    status, slug, title = 429, ErrorCode.RATE_LIMITED, "Too many requests"


class Unavailable(ApiProblem):
    status, slug, title = 503, ErrorCode.SHUTTING_DOWN, "Service unavailable"


class ProblemJSONResponse(JSONResponse):
    """problem+json that can always be written, even when a detail echoes broken Unicode."""

    media_type = PROBLEM_JSON

    def render(self, content: Any) -> bytes:
        try:
            return super().render(content)
        except UnicodeEncodeError:  # a lone surrogate echoed from the request: escape it
            return json.dumps(content, separators=(",", ":")).encode("ascii")


def problem_response(problem: ApiProblem, headers: dict[str, str] | None = None) -> JSONResponse:
    """The problem as a response."""
    extra = {"WWW-Authenticate": "Bearer"} if problem.status == 401 else {}
    return ProblemJSONResponse(
        problem.body(),
        status_code=problem.status,
        media_type=PROBLEM_JSON,
        headers={**extra, **problem.headers, **(headers or {})},
    )


def validation_problem(errors: list[dict[str, Any]]) -> ApiProblem:
    """A 422 (or a 400 for a body that is not JSON) from pydantic-style errors."""
    if any(e.get("type") == "json_invalid" for e in errors):
        first = next(e for e in errors if e.get("type") == "json_invalid")
        reason = first.get("ctx", {}).get("error", "invalid JSON")
        return BadRequest(
            f"the request body is not valid JSON: {reason}", slug=ErrorCode.MALFORMED_JSON
        )
    located = [
        {"loc": list(e.get("loc", ())), "msg": str(e.get("msg", "")), "type": e.get("type", "")}
        for e in errors
    ]
    where = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in located[:5])
    return Unprocessable(where or "the request is invalid", errors=located)


_STATUS_PROBLEMS: dict[int, type[ApiProblem]] = {
    400: BadRequest,
    401: Unauthorized,
    404: NotFound,
    409: Conflict,
    412: PreconditionFailed,
    413: PayloadTooLarge,
    422: Unprocessable,
}


def _header_error(header: str, exc: Exception) -> list[dict[str, Any]]:
    return [{"loc": ["header", header], "msg": str(exc), "type": "value_error"}]


def _invalid_input(exc: InvalidInput) -> ApiProblem:
    errors = [{"loc": exc.loc, "msg": exc.detail, "type": "value_error"}]
    return Unprocessable(exc.detail, errors=errors, **exc.extra)


# What each storage, use-case or domain error stands for: its status and extensions (its code
# is ``code_for``'s); an error not listed is looked up by its base classes, nearest first (so
# LeaseHeld is not taken for the StorageConflict it is).
_ERROR_PROBLEMS: dict[type[Exception], Callable[[Any], ApiProblem]] = {
    ConversationNotFound: lambda e: NotFound(f"no conversation {e.conversation_id!r}"),
    RunNotFound: lambda e: NotFound(f"no run {e.run_id!r} here"),
    InvalidCursor: lambda e: BadRequest("the cursor is not one this service issued"),
    VersionConflict: lambda e: PreconditionFailed(str(e), current_version=e.current_version),
    LeaseHeld: lambda e: Conflict(str(e), run_id=e.run_id),
    LeaseLost: lambda e: Conflict(str(e), run_id=e.run_id),
    ToolCallNotPending: lambda e: Conflict(str(e), tool_call_id=e.tool_call_id),
    DuplicateToolCall: lambda e: Conflict(str(e)),
    StorageConflict: lambda e: Conflict(str(e)),
    StoredDataError: lambda e: ApiProblem(str(e), index=e.index),
    FileNotFound: lambda e: NotFound(str(e)),
    FileRefused: lambda e: UnsupportedMediaType(str(e)),
    FileTooLarge: lambda e: PayloadTooLarge(str(e), limit=e.limit),
    FileEmpty: lambda e: Unprocessable(
        str(e), errors=[{"loc": ["body", "file"], "msg": str(e), "type": "empty_file"}]
    ),
    FileInUse: lambda e: Conflict(str(e), conversation_ids=e.conversation_ids),
    InvalidInput: _invalid_input,
    PendingToolCalls: lambda e: Conflict(str(e), pending_tool_call_ids=e.ids),
    NoActiveRun: lambda e: Conflict(str(e)),
    NothingToAnswer: lambda e: Conflict(str(e)),
    BadEventId: lambda e: BadRequest(str(e)),
    EventsExpired: lambda e: Gone(str(e), run_id=e.run_id),
    ShuttingDown: lambda e: Unavailable(str(e), headers={"Retry-After": str(e.retry_after)}),
    DatabaseUnavailable: lambda e: Unavailable(str(e), headers={"Retry-After": "2"}),
    IdempotencyKeyReused: lambda e: Unprocessable(
        str(e),
        errors=_header_error("Idempotency-Key", e),
    ),
    IdempotencyKeyInUse: lambda e: Conflict(str(e), headers={"Retry-After": "1"}),
    ConversationError: lambda e: Unprocessable(str(e)),
    LimitExceeded: lambda e: TooManyRequests(str(e), headers={"Retry-After": str(e.retry_after)}),
    KeyRefused: lambda e: Unauthorized(str(e)),
    KeyNotFound: lambda e: NotFound(str(e)),
}


def problem_for(exc: Exception) -> ApiProblem:
    """The problem a storage, use-case or domain error stands for."""
    for cls in type(exc).__mro__:
        build = _ERROR_PROBLEMS.get(cls)
        if build is not None:
            problem = build(exc)
            problem.slug = code_for(exc)
            return problem
    return ApiProblem("an unexpected error occurred; it has been logged")


def allowed_methods(operations: Mapping[str, Iterable[str]], path: str) -> list[str]:
    """Every method the document lists for a path (``operations``: its paths and their methods,
    ``documented_operations``; Starlette's 405 names only the first route that matched it, so
    ``Allow`` would miss the others). As in OpenAPI, a path without parameters that matches
    (``/conversations/import``) wins over the templated ones."""
    if path in operations:
        return sorted(operations[path])
    methods: set[str] = set()
    for template, listed in operations.items():
        pattern = re.sub(r"\\{[^/]+?\\}", "[^/]+", re.escape(template))
        if re.fullmatch(pattern, path):
            methods |= set(listed)
    return sorted(methods)


def _http_problem(exc: StarletteHTTPException) -> ApiProblem:
    """The problem a framework HTTPException stands for."""
    if exc.status_code == 400 and isinstance(exc.__cause__, UnicodeDecodeError | RecursionError):
        # FastAPI's "There was an error parsing the body": JSON not in UTF-8, or nested too deep
        # for Python's reader (a syntax error is a RequestValidationError: validation_problem).
        reason = "not UTF-8" if isinstance(exc.__cause__, UnicodeDecodeError) else "nested too deep"
        return BadRequest(
            f"the request body is not valid JSON: {reason}", slug=ErrorCode.MALFORMED_JSON
        )
    cls = _STATUS_PROBLEMS.get(exc.status_code)
    if cls is not None:
        return cls(str(exc.detail))
    slug = ErrorCode.METHOD_NOT_ALLOWED if exc.status_code == 405 else ErrorCode.BAD_REQUEST
    problem = ApiProblem(str(exc.detail), slug=slug)
    problem.status, problem.title = exc.status_code, str(exc.detail)
    return problem


def install_problem_handlers(app: FastAPI) -> None:
    """Turn every error, ours or the framework's, into problem+json."""

    async def on_problem(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiProblem)
        return problem_response(exc)

    async def on_validation(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        return problem_response(validation_problem(list(exc.errors())))

    async def on_http(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            # The document's methods, else (a page, a static file: not in the document) the
            # route's own, which Starlette put in ``Allow``.
            operations = documented_operations(request.app.routes)
            methods = allowed_methods(operations, route_path(request.scope))
            if methods:
                headers["Allow"] = ", ".join(methods)
        return problem_response(_http_problem(exc), headers)

    async def on_known(request: Request, exc: Exception) -> JSONResponse:
        problem = problem_for(exc)
        if problem.status >= 500:  # the server's trouble, not the caller's: the operator's to see
            cause = f" ({driver_said(exc.__cause__)})" if exc.__cause__ else ""
            log.warning(
                "%s on %s %s: %s%s", problem.slug, request.method, request.url.path, exc, cause
            )
        return problem_response(problem)

    app.add_exception_handler(ApiProblem, on_problem)
    for known in (StorageError, RunsError, ConversationError, SpendError):
        app.add_exception_handler(known, on_known)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)
    # Anything else: ``app.api.middleware.observe.RequestObservability`` logs it and answers 500.


def unexpected_problem() -> JSONResponse:
    """The 500 for an error nothing handled (logged by the caller)."""
    return problem_response(ApiProblem("an unexpected error occurred; it has been logged"))
