"""Settings of the titles made for conversations (app/runs/titles.py, docs/search.md).

Imports pydantic-settings only.
"""

from __future__ import annotations

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings


class TitleSettings(BaseSettings):
    """Whether a title is made after a conversation's first completed reply, and by what."""

    auto_title: bool = Field(
        False,
        description="After a completed reply of a conversation without a title, make one with "
        "a small model call (in the background: it never delays or fails the run; its tokens "
        "count in the run's usage). The offline model takes the first words of the first user "
        "message.",
    )
    title_provider: str | None = Field(
        None,
        description="Provider that makes titles (default: the conversation's own, else the "
        "default provider).",
    )
    title_model: str | None = Field(
        None,
        description="Model that makes titles (default: the conversation's model when the "
        "title provider is the conversation's, else the provider's default model).",
    )
    title_timeout_seconds: float = Field(
        30, gt=0, le=3600, description="Longest a title's model call may take before it is dropped."
    )

    @field_validator("title_provider", "title_model", mode="after")
    @classmethod
    def _blank_is_none(cls, value: str | None) -> str | None:
        return value.strip() or None if value is not None else None
