"""Titles, archiving and full-text search (docs/search.md). Imports alembic, SQLAlchemy.

``conversations`` gains ``title`` and ``archived``. The search index is kept current by the
database itself, on every write path (create, deltas, runs' group commits, fork, import, clear,
rewind, delete):

- PostgreSQL: generated ``tsvector`` columns (``messages.search`` over a text message's text
  as ``parley_search_text(data)`` finds it,
  ``conversations.title_search`` over the title), each with a GIN index.
- SQLite: FTS5 tables over the same text (``message_fts`` with the view ``message_search_text``
  as its external content, ``title_fts`` over ``conversations``), kept current by triggers.

These objects are not in the SQLAlchemy models: app/storage/search_schema.py names them, and
migrations/env.py leaves them out of autogenerate's comparison.

Revision ID: 8d4b6f1a2c37
Revises: 8e4b6c1f2a70
Create Date: 2026-11-26 23:00:00.000000+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "8d4b6f1a2c37"
down_revision: str | Sequence[str] | None = "8e4b6c1f2a70"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The text a message is found by: a TextMessage's (user or assistant), nothing else; none for
# a row that is not JSON (a damaged row is reported when read, never refused when written).
PG_SEARCH_TEXT_FUNCTION = """
CREATE FUNCTION parley_search_text(data text) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
BEGIN
    IF (data::json ->> 'type') = 'TextMessage' THEN
        RETURN coalesce(data::json ->> 'text', '');
    END IF;
    RETURN '';
EXCEPTION WHEN others THEN
    RETURN '';
END
$$
"""
PG_MESSAGE_TEXT = "coalesce(parley_search_text(data), '')"
SQLITE_MESSAGE_TEXT = (
    "CASE WHEN NOT json_valid({row}.data) THEN NULL "
    "WHEN json_extract({row}.data, '$.type') = 'TextMessage' "
    "THEN json_extract({row}.data, '$.text') END"
)
TOKENIZE = "unicode61 remove_diacritics 0"  # as PostgreSQL's 'simple': case-folded words

POSTGRES_UP = (
    PG_SEARCH_TEXT_FUNCTION,
    "ALTER TABLE messages ADD COLUMN search tsvector GENERATED ALWAYS AS "
    f"(to_tsvector('simple'::regconfig, {PG_MESSAGE_TEXT})) STORED",
    "CREATE INDEX ix_messages_search ON messages USING gin (search)",
    "ALTER TABLE conversations ADD COLUMN title_search tsvector GENERATED ALWAYS AS "
    "(to_tsvector('simple'::regconfig, coalesce(title, ''))) STORED",
    "CREATE INDEX ix_conversations_title_search ON conversations USING gin (title_search)",
)
POSTGRES_DOWN = (
    "DROP INDEX ix_conversations_title_search",
    "ALTER TABLE conversations DROP COLUMN title_search",
    "DROP INDEX ix_messages_search",
    "ALTER TABLE messages DROP COLUMN search",
    "DROP FUNCTION parley_search_text(text)",
)

SQLITE_UP = (
    "CREATE VIEW message_search_text AS SELECT messages.rowid AS id, "
    f"{SQLITE_MESSAGE_TEXT.format(row='messages')} AS text FROM messages",
    "CREATE VIRTUAL TABLE message_fts USING fts5(text, content='message_search_text', "
    f"content_rowid='id', tokenize='{TOKENIZE}')",
    "CREATE TRIGGER message_fts_insert AFTER INSERT ON messages BEGIN "
    "INSERT INTO message_fts(rowid, text) VALUES "
    f"(new.rowid, {SQLITE_MESSAGE_TEXT.format(row='new')}); END",
    "CREATE TRIGGER message_fts_delete AFTER DELETE ON messages BEGIN "
    "INSERT INTO message_fts(message_fts, rowid, text) VALUES "
    f"('delete', old.rowid, {SQLITE_MESSAGE_TEXT.format(row='old')}); END",
    "CREATE TRIGGER message_fts_update AFTER UPDATE OF data ON messages BEGIN "
    "INSERT INTO message_fts(message_fts, rowid, text) VALUES "
    f"('delete', old.rowid, {SQLITE_MESSAGE_TEXT.format(row='old')}); "
    "INSERT INTO message_fts(rowid, text) VALUES "
    f"(new.rowid, {SQLITE_MESSAGE_TEXT.format(row='new')}); END",
    "INSERT INTO message_fts(message_fts) VALUES ('rebuild')",
    "CREATE VIRTUAL TABLE title_fts USING fts5(title, content='conversations', "
    f"content_rowid='rowid', tokenize='{TOKENIZE}')",
    "CREATE TRIGGER title_fts_insert AFTER INSERT ON conversations BEGIN "
    "INSERT INTO title_fts(rowid, title) VALUES (new.rowid, new.title); END",
    "CREATE TRIGGER title_fts_delete AFTER DELETE ON conversations BEGIN "
    "INSERT INTO title_fts(title_fts, rowid, title) VALUES ('delete', old.rowid, old.title); END",
    "CREATE TRIGGER title_fts_update AFTER UPDATE OF title ON conversations BEGIN "
    "INSERT INTO title_fts(title_fts, rowid, title) VALUES ('delete', old.rowid, old.title); "
    "INSERT INTO title_fts(rowid, title) VALUES (new.rowid, new.title); END",
    "INSERT INTO title_fts(title_fts) VALUES ('rebuild')",
)
SQLITE_DOWN = (
    "DROP TRIGGER title_fts_update",
    "DROP TRIGGER title_fts_delete",
    "DROP TRIGGER title_fts_insert",
    "DROP TABLE title_fts",
    "DROP TRIGGER message_fts_update",
    "DROP TRIGGER message_fts_delete",
    "DROP TRIGGER message_fts_insert",
    "DROP TABLE message_fts",
    "DROP VIEW message_search_text",
)


def _run(statements: Sequence[str]) -> None:
    for statement in statements:
        op.execute(statement)


def upgrade() -> None:
    op.add_column("conversations", sa.Column("title", sa.String(length=200), nullable=True))
    op.add_column(
        "conversations",
        sa.Column("archived", sa.Boolean(), server_default=sa.text("false"), nullable=False),
    )
    postgres = op.get_context().dialect.name == "postgresql"
    _run(POSTGRES_UP if postgres else SQLITE_UP)


def downgrade() -> None:
    postgres = op.get_context().dialect.name == "postgresql"
    _run(POSTGRES_DOWN if postgres else SQLITE_DOWN)
    with op.batch_alter_table("conversations") as batch:
        batch.drop_column("archived")
        batch.drop_column("title")
