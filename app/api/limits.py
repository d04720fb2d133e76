"""A pure ASGI middleware that refuses request bodies over the size limit with a 413 problem.

May import Starlette and the problems module. Starlette's own limiter answers a too-large
``Content-Length`` in plain text; this one answers in problem+json, and raises the 413 for a
body that grows past the limit while it is read, so the problem handler writes it. It wraps
``receive`` only, so streamed responses pay nothing for it.
"""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.problems import PayloadTooLarge, problem_response


class BodySizeLimit:
    """413 for any request whose body is larger than ``max_bytes``."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    def _too_large(self) -> str:
        return f"the request body is larger than {self.max_bytes} bytes"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.max_bytes:
            await problem_response(PayloadTooLarge(self._too_large()))(scope, receive, send)
            return
        received = 0

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise HTTPException(413, self._too_large())
            return message

        await self.app(scope, counting_receive, send)
