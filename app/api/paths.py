"""Paths under a prefix: Parley served at ``/parley`` by a proxy that strips it, told so with
``uvicorn --root-path /parley`` (docs/deploy.md).

May import Starlette. uvicorn puts the root path in front of ASGI's ``path``; the app's routes
are matched without it (what ``route_path`` gives), and the paths Parley writes for clients to
follow (``Location``, the playground's links) need it in front (``public_path``).
"""

from __future__ import annotations

from starlette.types import Scope


def route_path(scope: Scope) -> str:
    """The request's path within the app: without the root path it was mounted under."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if root and path.startswith(root) and path[len(root) : len(root) + 1] in ("", "/"):
        return path[len(root) :] or "/"
    return path


def public_path(scope: Scope, path: str) -> str:
    """``path`` of the app (``/conversations/…``) as clients reach it: under the root path."""
    root: str = scope.get("root_path", "")
    return root.rstrip("/") + path
