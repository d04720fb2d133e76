"""What a browser needs of the middleware: the Origin check, CORS, the docs pages' policy.

May import Starlette, the settings, the problems and paths modules. The playground's page is
served by ``app.api.routes.playground``. The Origin check is a pure ASGI
middleware, so streamed responses pay nothing for it: a request whose ``Origin`` is neither
Parley's own (the scheme and host it was made to) nor listed in ``PARLEY_CORS_ORIGINS`` gets a
403 problem before any route runs. Requests without ``Origin`` (curl, SDKs) pass untouched,
except the ones a browser marks ``Sec-Fetch-Site: cross-site``/``same-site`` (a no-cors GET from
an ``<img>`` or ``fetch`` carries no Origin): those pass only as a navigation to a page.
A refused CORS preflight is a 403 problem too (``ProblemCORS``).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from fastapi import FastAPI
from starlette.datastructures import Headers, MutableHeaders
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.paths import route_path
from app.api.problems import Forbidden, problem_response
from app.runs.events import ErrorCode
from app.settings import Settings

DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}
CORS_METHODS = ["GET", "HEAD", "POST", "DELETE", "OPTIONS"]  # HEAD: served as GET (head.py)
CORS_HEADERS = ["Authorization", "Content-Type", "If-Match", "Idempotency-Key", "Last-Event-ID"]
_BODY_HEADERS = ("content-length", "content-type")
# Every response header the API documents that a script may read (docs/frontend.md).
EXPOSED_HEADERS = [
    "Allow",
    "ETag",
    "Idempotent-Replayed",
    "Location",
    "Retry-After",
    "X-Request-ID",
    "X-Run-Id",
]
# The docs pages (fastapi-offline serves them): no other site may frame them (Swagger UI's "Try
# it out" runs requests as Parley's own page). ReDoc draws its vendor's logo from cdn.redoc.ly:
# refused by the page's policy, the browser never asks for it, and /redoc stays offline.
# (Swagger UI starts from an inline script; ReDoc writes its own <style> elements.)
DOCS_HEADERS = {
    "/docs": {"Content-Security-Policy": "frame-ancestors 'none'"},
    "/redoc": {
        "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; "
        "style-src 'self' 'unsafe-inline'; worker-src 'self' blob:; object-src 'none'; "
        "base-uri 'none'; frame-ancestors 'none'",
    },
}


def origin_key(origin: str) -> tuple[str, str, int] | None:
    """``(scheme, host, port)`` of an origin or base URL, default ports filled in; None if
    it is not one (``null``, no scheme, no host)."""
    try:
        parts = urlsplit(origin.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if not parts.hostname or scheme not in DEFAULT_PORTS:
        return None
    return scheme, parts.hostname.lower(), port or DEFAULT_PORTS[scheme]


def browser_origin(origin: str) -> str | None:
    """``origin`` spelled as a browser sends it in ``Origin`` (lower case, no default port),
    which Starlette's CORS compares as a string; None if it is not an origin."""
    key = origin_key(origin)
    if key is None:
        return None
    scheme, host, port = key
    host = f"[{host}]" if ":" in host else host  # IPv6
    return f"{scheme}://{host}" + ("" if port == DEFAULT_PORTS[scheme] else f":{port}")


def _own_origin(scope: Scope) -> tuple[str, str, int] | None:
    headers = dict(scope["headers"])
    host = headers.get(b"host", b"").decode("latin-1")
    if not host and scope.get("server"):
        server_host, server_port = scope["server"]
        host = f"{server_host}:{server_port}"
    return origin_key(f"{scope.get('scheme', 'http')}://{host}") if host else None


def _foreign_without_origin(scope: Scope, headers: dict[bytes, bytes]) -> bool:
    """A browser request from another site that carries no Origin and is not a user's
    navigation to a page (following a link to ``/docs`` is fine; to a stream is not)."""
    site = headers.get(b"sec-fetch-site", b"").lower()
    if site not in (b"cross-site", b"same-site"):
        return False
    navigation = headers.get(b"sec-fetch-mode", b"").lower() == b"navigate"
    page = scope["method"] == "GET" and not str(scope["path"]).endswith("/stream")
    return not (navigation and page)


class OriginCheck:
    """403 problem+json for any request from a browser page on a foreign origin."""

    def __init__(self, app: ASGIApp, allowed: list[str]) -> None:
        self.app = app
        self.allowed = {key for o in allowed if (key := origin_key(o)) is not None}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        raw = headers.get(b"origin")
        if raw is None:
            refused = _foreign_without_origin(scope, headers)
            origin = "another site"
        else:
            key = origin_key(raw.decode("latin-1"))
            origin = f"the origin {raw.decode('latin-1')!r}"
            refused = key is None or (key != _own_origin(scope) and key not in self.allowed)
        if refused:
            await problem_response(_origin_refused(origin))(scope, receive, send)
            return
        await self.app(scope, receive, send)


def _origin_refused(origin: str) -> Forbidden:
    return Forbidden(
        f"requests from {origin} are not allowed; an operator can list an origin "
        "in PARLEY_CORS_ORIGINS",
        slug=ErrorCode.ORIGIN_NOT_ALLOWED,
    )


class ProblemCORS(CORSMiddleware):
    """Starlette's CORS, its preflight refusals (400 text/plain there) written as 403
    problem+json like every other refusal: ``origin_not_allowed`` for an origin not listed,
    ``cors_not_allowed`` for a method or header a listed origin may not use."""

    def preflight_response(self, request_headers: Headers) -> Response:
        response = super().preflight_response(request_headers)
        if response.status_code < 400:
            return response
        origin = request_headers["origin"]
        if not self.is_allowed_origin(origin):
            problem = _origin_refused(f"the origin {origin!r}")
        else:
            problem = Forbidden(
                f"a cross-origin request may use the methods {', '.join(CORS_METHODS)} and "
                f"the headers {', '.join(CORS_HEADERS)}; the preflight asked for "
                f"{request_headers['access-control-request-method']!r} with headers "
                f"{request_headers.get('access-control-request-headers', '')!r}",
                slug=ErrorCode.CORS_NOT_ALLOWED,
            )
        kept = {k: v for k, v in response.headers.items() if k not in _BODY_HEADERS}
        return problem_response(problem, kept)


class DocsPolicy:
    """``DOCS_HEADERS`` on the docs pages."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = DOCS_HEADERS.get(route_path(scope)) if scope["type"] == "http" else None
        if headers is None:
            await self.app(scope, receive, send)
            return

        async def send_with_policy(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message).update(headers)
            await send(message)

        await self.app(scope, receive, send_with_policy)


def install_browser_support(app: FastAPI, settings: Settings) -> None:
    """Add the docs pages' policy, the Origin check and (when origins are listed) CORS.

    Call after the other middleware but the request middleware (request ids, metrics): CORS
    ends up outermost but for that one, so a listed origin's preflight is answered by it, and
    the Origin check refuses every other origin before anything else runs.
    """
    origins = [o for o in map(browser_origin, settings.cors_origin_list()) if o is not None]
    app.add_middleware(DocsPolicy)
    app.add_middleware(OriginCheck, allowed=origins)
    if origins:
        app.add_middleware(
            ProblemCORS,
            allow_origins=origins,
            allow_methods=CORS_METHODS,
            allow_headers=CORS_HEADERS,
            expose_headers=EXPOSED_HEADERS,
            max_age=600,
        )
