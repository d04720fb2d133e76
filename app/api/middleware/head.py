"""``HEAD`` wherever ``GET`` is served: a pure ASGI middleware, so the routes stay GET-only.

May import Starlette. FastAPI routes answer only the methods they declare; operators' probes and
``curl -I`` send HEAD. A HEAD is served as the GET it stands for, its status and headers
(``Content-Length`` included) kept and its body dropped. Not on a stream: a HEAD would wait for a
whole run to end (it gets the 405 that names the stream's methods).
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class HeadAsGet:
    """Serve ``HEAD`` as ``GET`` without the body, except on ``…/stream``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["method"] != "HEAD"
            or str(scope["path"]).rstrip("/").endswith("/stream")
        ):
            await self.app(scope, receive, send)
            return

        async def send_without_body(message: Message) -> None:
            if message["type"] == "http.response.body":
                if message.get("more_body", False):
                    return
                message = {"type": "http.response.body", "body": b"", "more_body": False}
            await send(message)

        as_get = {**scope, "method": "GET"}
        try:
            await self.app(as_get, receive, send_without_body)
        finally:  # what routing found (the route, for the request's metrics) is the HEAD's too
            scope.update((key, value) for key, value in as_get.items() if key not in scope)
