"""The request middleware: request ids, HTTP metrics, and the 500 for an unexpected error.

May import Starlette, the problems and paths modules and app.observability. A pure ASGI
middleware, so a stream is timed to its last byte and pays nothing per chunk. ``X-Request-ID``
is taken from the request when it is 1–128 of ``A-Z a-z 0-9 . _ ~ -`` (else a new one is made),
returned on every response, set on every log line of the request, and is the ``instance`` of a
problem.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Sequence
from typing import Any

from starlette.datastructures import MutableHeaders
from starlette.routing import compile_path
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.paths import documented_operations, route_path
from app.api.problems import unexpected_problem
from app.observability import logs, metrics

REQUEST_ID_HEADER = "X-Request-ID"
_VALID_ID = re.compile(r"[A-Za-z0-9._~-]{1,128}")
UNMATCHED = "<unmatched>"
OTHER_METHOD = "other"
_METHODS = frozenset(
    {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "CONNECT"}
)

log = logging.getLogger(__name__)


def request_id_of(scope: Scope) -> str:
    """The caller's request id if it is a safe one, else a new one."""
    for name, value in scope["headers"]:
        if name == b"x-request-id":
            candidate: str = value.decode("latin-1").strip()
            if _VALID_ID.fullmatch(candidate):
                return candidate
            break
    return uuid.uuid4().hex


def route_of(scope: Scope, templates: Sequence[tuple[re.Pattern[str], str]] = ()) -> str:
    """The matched route's template (bounded label values), else the first of ``templates``
    whose pattern matches the path (a request answered before routing: by the Origin check,
    CORS, or as a body too large or not strict JSON), else ``<unmatched>``."""
    path = getattr(scope.get("route"), "path", None)
    if isinstance(path, str):
        return path
    for pattern, template in templates:
        if pattern.match(route_path(scope)):
            return template
    return UNMATCHED


def documented_routes(app: Any) -> list[tuple[re.Pattern[str], str]]:
    """The path templates of the app's OpenAPI document, fewest parameters first: a fixed path
    wins over a template that would match it too (``/conversations/import`` over
    ``/conversations/{conversation_id}``), as in the router."""
    operations = documented_operations(app.routes)
    templates = sorted(operations, key=lambda template: template.count("{"))
    return [(compile_path(template)[0], template) for template in templates]


def method_of(scope: Scope) -> str:
    """The request's method if it is a standard one, else ``other``: uvicorn's h11 parser
    lets any token through, and each would make new series."""
    method: str = scope["method"]
    return method if method in _METHODS else OTHER_METHOD


class RequestObservability:
    """Request id in and out, one log context per request, HTTP metrics, and a problem+json
    500 (logged with its request id) for any error nothing else handled."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._templates: list[tuple[re.Pattern[str], str]] | None = None

    def _route(self, scope: Scope) -> str:
        if "route" not in scope and self._templates is None:  # made once, when first needed
            self._templates = documented_routes(scope["app"])
        return route_of(scope, self._templates or ())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = request_id_of(scope)
        token = logs.start_request(request_id, scope)
        started = time.perf_counter()
        status, responded = 500, False

        async def send_with_id(message: Message) -> None:
            nonlocal status, responded
            if message["type"] == "http.response.start":
                status, responded = message["status"], True
                MutableHeaders(scope=message)[REQUEST_ID_HEADER] = request_id
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except Exception:
            if responded:
                raise
            log.exception("unhandled error on %s %s", scope["method"], scope["path"])
            await unexpected_problem()(scope, receive, send_with_id)
        finally:
            elapsed = time.perf_counter() - started
            metrics.http_request(self._route(scope), method_of(scope), status, elapsed)
            logs.end_request(token)
