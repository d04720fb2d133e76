"""The search index's objects that the SQLAlchemy models leave out (docs/search.md).

Imports nothing. The migration ``8d4b6f1a2c37`` makes them: on PostgreSQL generated ``tsvector``
columns and their GIN indexes, on SQLite FTS5 tables (and the shadow tables FTS5 makes for each)
with triggers. The database keeps them current; migrations/env.py keeps them out of
autogenerate's comparison with the models, and the tests that list tables leave them out.
"""

from __future__ import annotations

UNMODELLED_COLUMNS = frozenset({("messages", "search"), ("conversations", "title_search")})
UNMODELLED_INDEXES = frozenset({"ix_messages_search", "ix_conversations_title_search"})
FTS_TABLES = ("message_fts", "title_fts")


def is_search_table(name: str) -> bool:
    """Whether ``name`` is an FTS5 table of the index or one of its shadow tables."""
    return any(name == table or name.startswith(f"{table}_") for table in FTS_TABLES)


def is_unmodelled(name: str | None, type_: str, table: str | None) -> bool:
    """Whether a reflected object (as Alembic's ``include_object`` names it) is the index's."""
    if name is None:
        return False
    if type_ == "table":
        return is_search_table(name)
    if type_ == "column":
        return (table or "", name) in UNMODELLED_COLUMNS
    if type_ == "index":
        return name in UNMODELLED_INDEXES
    return False
