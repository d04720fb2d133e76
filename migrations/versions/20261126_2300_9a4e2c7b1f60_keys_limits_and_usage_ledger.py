"""Create keys, key_windows and usage_ledger; runs gain key_id, provider and model (app/spend).
Imports alembic, SQLAlchemy.

Revision ID: 9a4e2c7b1f60
Revises: 8d4b6f1a2c37
Create Date: 2026-11-26 23:00:00.000000+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "9a4e2c7b1f60"
down_revision: str | Sequence[str] | None = "8d4b6f1a2c37"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "keys",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("prefix", sa.String(length=16), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("owner", sa.String(length=255), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("requests_per_minute", sa.Integer(), nullable=True),
        sa.Column("max_concurrent_runs", sa.Integer(), nullable=True),
        sa.Column("output_tokens_per_day", sa.BigInteger(), nullable=True),
        sa.Column("budget_usd_per_month", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_keys")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_keys_token_hash")),
    )
    op.create_table(
        "key_windows",
        sa.Column("key_id", sa.String(length=32), nullable=False),
        sa.Column("window", sa.BigInteger(), nullable=False),
        sa.Column("n", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("key_id", "window", name=op.f("pk_key_windows")),
    )
    op.create_table(
        "usage_ledger",
        sa.Column("run_id", sa.String(length=32), nullable=False),
        sa.Column("call", sa.Integer(), nullable=False),
        sa.Column("conversation_id", sa.String(length=32), nullable=False),
        sa.Column("owner", sa.String(length=255), nullable=False),
        sa.Column("key_id", sa.String(length=32), nullable=True),
        sa.Column("provider", sa.String(length=64), nullable=False),
        sa.Column("model", sa.String(length=255), nullable=False),
        sa.Column("input_tokens", sa.BigInteger(), nullable=False),
        sa.Column("output_tokens", sa.BigInteger(), nullable=False),
        sa.Column("reasoning_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cache_read_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cache_write_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cost_usd", sa.Float(), nullable=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("run_id", "call", name=op.f("pk_usage_ledger")),
    )
    op.create_index("ix_usage_ledger_key_id_at", "usage_ledger", ["key_id", "at"], unique=False)
    op.create_index("ix_usage_ledger_owner_at", "usage_ledger", ["owner", "at"], unique=False)
    op.create_index(
        "ix_usage_ledger_conversation_id", "usage_ledger", ["conversation_id"], unique=False
    )
    op.create_index("ix_usage_ledger_at", "usage_ledger", ["at"], unique=False)
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("key_id", sa.String(length=32), nullable=True))
        batch_op.add_column(sa.Column("provider", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("model", sa.String(length=255), nullable=True))
        batch_op.create_index("ix_runs_key_id_status", ["key_id", "status"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_index("ix_runs_key_id_status")
        batch_op.drop_column("model")
        batch_op.drop_column("provider")
        batch_op.drop_column("key_id")
    op.drop_index("ix_usage_ledger_at", table_name="usage_ledger")
    op.drop_index("ix_usage_ledger_conversation_id", table_name="usage_ledger")
    op.drop_index("ix_usage_ledger_owner_at", table_name="usage_ledger")
    op.drop_index("ix_usage_ledger_key_id_at", table_name="usage_ledger")
    op.drop_table("usage_ledger")
    op.drop_table("key_windows")
    op.drop_table("keys")
