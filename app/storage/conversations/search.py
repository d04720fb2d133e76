"""Finding an owner's conversations: filters (archived, metadata) and full-text search.

Imports SQLAlchemy and app.storage. Without a query the listing is newest first
(app/storage/paging.py); with one it is ranked by relevance, keyset-paged on ``(score, id)``
where the score is the rank as an integer (exact to compare across pages). The index is the
database's own (migration ``8d4b6f1a2c37``, docs/search.md): PostgreSQL's generated ``tsvector``
columns, SQLite's FTS5 tables. A query is reduced to its words, each matched whole (all of
them), so no text a client sends is read as the index's query syntax.
"""

from __future__ import annotations

import base64
import binascii
import builtins
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import (
    BigInteger,
    Integer,
    String,
    and_,
    bindparam,
    exists,
    func,
    or_,
    select,
    text,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from app.storage.conversations import statements as s
from app.storage.conversations.base import RepositoryBase
from app.storage.conversations.search_sql import SEARCH, SNIPPETS
from app.storage.errors import ConversationNotFound, InvalidCursor
from app.storage.paging import newest_first
from app.storage.pending import pending_ids
from app.storage.records import ConversationRecord, conversation_key, to_record
from app.storage.tables import CONVERSATIONS

MAX_WORDS = 16  # of a query: the rest are left out
_WORD = re.compile(r"\w+")
_SCORED_COLUMNS: dict[str, Any] = {"id": String(), "score": BigInteger(), "best": Integer()}


@dataclass(frozen=True)
class Filters:
    """Which conversations a listing shows: ``archived`` False (default) only those not
    archived, True only archived ones, None both; ``metadata`` keys whose value is exactly
    that string; ``query``: words of its text or title, all of them (None: no search)."""

    archived: bool | None = False
    metadata: Mapping[str, str] = field(default_factory=dict)
    query: str | None = None


@dataclass(frozen=True)
class Found:
    """A conversation a listing shows; with a query, a snippet of the text that matched."""

    record: ConversationRecord
    snippet: str | None = None


def query_words(query: str) -> builtins.list[str]:
    """The words of a query, lowercased, at most MAX_WORDS (no quotes, operators, NULs)."""
    return [word.lower() for word in _WORD.findall(query)][:MAX_WORDS]


class Searching(RepositoryBase):
    """The finding half of ConversationRepository."""

    async def find(
        self, limit: int, cursor: str | None = None, filters: Filters | None = None
    ) -> tuple[builtins.list[Found], str | None]:
        """A page of the owner's conversations that pass ``filters``, and the next cursor:
        newest first, or with ``filters.query`` best match first with snippets."""
        if limit < 1:
            raise ValueError("limit must be at least 1")
        filters = filters or Filters()
        where = and_(s.C.owner == self._owner_only(), *self._conditions(filters))
        if filters.query is None:
            page, next_cursor = await newest_first(
                self._session, CONVERSATIONS, where, limit, cursor
            )
            return [Found(r) for r in await self._records(page)], next_cursor
        words = query_words(filters.query)
        if not words:
            return [], None
        return await self._search(words, where, limit, cursor)

    def _conditions(self, filters: Filters) -> builtins.list[Any]:
        conditions: builtins.list[Any] = []
        if filters.archived is not None:
            conditions.append(s.C.archived.is_(filters.archived))
        postgres = self._session.dialect.name == "postgresql"
        for key, value in filters.metadata.items():
            conditions.append(_metadata_is(key, value, postgres))
        return conditions

    async def _search(
        self, words: builtins.list[str], where: Any, limit: int, cursor: str | None
    ) -> tuple[builtins.list[Found], str | None]:
        dialect = self._session.dialect.name
        terms = " ".join(words) if dialect == "postgresql" else " ".join(f'"{w}"' for w in words)
        scored = text(SEARCH[dialect]).columns(**_SCORED_COLUMNS).subquery("scored")
        query = select(CONVERSATIONS, scored.c.score, scored.c.best).join(
            scored, scored.c.id == s.C.id
        )
        query = query.where(where)
        if cursor is not None:
            score, key = decode_search_cursor(cursor)
            query = query.where(
                or_(scored.c.score < score, and_(scored.c.score == score, s.C.id < key))
            )
        query = query.order_by(scored.c.score.desc(), s.C.id.desc()).limit(limit + 1)
        rows = (await self._session.execute(query, {"terms": terms})).mappings().all()
        last = rows[limit - 1] if len(rows) > limit else None
        rows = rows[:limit]
        snippets = await _snippets(self._session, terms, rows)
        found = [
            Found(record, snippets.get(record.id) or record.title)
            for record in await self._records(rows)
        ]
        next_cursor = encode_search_cursor(last["score"], last["id"]) if last else None
        return found, next_cursor

    async def _records(
        self, rows: Sequence[Mapping[Any, Any]]
    ) -> builtins.list[ConversationRecord]:
        pending = await pending_ids(self._session, [row["id"] for row in rows])
        return [to_record(row, pending.get(row["id"], ())) for row in rows]


def _metadata_is(key: str, value: str, postgres: bool) -> Any:
    """The condition: the metadata's ``key`` holds the string ``value``."""
    if postgres:
        member = s.C.metadata.op("->")(key)
        return and_(func.json_typeof(member) == "string", s.C.metadata.op("->>")(key) == value)
    each = func.json_each(s.C.metadata).table_valued("key", "type", "value")
    return exists().where(each.c.key == key, each.c.type == "text", each.c.value == value)


async def _snippets(
    session: AsyncConnection, terms: str, rows: Sequence[Mapping[Any, Any]]
) -> dict[str, str]:
    """The matching text of each row's best message, around the words found, by id."""
    wanted = {(row["id"], row["best"]) for row in rows if row["best"] is not None}
    if not wanted:
        return {}
    statement = text(SNIPPETS[session.dialect.name]).bindparams(bindparam("ids", expanding=True))
    ids = sorted({key for key, _ in wanted})
    result = await session.execute(statement, {"terms": terms, "ids": ids})
    return {key: snippet for key, idx, snippet in result if (key, idx) in wanted}


def encode_search_cursor(score: int, key: str) -> str:
    """The cursor of the position just after ``(score, key)`` in a ranked listing."""
    raw = json.dumps(["q", int(score), key], separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_search_cursor(cursor: str) -> tuple[int, str]:
    """The ``(score, id)`` a ranked listing's cursor stands for; InvalidCursor if not ours."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        tag, score, key = json.loads(raw)
        if tag != "q" or type(score) is not int or conversation_key(key) != key:
            raise ValueError("not a search cursor")
    except (ValueError, TypeError, RecursionError, binascii.Error, ConversationNotFound):
        raise InvalidCursor(cursor) from None
    return score, key
