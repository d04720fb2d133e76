"""Create files, file_blobs, file_chunks and file_refs: uploads (docs/files.md). Imports alembic,
SQLAlchemy.

Revision ID: 8e4b6c1f2a70
Revises: 5f2a8c4e1d93
Create Date: 2026-11-26 23:00:32.209739+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "8e4b6c1f2a70"
down_revision: str | Sequence[str] | None = "5f2a8c4e1d93"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "file_blobs",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("owner", sa.String(length=255), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=True),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("store", sa.String(length=8), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_file_blobs")),
        sa.UniqueConstraint("owner", "sha256", name=op.f("uq_file_blobs_owner_sha256")),
    )
    op.create_table(
        "file_chunks",
        sa.Column("blob_id", sa.String(length=32), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(
            ["blob_id"],
            ["file_blobs.id"],
            name=op.f("fk_file_chunks_blob_id_file_blobs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("blob_id", "seq", name=op.f("pk_file_chunks")),
    )
    op.create_table(
        "files",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("owner", sa.String(length=255), nullable=False),
        sa.Column("blob_id", sa.String(length=32), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("media_type", sa.String(length=64), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("purpose", sa.String(length=64), nullable=True),
        sa.Column("width", sa.Integer(), nullable=True),
        sa.Column("height", sa.Integer(), nullable=True),
        sa.Column("from_message", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["blob_id"], ["file_blobs.id"], name=op.f("fk_files_blob_id_file_blobs")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_files")),
    )
    with op.batch_alter_table("files", schema=None) as batch_op:
        batch_op.create_index("ix_files_blob_id", ["blob_id"], unique=False)
        batch_op.create_index(
            "ix_files_owner_created_at_id", ["owner", "created_at", "id"], unique=False
        )

    op.create_table(
        "file_refs",
        sa.Column("file_id", sa.String(length=32), nullable=False),
        sa.Column("conversation_id", sa.String(length=32), nullable=False),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["conversations.id"],
            name=op.f("fk_file_refs_conversation_id_conversations"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["file_id"], ["files.id"], name=op.f("fk_file_refs_file_id_files"), ondelete="RESTRICT"
        ),
        sa.PrimaryKeyConstraint("file_id", "conversation_id", name=op.f("pk_file_refs")),
    )
    with op.batch_alter_table("file_refs", schema=None) as batch_op:
        batch_op.create_index("ix_file_refs_conversation_id", ["conversation_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("file_refs", schema=None) as batch_op:
        batch_op.drop_index("ix_file_refs_conversation_id")

    op.drop_table("file_refs")
    with op.batch_alter_table("files", schema=None) as batch_op:
        batch_op.drop_index("ix_files_owner_created_at_id")
        batch_op.drop_index("ix_files_blob_id")

    op.drop_table("files")
    op.drop_table("file_chunks")
    op.drop_table("file_blobs")
