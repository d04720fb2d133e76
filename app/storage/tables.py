"""The SQL schema: declarative rows for conversations and their messages (DESIGN.md §5).

Imports SQLAlchemy only. Rows stay inside app/storage; the repository returns records.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

from sqlalchemy import (
    JSON,
    CheckConstraint,
    DateTime,
    Dialect,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    TypeDecorator,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# JSONB on PostgreSQL (indexable, compact), JSON text on SQLite.
JSONDocument = JSON().with_variant(JSONB(), "postgresql")


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC datetime on every backend (SQLite stores it naive, in UTC)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("UTCDateTime needs a timezone-aware datetime")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


class Base(DeclarativeBase):
    """Declarative base whose metadata names every constraint by convention."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class ConversationRow(Base):
    """One conversation: who owns it, its config, its version and its run lease."""

    __tablename__ = "conversations"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    owner: Mapped[str] = mapped_column(String(255))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())
    config: Mapped[dict[str, Any]] = mapped_column(JSONDocument)
    meta: Mapped[dict[str, Any]] = mapped_column("metadata", JSONDocument)
    version: Mapped[int] = mapped_column(Integer)
    message_count: Mapped[int] = mapped_column(Integer)
    lease_run_id: Mapped[str | None] = mapped_column(String(64))
    lease_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime())

    __table_args__ = (
        CheckConstraint("version >= 1", name="version_positive"),
        CheckConstraint("message_count >= 0", name="message_count_not_negative"),
    )


class MessageRow(Base):
    """One message of a conversation: its index and its serialized JSON, exactly."""

    __tablename__ = "messages"

    conversation_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("conversations.id", ondelete="CASCADE"), primary_key=True
    )
    idx: Mapped[int] = mapped_column(Integer, primary_key=True)
    data: Mapped[str] = mapped_column(Text)
    # The tool_call_id while this row is a pending client tool call, NULL otherwise.
    pending_call_id: Mapped[str | None] = mapped_column(String(255))

    __table_args__ = (
        CheckConstraint("idx >= 0", name="idx_not_negative"),
        # Finds a conversation's pending calls; at most one pending call per id.
        Index(
            "ix_messages_conversation_id_pending_call_id",
            "conversation_id",
            "pending_call_id",
            unique=True,
            sqlite_where=text("pending_call_id IS NOT NULL"),
            postgresql_where=text("pending_call_id IS NOT NULL"),
        ),
    )


# A caller's conversations newest first, keyset-paginated on (created_at, id): the listing's order.
Index(
    "ix_conversations_owner_created_at_id",
    ConversationRow.owner,
    ConversationRow.created_at.desc(),
    ConversationRow.id.desc(),
)

CONVERSATIONS = cast(Table, ConversationRow.__table__)
MESSAGES = cast(Table, MessageRow.__table__)
