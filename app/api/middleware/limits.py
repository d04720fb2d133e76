"""A pure ASGI middleware that refuses request bodies over the size limit with a 413 problem.

May import Starlette, the problems and paths modules. Starlette's own limiter answers a too-large
``Content-Length`` in plain text; this one answers in problem+json, and raises the 413 for a
body that grows past the limit while it is read, so the problem handler writes it. It wraps
``receive`` only, so streamed responses pay nothing for it.
"""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.paths import route_path
from app.api.problems import PayloadTooLarge, problem_response


class BodySizeLimit:
    """413 for any request whose body is larger than ``max_bytes`` — or, for the paths in
    ``per_path`` (exact paths of the app, under any root path), than the limit given there."""

    def __init__(
        self, app: ASGIApp, max_bytes: int, per_path: dict[str, int] | None = None
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.per_path = per_path or {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.per_path.get(route_path(scope).rstrip("/"), self.max_bytes)
        too_large = f"the request body is larger than {limit} bytes, this route's limit"
        declared = dict(scope["headers"]).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > limit:
            await problem_response(PayloadTooLarge(too_large))(scope, receive, send)
            return
        received = 0

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise HTTPException(413, too_large)
            return message

        await self.app(scope, counting_receive, send)
