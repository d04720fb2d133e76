"""Server settings from the environment (prefix ``PARLEY_``), passed to ``create_app``.

Imports pydantic-settings only. Provider credentials are settings, never request data.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_DATABASE_URL = "sqlite+aiosqlite:///./data/parley.db"


class Settings(BaseSettings):
    """Everything an operator can set; each field is documented in the README."""

    model_config = SettingsConfigDict(env_prefix="PARLEY_", extra="ignore")

    database_url: str = Field(DEFAULT_DATABASE_URL, description="SQLAlchemy async URL.")
    offline_delay_ms: float = Field(0, ge=0, description="Offline adapter delay per word.")
    default_provider: str | None = Field(
        None, description="Provider for conversations that name none (default: first available)."
    )

    def sqlite_path(self) -> Path | None:
        """The SQLite file the database URL points at, if it is one."""
        prefix = "sqlite+aiosqlite:///"
        if not self.database_url.startswith(prefix):
            return None
        rest = self.database_url[len(prefix) :].split("?", 1)[0]
        return None if rest in ("", ":memory:") else Path(rest)
