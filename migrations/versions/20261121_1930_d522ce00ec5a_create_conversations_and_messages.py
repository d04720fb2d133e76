"""Create conversations and messages: the schema of DESIGN.md §5. Imports alembic, SQLAlchemy.

Revision ID: d522ce00ec5a
Revises:
Create Date: 2026-11-21 19:30:00.911912+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "d522ce00ec5a"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON_DOCUMENT = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
PENDING = "pending_call_id IS NOT NULL"


def upgrade() -> None:
    op.create_table(
        "conversations",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("owner", sa.String(length=255), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("config", JSON_DOCUMENT, nullable=False),
        sa.Column("metadata", JSON_DOCUMENT, nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("message_count", sa.Integer(), nullable=False),
        sa.Column("lease_run_id", sa.String(length=64), nullable=True),
        sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "message_count >= 0", name=op.f("ck_conversations_message_count_not_negative")
        ),
        sa.CheckConstraint("version >= 1", name=op.f("ck_conversations_version_positive")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_conversations")),
    )
    op.create_index(
        "ix_conversations_owner_created_at_id",
        "conversations",
        ["owner", sa.text("created_at DESC"), sa.text("id DESC")],
        unique=False,
    )
    op.create_table(
        "messages",
        sa.Column("conversation_id", sa.String(length=32), nullable=False),
        sa.Column("idx", sa.Integer(), nullable=False),
        sa.Column("data", sa.Text(), nullable=False),
        sa.Column("pending_call_id", sa.String(length=255), nullable=True),
        sa.CheckConstraint("idx >= 0", name=op.f("ck_messages_idx_not_negative")),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["conversations.id"],
            name=op.f("fk_messages_conversation_id_conversations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("conversation_id", "idx", name=op.f("pk_messages")),
    )
    op.create_index(
        "ix_messages_conversation_id_pending_call_id",
        "messages",
        ["conversation_id", "pending_call_id"],
        unique=True,
        sqlite_where=sa.text(PENDING),
        postgresql_where=sa.text(PENDING),
    )


def downgrade() -> None:
    op.drop_index("ix_messages_conversation_id_pending_call_id", table_name="messages")
    op.drop_table("messages")
    op.drop_index("ix_conversations_owner_created_at_id", table_name="conversations")
    op.drop_table("conversations")
