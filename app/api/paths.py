"""Paths under a prefix: Parley served at ``/parley`` by a proxy that strips it, told so with
``uvicorn --root-path /parley`` (docs/deploy.md).

May import Starlette and FastAPI's routes. uvicorn puts the root path in front of ASGI's
``path``; the app's routes are matched without it (what ``route_path`` gives), and the paths
Parley writes for clients to follow (``Location``, the playground's links) need it in front
(``public_path``). ``documented_operations`` names the routes the OpenAPI document lists.
"""

from __future__ import annotations

from collections.abc import Iterable

from fastapi.routing import APIRoute
from starlette.routing import BaseRoute
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


def documented_operations(routes: Iterable[BaseRoute]) -> dict[str, frozenset[str]]:
    """The paths of the app's OpenAPI document, each with its methods, read from the routes it
    is made from (FastAPI documents its API routes included in the schema): what a refusal
    made before routing and a 405 need, without building the document (0.3 s of CPU)."""
    operations: dict[str, set[str]] = {}
    for route in routes:
        if isinstance(route, APIRoute) and route.include_in_schema:
            operations.setdefault(route.path, set()).update(route.methods or ())
    return {path: frozenset(methods) for path, methods in operations.items()}
