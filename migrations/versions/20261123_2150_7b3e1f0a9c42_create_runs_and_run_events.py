"""Create runs and run_events: durable runs (DESIGN.md §4a). Imports alembic, SQLAlchemy.

Revision ID: 7b3e1f0a9c42
Revises: d522ce00ec5a
Create Date: 2026-11-23 21:50:00.000000+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "7b3e1f0a9c42"
down_revision: str | Sequence[str] | None = "d522ce00ec5a"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON_DOCUMENT = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("conversation_id", sa.String(length=32), nullable=False),
        sa.Column("owner", sa.String(length=255), nullable=False),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("on_disconnect", sa.String(length=16), nullable=False),
        sa.Column("cancel_requested", sa.Boolean(), nullable=False),
        sa.Column("error_code", sa.String(length=64), nullable=True),
        sa.Column("usage", JSON_DOCUMENT, nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["conversations.id"],
            name=op.f("fk_runs_conversation_id_conversations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_runs")),
    )
    op.create_index(
        "ix_runs_conversation_id_created_at_id",
        "runs",
        ["conversation_id", "created_at", "id"],
        unique=False,
    )
    op.create_index("ix_runs_finished_at", "runs", ["finished_at"], unique=False)
    op.create_table(
        "run_events",
        sa.Column("run_id", sa.String(length=32), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=32), nullable=False),
        sa.Column("data", sa.Text(), nullable=False),
        sa.CheckConstraint("count >= 1", name=op.f("ck_run_events_count_positive")),
        sa.CheckConstraint("seq >= 1", name=op.f("ck_run_events_seq_positive")),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_run_events_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("run_id", "seq", name=op.f("pk_run_events")),
    )


def downgrade() -> None:
    op.drop_table("run_events")
    op.drop_index("ix_runs_finished_at", table_name="runs")
    op.drop_index("ix_runs_conversation_id_created_at_id", table_name="runs")
    op.drop_table("runs")
