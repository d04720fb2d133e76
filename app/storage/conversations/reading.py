"""Reading conversations: one, a page of the owner's, their messages whole or by page.

Imports SQLAlchemy, app.domain and app.storage. Reads take no lock.
"""

from __future__ import annotations

import builtins

from app.domain import Message, MessageList
from app.storage.conversations import statements as s
from app.storage.conversations.base import RepositoryBase
from app.storage.errors import ConversationNotFound
from app.storage.paging import newest_first
from app.storage.pending import pending_ids
from app.storage.records import ConversationRecord, conversation_key, to_record
from app.storage.tables import CONVERSATIONS


class Reading(RepositoryBase):
    """The reading half of ConversationRepository."""

    async def get(self, conversation_id: str) -> ConversationRecord:
        """The conversation; ConversationNotFound if unknown, malformed, or not the owner's."""
        key = conversation_key(conversation_id)
        row = (await self._scoped(s.GET, key)).mappings().one_or_none()
        if row is None:
            raise ConversationNotFound(conversation_id)
        return await self._record(row, row)

    async def list(
        self, limit: int, cursor: str | None = None
    ) -> tuple[builtins.list[ConversationRecord], str | None]:
        """A page of the owner's conversations, newest first, and the next page's cursor."""
        if limit < 1:
            raise ValueError("limit must be at least 1")
        page, next_cursor = await newest_first(
            self._session, CONVERSATIONS, s.C.owner == self._owner_only(), limit, cursor
        )
        pending = await pending_ids(self._session, [row["id"] for row in page])
        return [to_record(row, pending.get(row["id"], ())) for row in page], next_cursor

    async def load_messages(self, conversation_id: str) -> MessageList:
        """The conversation's MessageList; StoredDataError naming the index if a row is bad."""
        key, count = await self._count(conversation_id)
        return MessageList(await self._load(key, 0, count))

    async def load_page(
        self, conversation_id: str, start: int, limit: int
    ) -> tuple[builtins.list[Message], int]:
        """Up to ``limit`` messages from index ``start`` on, and the conversation's length."""
        if start < 0 or limit < 1:
            raise ValueError("start must be at least 0 and limit at least 1")
        key, count = await self._count(conversation_id)
        end = min(count, start + limit)
        return await self._load(key, start, end), count

    async def _count(self, conversation_id: str) -> tuple[str, int]:
        key = conversation_key(conversation_id)
        count = (await self._scoped(s.COUNT, key)).scalar()
        if count is None:
            raise ConversationNotFound(conversation_id)
        return key, count
