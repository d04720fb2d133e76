"""Settings of API keys in the database, their limits, and the price table (docs/spend.md).

Imports pydantic-settings only; a mixin of ``Settings`` (no ``model_config`` of its own).
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings


class SpendSettings(BaseSettings):
    """Keys, limits and prices."""

    admin_token: SecretStr = Field(
        SecretStr(""),
        description="Bearer token of the admin API (`/admin/keys`) and of everyone's `/usage`; "
        "empty: the admin API answers 404 and `/usage` shows each caller its own. Never shown "
        "in a repr or log.",
    )
    key_cache_seconds: float = Field(
        0.5,
        ge=0,
        lt=1,
        description="How long a process trusts what it read of a database key (a revocation, "
        "an expiry or a new limit takes at most this long to reach every replica).",
    )
    key_last_used_seconds: float = Field(
        60.0,
        ge=0,
        le=86_400,
        description="A key's `last_used_at` is written at most once in this many seconds by "
        "each process (not on every request).",
    )
    prices_file: str = Field(
        "",
        description="A JSON price table (the shape of app/spend/prices.json) whose models "
        "replace or add to the shipped ones; empty: the shipped table alone.",
    )

    @field_validator("prices_file", mode="after")
    @classmethod
    def _a_price_table(cls, value: str) -> str:
        """A file that is not a JSON object with a ``models`` object stops the process (status
        2, one line) rather than its first model call."""
        if not value:
            return value
        try:
            document = json.loads(Path(value).read_text("utf-8"))
        except (OSError, ValueError) as exc:
            raise ValueError(f"cannot read a price table from {value!r}: {exc}") from exc
        if not isinstance(document, dict) or not isinstance(document.get("models"), dict):
            raise ValueError(f"{value!r} is not a price table: an object with a 'models' object")
        return value
