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
    return under_root(scope.get("root_path", ""), path)


def under_root(root_path: str, path: str) -> str:
    """``path`` of the app under ``root_path`` (a request's, as ``Caller.root_path`` keeps it)."""
    return root_path.rstrip("/") + path


def file_content_path(root_path: str, file_id: str) -> str:
    """The public path of a file's bytes (``GET /files/{id}/content``)."""
    return under_root(root_path, f"/files/{file_id}/content")
