"""Uploaded files as the API serves them (docs/files.md).

May import pydantic and the schemas' base.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from app.api.schemas.base import SERVED


class FileOut(BaseModel):
    """A stored file's metadata; its bytes are at `GET /files/{id}/content`."""

    model_config = ConfigDict(
        **SERVED,
        json_schema_extra={
            "examples": [
                {
                    "id": "0b7e4b6a5f0c4c7e9a0d2f1e3c5b7a9d",
                    "name": "cat.png",
                    "media_type": "image/png",
                    "size": 48213,
                    "sha256": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
                    "created_at": "2026-11-26T23:00:00Z",
                    "purpose": "vision",
                    "width": 640,
                    "height": 480,
                }
            ]
        },
    )

    id: str = Field(description="The file's id (32 hex digits).")
    name: str = Field(description="The name it was uploaded with (its last path part).")
    media_type: str = Field(
        description="Read from the bytes: image/png, image/jpeg, image/gif, image/webp, "
        "application/pdf, text/plain, text/markdown or text/csv."
    )
    size: int = Field(description="Bytes.")
    sha256: str = Field(description="The bytes' SHA-256, in hex.")
    created_at: datetime
    purpose: str | None = Field(None, description="As given at upload.")
    width: int | None = Field(None, description="An image's width in pixels (null otherwise).")
    height: int | None = Field(None, description="An image's height in pixels (null otherwise).")


class FilePage(BaseModel):
    """One page of files, newest first."""

    model_config = SERVED

    items: list[FileOut]
    next_cursor: str | None = Field(None, description="Pass as ?cursor= for the next page.")
