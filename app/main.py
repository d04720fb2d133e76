"""The ASGI application factory: ``uvicorn --factory app.main:create_app``.

Builds the services from the settings (nothing reads the environment at import time) and
mounts the routers, the problem handlers and the body-size limit.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from app.api import conversations, history, streams
from app.api.limits import BodySizeLimit
from app.api.problems import install_problem_handlers
from app.providers import close_selector
from app.runs.services import Services
from app.settings import Settings

DESCRIPTION = """Parley keeps LLM conversations and runs them over HTTP and Server-Sent Events.

Create a conversation, post delta bundles to it (messages — injected assistant messages
included — and config patches), and stream the model's reply from `…/stream`. Errors are
`application/problem+json`. Send `Authorization: Bearer <token>` to keep your conversations
to yourself: each token sees only its own.
"""


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the application from ``settings`` (default: read from the environment)."""
    settings = settings or Settings()
    services = Services.from_settings(settings)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        await close_selector(services.configs.selector)
        await services.database.dispose()

    app = FastAPI(
        title="Parley",
        version="0.1.0",
        description=DESCRIPTION,
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.services = services
    install_problem_handlers(app)
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes)
    app.include_router(conversations.router)
    app.include_router(history.router)
    app.include_router(streams.router)

    @app.get("/healthz", tags=["operations"])
    async def healthz() -> dict[str, str]:
        """Liveness: answers while the process serves requests."""
        return {"status": "ok"}

    return app
