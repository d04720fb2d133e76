"""The spend schema (docs/spend.md): API keys with their limits, the fixed-window request
counters, and the usage ledger (one row per model call).

Imports SQLAlchemy and app.storage.tables (the same ``Base``: migrations and the tests' truncate
see these tables because app/storage/__init__.py imports this module). What the rows mean is
app/spend's business.
"""

from __future__ import annotations

from datetime import datetime
from typing import cast

from sqlalchemy import BigInteger, Float, Index, Integer, String, Table
from sqlalchemy.orm import Mapped, mapped_column

from app.storage.tables import Base, UTCDateTime


class KeyRow(Base):
    """An API key: its token's SHA-256 (never the token), a visible prefix, its limits."""

    __tablename__ = "keys"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(16))
    name: Mapped[str] = mapped_column(String(255))
    owner: Mapped[str] = mapped_column(String(255))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    last_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    requests_per_minute: Mapped[int | None] = mapped_column(Integer)
    max_concurrent_runs: Mapped[int | None] = mapped_column(Integer)
    output_tokens_per_day: Mapped[int | None] = mapped_column(BigInteger)
    budget_usd_per_month: Mapped[float | None] = mapped_column(Float)


class KeyWindowRow(Base):
    """A key's requests in one minute (``window``: minutes since the epoch)."""

    __tablename__ = "key_windows"

    key_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    window: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    n: Mapped[int] = mapped_column(Integer)


class UsageLedgerRow(Base):
    """One model call's usage and cost; ``call`` numbers the calls of a run from 1 (0: the
    automatic title made after it).

    No foreign keys: the ledger outlives deleted conversations (it is the account)."""

    __tablename__ = "usage_ledger"

    run_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    call: Mapped[int] = mapped_column(Integer, primary_key=True)
    conversation_id: Mapped[str] = mapped_column(String(32))
    owner: Mapped[str] = mapped_column(String(255))
    key_id: Mapped[str | None] = mapped_column(String(32))
    provider: Mapped[str] = mapped_column(String(64))
    model: Mapped[str] = mapped_column(String(255))
    input_tokens: Mapped[int] = mapped_column(BigInteger)
    output_tokens: Mapped[int] = mapped_column(BigInteger)
    reasoning_tokens: Mapped[int] = mapped_column(BigInteger)
    cache_read_tokens: Mapped[int] = mapped_column(BigInteger)
    cache_write_tokens: Mapped[int] = mapped_column(BigInteger)
    cost_usd: Mapped[float | None] = mapped_column(Float)
    at: Mapped[datetime] = mapped_column(UTCDateTime())

    __table_args__ = (
        Index("ix_usage_ledger_key_id_at", "key_id", "at"),
        Index("ix_usage_ledger_owner_at", "owner", "at"),
        Index("ix_usage_ledger_conversation_id", "conversation_id"),
        Index("ix_usage_ledger_at", "at"),
    )


KEYS = cast(Table, KeyRow.__table__)
KEY_WINDOWS = cast(Table, KeyWindowRow.__table__)
USAGE_LEDGER = cast(Table, UsageLedgerRow.__table__)
