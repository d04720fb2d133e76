"""The allowed hosts: a request whose ``Host`` is not listed in ``PARLEY_ALLOWED_HOSTS`` gets a
400 problem before anything else runs (the Origin check included, which takes ``Host`` as
Parley's own origin).

May import Starlette, the paths and problems modules. Without it a page on a name that an
attacker's DNS turns to Parley's address (DNS rebinding) passes the Origin check as Parley's own
origin. Pure ASGI, so a stream pays one dictionary walk. The probes (``PROBE_PATHS``) answer any
host: orchestrators call them by the container's address. A request without ``Host`` (HTTP/1.0)
passes: browsers always send one.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.paths import route_path
from app.api.problems import BadRequest, problem_response
from app.runs.events import ErrorCode

PROBE_PATHS = frozenset({"/healthz", "/readyz"})


def host_name(host: str) -> str:
    """The name of a ``Host`` header's value: lower case, without port, IPv6 brackets or the
    root's trailing dot (``[::1]:8000`` → ``::1``, ``Example.COM.:80`` → ``example.com``)."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:].partition("]")[0]
    return host.partition(":")[0].rstrip(".")


class AllowedHosts:
    """400 problem+json for a request made to a host that is not listed."""

    def __init__(self, app: ASGIApp, hosts: list[str]) -> None:
        self.app = app
        self.any = "*" in hosts
        self.names = frozenset(h for h in hosts if not h.startswith("*"))
        self.suffixes = tuple(h[1:] for h in hosts if h.startswith("*."))  # ".example.com"

    def allows(self, name: str) -> bool:
        return (
            self.any or name in self.names or (bool(self.suffixes) and name.endswith(self.suffixes))
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        raw = next((value for key, value in scope["headers"] if key == b"host"), None)
        if raw is None or self.allows(host_name(raw.decode("latin-1"))):
            await self.app(scope, receive, send)
            return
        if route_path(scope) in PROBE_PATHS:
            await self.app(scope, receive, send)
            return
        await problem_response(host_refused(raw.decode("latin-1")))(scope, receive, send)


def host_refused(host: str) -> BadRequest:
    return BadRequest(
        f"this server does not answer to the host {host[:200]!r}; an operator can list it in "
        "PARLEY_ALLOWED_HOSTS",
        slug=ErrorCode.HOST_NOT_ALLOWED,
    )
