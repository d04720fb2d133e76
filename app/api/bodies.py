"""JSON request bodies parsed once (large ones off the event loop), and a route's quick way.

May import FastAPI and Starlette. A 30 MB import parsed on the event loop holds every other
request of the process — and the renewals of its runs' leases — for as long as it takes (about a
second each, and several at once add up). The strict-JSON middleware (which must read every
body anyway) parses every body — one over ``LARGE_BODY`` bytes in a worker thread — and leaves
the document in the request's scope; routes of a ``ParsedBodyRoute`` take it from there instead
of parsing the body again, and parse a large body in a thread themselves if nobody did.

An endpoint marked with ``quick(way)`` is first offered to ``way``, which answers the common
request itself or returns None, and FastAPI solves the request as usual (every refusal is the
framework's own). FastAPI solves a route's parameters and dependencies on every request, ten
of them for a stream's start: a tenth of the CPU of a herd of starts (docs/performance.md).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Coroutine, MutableMapping
from typing import Any, TypeVar

from fastapi import Request, Response
from fastapi.routing import APIRoute

PARSED_KEY = "parley.json"
"""The scope's ``state`` key under which a parsed body waits for its route."""
LARGE_BODY = 64 * 1024
"""Bodies over this many bytes are parsed in a worker thread."""
_QUICK = "parley_quick"

Quick = Callable[[Request], Awaitable[Response | None]]
"""A route's quick way: the response to a request it answers itself, None for FastAPI's."""
F = TypeVar("F", bound=Callable[..., Any])


def quick(way: Quick) -> Callable[[F], F]:
    """Marks an endpoint (of a ``ParsedBodyRoute``) whose requests ``way`` is offered first."""

    def mark(endpoint: F) -> F:
        setattr(endpoint, _QUICK, way)
        return endpoint

    return mark


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
    """A route whose JSON body, when large, is parsed off the event loop (once); its
    endpoint's quick way (``quick``) first, if it has one."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        way: Quick | None = getattr(self.endpoint, _QUICK, None)

        async def route(request: Request) -> Response:
            parsed = _ParsedBodyRequest(request.scope, request.receive)
            if way is not None and (response := await way(parsed)) is not None:
                return response
            return await handler(parsed)  # the body read and parsed once, for both

        return route
