"""The SQL schema: conversations and their messages (DESIGN §5), runs and their events (§4a),
and the idempotency keys of retried requests.

Imports SQLAlchemy only. Rows stay inside app/storage; the repository returns records.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

from sqlalchemy import (
    JSON,
    Boolean,
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

# A client's JSON (config, metadata): JSON on every backend, so PostgreSQL keeps the text as given.
# JSONB would not give it back as sent: it orders keys by length, and reads 1e16 and
# 12345678901234567.0 back as integers and -0.0 as 0.0. Nothing queries into these documents.
ClientDocument = JSON()
# JSON Parley makes (a run's usage counts): JSONB on PostgreSQL (indexable, compact).
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
    config: Mapped[dict[str, Any]] = mapped_column(ClientDocument)
    meta: Mapped[dict[str, Any]] = mapped_column("metadata", ClientDocument)
    version: Mapped[int] = mapped_column(Integer)
    message_count: Mapped[int] = mapped_column(Integer)
    lease_run_id: Mapped[str | None] = mapped_column(String(64))
    lease_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    # Set by PATCH or made after the first reply (app/runs/titles.py); searched (docs/search.md).
    title: Mapped[str | None] = mapped_column(String(200))
    archived: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))

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


class RunRow(Base):
    """One run of the model on a conversation: who started it, how it ended."""

    __tablename__ = "runs"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    conversation_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("conversations.id", ondelete="CASCADE")
    )
    owner: Mapped[str] = mapped_column(String(255))
    status: Mapped[str] = mapped_column(String(32))
    on_disconnect: Mapped[str] = mapped_column(String(16))
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    error_code: Mapped[str | None] = mapped_column(String(64))
    usage: Mapped[dict[str, Any] | None] = mapped_column(JSONDocument)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())

    __table_args__ = (
        # A conversation's runs newest first (the listing), keyset-paginated on (created_at, id).
        Index("ix_runs_conversation_id_created_at_id", "conversation_id", "created_at", "id"),
        # Finished runs whose events are due for pruning.
        Index("ix_runs_finished_at", "finished_at"),
    )


class RunEventRow(Base):
    """Events ``seq`` .. ``seq + count - 1`` of a run, as sent on its stream.

    ``count`` is 1 but for merged text deltas of one block, whose ``data`` is then
    ``{"index": i, "deltas": [...]}`` (app/runs/events.py reads and writes both shapes).
    """

    __tablename__ = "run_events"

    run_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True
    )
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    count: Mapped[int] = mapped_column(Integer, default=1)
    name: Mapped[str] = mapped_column(String(32))
    data: Mapped[str] = mapped_column(Text)

    __table_args__ = (
        CheckConstraint("seq >= 1", name="seq_positive"),
        CheckConstraint("count >= 1", name="count_positive"),
    )


class IdempotencyKeyRow(Base):
    """A request made with an ``Idempotency-Key``: pending while it is served, then its
    result (a response to repeat, or the run a stream started). Scoped by owner and route."""

    __tablename__ = "idempotency_keys"

    owner: Mapped[str] = mapped_column(String(255), primary_key=True)
    scope: Mapped[str] = mapped_column(String(255), primary_key=True)
    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    request_hash: Mapped[str] = mapped_column(String(64))
    state: Mapped[str] = mapped_column(String(16))
    status_code: Mapped[int | None] = mapped_column(Integer)
    response: Mapped[str | None] = mapped_column(Text)
    run_id: Mapped[str | None] = mapped_column(String(32))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime())

    __table_args__ = (
        CheckConstraint("state IN ('pending', 'done')", name="state_known"),
        Index("ix_idempotency_keys_expires_at", "expires_at"),
    )


CONVERSATIONS = cast(Table, ConversationRow.__table__)
MESSAGES = cast(Table, MessageRow.__table__)
RUNS = cast(Table, RunRow.__table__)
RUN_EVENTS = cast(Table, RunEventRow.__table__)
IDEMPOTENCY_KEYS = cast(Table, IdempotencyKeyRow.__table__)
