"""The playground: its page at ``/`` (and ``/playground/index.html``) and its files.

May import Starlette, FastAPI and the paths module. The page loads nothing from elsewhere, and
its headers keep it so (and keep injected markup inert).
"""

from __future__ import annotations

import functools
import html
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from starlette.responses import FileResponse, HTMLResponse, Response
from starlette.staticfiles import StaticFiles

from app.api.paths import public_path

STATIC = Path(__file__).resolve().parent.parent.parent / "web" / "static"
PLAYGROUND_HEADERS = {
    "Cache-Control": "no-cache",
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data: blob:; "
    "object-src 'none'; base-uri 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
}


class PlaygroundFiles(StaticFiles):
    """The playground's files with the page's headers: ``/playground/index.html`` is the page
    too (it must not be framed either), and no module or style sheet is sniffed as another type."""

    def file_response(self, *args: Any, **kwargs: Any) -> Response:
        response = super().file_response(*args, **kwargs)
        response.headers.update(PLAYGROUND_HEADERS)
        return response


@functools.cache
def _page_under(root: str) -> str:
    """The playground's page served under ``root``: its links (its module, style sheet, the
    docs) are under it too. Read and rewritten once per root path."""
    return (STATIC / "index.html").read_text().replace('="/', f'="{html.escape(root)}/')


def mount_playground(app: FastAPI) -> None:
    """Serve the playground's page at ``/`` and its files under ``/playground``."""

    async def playground(request: Request) -> Response:
        root = public_path(request.scope, "")
        if not root:
            return FileResponse(STATIC / "index.html", headers=PLAYGROUND_HEADERS)
        return HTMLResponse(_page_under(root), headers=PLAYGROUND_HEADERS)

    app.get("/", include_in_schema=False)(playground)
    # The page by its file's name too, before the files' mount would answer it unrewritten.
    app.api_route("/playground/index.html", methods=["GET", "HEAD"], include_in_schema=False)(
        playground
    )
    app.mount("/playground", PlaygroundFiles(directory=STATIC), name="playground")
