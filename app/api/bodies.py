"""Large JSON request bodies parsed off the event loop, once.

May import FastAPI and Starlette. A 30 MB import parsed on the event loop holds every other
request of the process — and the renewals of its runs' leases — for as long as it takes (about a
second each, and several at once add up). The strict-JSON middleware (which must read every
body anyway) parses a body over ``LARGE_BODY`` bytes in a worker thread and leaves the document
in the request's scope; routes of a ``ParsedBodyRoute`` take it from there instead of parsing
the body again on the loop, and parse a large body in a thread themselves if nobody did.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine, MutableMapping
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute

PARSED_KEY = "parley.json"
"""The scope's ``state`` key under which a parsed body waits for its route."""
LARGE_BODY = 64 * 1024
"""Bodies over this many bytes are parsed in a worker thread."""


def hand_on(scope: MutableMapping[str, Any], document: Any) -> None:
    """Leave the parsed body for the route (the middleware parsed it)."""
    state = scope.setdefault("state", {})
    state[PARSED_KEY] = document


class _ParsedBodyRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            state = self.scope.get("state") or {}
            if PARSED_KEY in state:
                self._json = state.pop(PARSED_KEY)
            else:
                body = await self.body()
                large = len(body) > LARGE_BODY
                self._json = (
                    await asyncio.to_thread(json.loads, body) if large else json.loads(body)
                )
        return self._json


class ParsedBodyRoute(APIRoute):
    """A route whose JSON body, when large, is parsed off the event loop (once)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            return await handler(_ParsedBodyRequest(request.scope, request.receive))

        return route
