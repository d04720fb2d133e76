"""What the file store returns (``FileRecord``), file ids, and the rows' codec.

Imports app.domain.media and the standard library.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.domain.media import IMAGE_TYPES
from app.storage.files.errors import FileNotFound

CHUNK_BYTES = 1 << 20
"""The bytes of one stored chunk, and of one piece read or written at a time."""


@dataclass(frozen=True, slots=True)
class FileRecord:
    """A stored file as its owner sees it; ``width``/``height`` for images (from the header)."""

    id: str
    owner: str
    name: str
    media_type: str
    size: int
    sha256: str
    created_at: datetime
    purpose: str | None = None
    width: int | None = None
    height: int | None = None
    from_message: bool = False

    @property
    def is_image(self) -> bool:
        return self.media_type in IMAGE_TYPES


def new_file_id() -> str:
    """A fresh file (or blob) id: a random UUID as 32 lowercase hex digits."""
    return uuid.uuid4().hex


def file_key(file_id: str) -> str:
    """The stored form of a file id (any UUID spelling); FileNotFound if it is none."""
    try:
        return uuid.UUID(file_id).hex
    except (ValueError, TypeError, AttributeError):
        raise FileNotFound(str(file_id)) from None


def to_file_record(row: Mapping[Any, Any]) -> FileRecord:
    return FileRecord(
        id=row["id"],
        owner=row["owner"],
        name=row["name"],
        media_type=row["media_type"],
        size=row["size"],
        sha256=row["sha256"],
        created_at=row["created_at"],
        purpose=row["purpose"],
        width=row["width"],
        height=row["height"],
        from_message=bool(row["from_message"]),
    )
