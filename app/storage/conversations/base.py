"""What every part of ConversationRepository shares: its session and owner, the row lock and
its checks, the version bump, records, and reading messages by index.

Imports SQLAlchemy, app.domain and app.storage. It flushes and never commits.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import and_, select
from sqlalchemy.ext.asyncio import AsyncConnection

from app.domain import Message
from app.storage.conversations import statements as s
from app.storage.driver import Row
from app.storage.errors import (
    ConversationNotFound,
    LeaseExpired,
    LeaseHeld,
    LeaseLost,
    StoredDataError,
    VersionConflict,
)
from app.storage.files.refs import add_refs, set_refs
from app.storage.pending import pending_ids
from app.storage.records import (
    ConversationRecord,
    conversation_key,
    load_message,
    referenced_files,
    to_record,
    utcnow,
)


class RepositoryBase:
    """One AsyncConnection, which the caller commits, and one owner (None: the system)."""

    def __init__(
        self,
        session: AsyncConnection,
        *,
        owner: str | None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self._session = session
        self._owner = owner
        self._clock = clock

    @property
    def session(self) -> AsyncConnection:
        """The session this repository works in (for other repositories of the same use case)."""
        return self._session

    @property
    def owner(self) -> str | None:
        """Whose conversations this repository sees; None: everybody's (the system)."""
        return self._owner

    def _mine(self, key: str) -> Any:
        """The WHERE clause of one conversation of this repository's owner."""
        if self._owner is None:
            return s.C.id == key
        return and_(s.C.id == key, s.C.owner == self._owner)

    def _scoped(self, statements: s.Scoped, key: str, **params: Any) -> Any:
        """Execute the one of a scoped pair that fits this repository, for conversation ``key``."""
        if self._owner is None:
            return self._session.execute(statements[0], {"key": key, **params})
        return self._session.execute(statements[1], {"key": key, "of_owner": self._owner, **params})

    def _owner_only(self) -> str:
        if self._owner is None:
            raise ValueError("this needs a repository made for an owner")
        return self._owner

    def _now(self) -> datetime:
        return self._clock().astimezone(UTC)

    async def _locked_row(self, conversation_id: str) -> Row:
        key = conversation_key(conversation_id)
        rows: builtins.list[dict[str, Any]]
        if self._owner is None:
            rows = await s.LOCK[0].rows(self._session, {"key": key})
        else:
            rows = await s.LOCK[1].rows(self._session, {"key": key, "of_owner": self._owner})
        if not rows:
            raise ConversationNotFound(conversation_id)
        return rows[0]

    async def _lock(
        self,
        conversation_id: str,
        *,
        expected_version: int | None,
        run_id: str | None = None,
    ) -> Row:
        """Lock the row, check the lease and the version.

        With ``run_id`` that run must hold the lease (LeaseLost). Without, no run may: LeaseHeld,
        or LeaseExpired when the holder's lease expired (the use case recovers it and retries).
        """
        row = await self._locked_row(conversation_id)
        holder = row["lease_run_id"]
        if run_id is not None:
            if holder != run_id:
                raise LeaseLost(row["id"], run_id)
        elif holder is not None:
            self._refuse_holder(row)
        if expected_version is not None and row["version"] != expected_version:
            raise VersionConflict(row["id"], row["version"], expected_version)
        return row

    def _refuse_holder(self, row: Row) -> None:
        """LeaseHeld for the run holding ``row``'s lease; LeaseExpired once that lease expired."""
        if row["lease_expires_at"] > self._now():
            raise LeaseHeld(row["id"], row["lease_run_id"])
        raise LeaseExpired(row["id"], row["lease_run_id"])

    async def _set(self, key: str, values: Mapping[str, Any]) -> None:
        """Set these columns of conversation ``key``, as they are (no version bump)."""
        await s.change(tuple(values), False).execute(self._session, {"key": key, **s.new(values)})

    async def _bump(
        self, row: Row, added: Sequence[dict[str, Any]] = (), **values: Any
    ) -> ConversationRecord:
        """Change the locked ``row``, one version up; ``added``: the message rows just added."""
        values = {"version": row["version"] + 1, "updated_at": self._now(), **values}
        statement = s.change(tuple(values), True)
        changed = await statement.rows(self._session, {"key": row["id"], **s.new(values)})
        return await self._record(changed[0], row, added)

    async def _record(
        self,
        row: Mapping[Any, Any],
        read: Mapping[Any, Any] | None = None,
        added: Sequence[dict[str, Any]] = (),
    ) -> ConversationRecord:
        """``row`` as a record. ``read``: the row as read (with ``has_pending``) before the
        message rows ``added`` were written; when it had no pending call, the pending ids are
        those of ``added`` and need no query."""
        if read is not None and not read[s.HAS_PENDING]:
            pending = tuple(r["pending_call_id"] for r in added if r["pending_call_id"])
            return to_record(row, pending)
        found = await pending_ids(self._session, [row["id"]])
        return to_record(row, found.get(row["id"], ()))

    async def _insert_messages(self, rows: builtins.list[dict[str, Any]]) -> None:
        """Insert ``rows`` (and empty the list), recording the files their messages refer to
        (``file_refs``: a file stays while a conversation refers to it, docs/files.md)."""
        if rows:
            await s.INSERT_MESSAGES.execute(self._session, rows)
            for key, file_ids in referenced_files(rows).items():
                await add_refs(self._session, key, file_ids)
            rows.clear()

    async def _reset_refs(self, key: str) -> None:
        """Make ``file_refs`` name exactly the files the conversation's messages still refer
        to (after a rewind or a clear removed some): a file no message names can be deleted,
        and one Parley made from a message is swept."""
        query = select(s.M.conversation_id, s.M.data).where(
            s.M.conversation_id == key, s.M.data.contains('"attachments"')
        )
        rows = [{"conversation_id": k, "data": d} for k, d in await self._session.execute(query)]
        await set_refs(self._session, key, referenced_files(rows).get(key, []))

    async def _load(self, key: str, start: int, end: int) -> builtins.list[Message]:
        """Messages ``start`` to ``end`` (exclusive) of a conversation known to be visible."""
        if start >= end:
            return []
        rows = await s.LOAD.rows(self._session, {"key": key, "start": start, "end": end})
        messages: builtins.list[Message] = []
        for expected, row in enumerate(rows, start):
            index, data = row["idx"], row["data"]
            if index != expected:
                raise StoredDataError(key, expected, f"missing (next stored index is {index})")
            messages.append(load_message(key, index, data))
        if len(messages) != end - start:
            raise StoredDataError(key, start + len(messages), f"missing (expected {end} messages)")
        return messages


def ttl(ttl_seconds: float) -> timedelta:
    """A lease's term; ValueError unless positive."""
    if ttl_seconds <= 0:
        raise ValueError("a lease needs a positive ttl_seconds")
    return timedelta(seconds=ttl_seconds)
