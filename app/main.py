"""The ASGI application factory: ``uvicorn --factory app.main:create_app``."""

from __future__ import annotations

from fastapi import FastAPI

from app.settings import Settings


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the application from ``settings`` (default: read from the environment)."""
    settings = settings or Settings()
    app = FastAPI(title="Parley", version="0.1.0")
    app.state.settings = settings

    @app.get("/healthz", tags=["operations"])
    async def healthz() -> dict[str, str]:
        """Liveness: answers while the process serves requests."""
        return {"status": "ok"}

    return app
