"""The files' tables: each file's metadata, the blobs (one per owner and content) and their
bytes in chunks, and which conversations refer to which files.

Imports SQLAlchemy and app.storage.tables (its ``Base``, so one metadata holds every table).

    files ──blob_id──▶ file_blobs ◀──blob_id── file_chunks (when the bytes are in SQL)
      ▲
      └──file_id── file_refs ──conversation_id──▶ conversations (ON DELETE CASCADE)
"""

from __future__ import annotations

from datetime import datetime
from typing import cast

from sqlalchemy import (
    BigInteger,
    Boolean,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Table,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from app.storage.tables import Base, UTCDateTime


class FileBlobRow(Base):
    """One content of one owner, stored once: in ``file_chunks`` (``store`` = ``sql``) or as an
    object in a bucket (``s3``). ``sha256`` is NULL while its bytes are being written."""

    __tablename__ = "file_blobs"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    owner: Mapped[str] = mapped_column(String(255))
    sha256: Mapped[str | None] = mapped_column(String(64))
    size: Mapped[int] = mapped_column(BigInteger)
    store: Mapped[str] = mapped_column(String(8))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())

    __table_args__ = (UniqueConstraint("owner", "sha256"),)


class FileChunkRow(Base):
    """A blob's bytes, ``seq`` numbering its chunks from 0 (each at most 1 MiB)."""

    __tablename__ = "file_chunks"

    blob_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("file_blobs.id", ondelete="CASCADE"), primary_key=True
    )
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    data: Mapped[bytes] = mapped_column(LargeBinary)


class FileRow(Base):
    """A file as its owner uploaded it: a name and a kind for a blob (several files may share
    one: the same bytes uploaded twice)."""

    __tablename__ = "files"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    owner: Mapped[str] = mapped_column(String(255))
    blob_id: Mapped[str] = mapped_column(String(32), ForeignKey("file_blobs.id"))
    name: Mapped[str] = mapped_column(String(255))
    media_type: Mapped[str] = mapped_column(String(64))
    size: Mapped[int] = mapped_column(BigInteger)
    sha256: Mapped[str] = mapped_column(String(64))
    purpose: Mapped[str | None] = mapped_column(String(64))
    width: Mapped[int | None] = mapped_column(Integer)
    height: Mapped[int | None] = mapped_column(Integer)
    # made by Parley from a message (a data URL, an import, a model's image), not uploaded:
    # kept only while a conversation refers to it (the sweep deletes it after a grace period)
    from_message: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())

    __table_args__ = (
        # an owner's files newest first, keyset-paginated on (created_at, id)
        Index("ix_files_owner_created_at_id", "owner", "created_at", "id"),
        Index("ix_files_blob_id", "blob_id"),
    )


class FileRefRow(Base):
    """A conversation whose stored messages refer to a file (``attachments: [{"file_id"}]``):
    while one does, the file is not deleted. Goes with the conversation."""

    __tablename__ = "file_refs"

    file_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("files.id", ondelete="RESTRICT"), primary_key=True
    )
    conversation_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("conversations.id", ondelete="CASCADE"), primary_key=True
    )

    __table_args__ = (Index("ix_file_refs_conversation_id", "conversation_id"),)


FILE_BLOBS = cast(Table, FileBlobRow.__table__)
FILE_CHUNKS = cast(Table, FileChunkRow.__table__)
FILES = cast(Table, FileRow.__table__)
FILE_REFS = cast(Table, FileRefRow.__table__)
