"""Keep a conversation's config and metadata as sent: json, not jsonb, on PostgreSQL.

Imports alembic, SQLAlchemy. jsonb reorders keys and rewrites numbers (1e16 comes back as an
integer, -0.0 as 0.0); json keeps the text. Rows already stored keep the values jsonb gave them.
SQLite stores both as JSON text already: nothing changes there.

Revision ID: 5f2a8c4e1d93
Revises: 3c1d9e7a5b20
Create Date: 2026-11-25 17:00:00.000000+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "5f2a8c4e1d93"
down_revision: str | Sequence[str] | None = "3c1d9e7a5b20"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COLUMNS = ("config", "metadata")


def _retype(old: sa.types.TypeEngine[object], new: sa.types.TypeEngine[object], cast: str) -> None:
    if op.get_context().dialect.name != "postgresql":
        return
    for column in COLUMNS:
        op.alter_column(
            "conversations",
            column,
            existing_type=old,
            type_=new,
            existing_nullable=False,
            postgresql_using=f'"{column}"::{cast}',
        )


def upgrade() -> None:
    _retype(postgresql.JSONB(astext_type=sa.Text()), sa.JSON(), "json")


def downgrade() -> None:
    _retype(sa.JSON(), postgresql.JSONB(astext_type=sa.Text()), "jsonb")
