"""The webhook tables: endpoints registered per owner, and the outbox of their deliveries.

Imports SQLAlchemy and app.storage.tables (the same ``Base``). A delivery row is one event for
one endpoint, written in the transaction that made the event (a run's ending), so it exists if
and only if that committed; the delivering process claims it, sends it and records the attempt.
"""

from __future__ import annotations

from datetime import datetime
from typing import cast

from sqlalchemy import (
    JSON,
    Boolean,
    CheckConstraint,
    ForeignKey,
    Index,
    Integer,
    String,
    Table,
    Text,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from app.storage.tables import Base, UTCDateTime


class WebhookEndpointRow(Base):
    """A URL an owner wants events sent to, the events it wants and the secret that signs them."""

    __tablename__ = "webhook_endpoints"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    owner: Mapped[str] = mapped_column(String(255))
    url: Mapped[str] = mapped_column(Text)
    events: Mapped[list[str]] = mapped_column(JSON())
    secret: Mapped[str] = mapped_column(String(255))
    enabled: Mapped[bool] = mapped_column(Boolean)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())

    __table_args__ = (
        # An owner's endpoints newest first; the outbox's look-up of an owner's endpoints.
        Index("ix_webhook_endpoints_owner_created_at_id", "owner", "created_at", "id"),
    )


class WebhookDeliveryRow(Base):
    """One event for one endpoint: pending until sent (``delivered``) or given up (``failed``).

    ``seq`` orders the outbox: an endpoint gets a conversation's events in ``seq`` order.
    ``message_id`` is the ``webhook-id`` every attempt (and every endpoint) of the event carries.
    """

    __tablename__ = "webhook_deliveries"

    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    id: Mapped[str] = mapped_column(String(32), unique=True)
    endpoint_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("webhook_endpoints.id", ondelete="CASCADE")
    )
    message_id: Mapped[str] = mapped_column(String(64))
    event: Mapped[str] = mapped_column(String(64))
    conversation_id: Mapped[str | None] = mapped_column(String(32))
    run_id: Mapped[str | None] = mapped_column(String(32))
    payload: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(16))
    attempts: Mapped[int] = mapped_column(Integer)
    next_attempt_at: Mapped[datetime] = mapped_column(UTCDateTime())
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    claimed_until: Mapped[datetime | None] = mapped_column(UTCDateTime())
    claim_token: Mapped[str | None] = mapped_column(String(32))
    last_status_code: Mapped[int | None] = mapped_column(Integer)
    last_error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    delivered_at: Mapped[datetime | None] = mapped_column(UTCDateTime())

    __table_args__ = (
        CheckConstraint("status IN ('pending', 'delivered', 'failed')", name="status_known"),
        CheckConstraint("attempts >= 0", name="attempts_not_negative"),
        # The claim: pending rows by due time.
        Index(
            "ix_webhook_deliveries_next_attempt_at",
            "next_attempt_at",
            sqlite_where=text("status = 'pending'"),
            postgresql_where=text("status = 'pending'"),
        ),
        # The order: an endpoint's earlier pending events of the same conversation.
        Index(
            "ix_webhook_deliveries_endpoint_id_conversation_id_seq",
            "endpoint_id",
            "conversation_id",
            "seq",
        ),
        # An endpoint's deliveries newest first (the listing).
        Index("ix_webhook_deliveries_endpoint_id_created_at_id", "endpoint_id", "created_at", "id"),
    )


WEBHOOK_ENDPOINTS = cast(Table, WebhookEndpointRow.__table__)
WEBHOOK_DELIVERIES = cast(Table, WebhookDeliveryRow.__table__)
