"""What runs store, many at once: their messages and the release of their leases.

Imports SQLAlchemy, app.domain and app.storage. The event writer's flush stores every run's
messages in a few statements however many runs there are; each append is checked on its own.
"""

from __future__ import annotations

import builtins
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.domain import Message
from app.storage.conversations import statements as s
from app.storage.conversations.base import RepositoryBase
from app.storage.errors import ConversationNotFound, LeaseLost, StorageError
from app.storage.pending import check_new_pending, pending_ids
from app.storage.records import ConversationRecord, conversation_key, message_rows, to_record

# What runs change of a conversation (``append_for_runs``: many in one statement).
_RUN_COLUMNS = ("version", "updated_at", "message_count", "lease_run_id", "lease_expires_at")
Outcome = ConversationRecord | StorageError


@dataclass(frozen=True)
class RunAppend:
    """What a run stores: its messages, at the end of its conversation; ``release_lease``
    lets go of the run's lease in the same write (its ending)."""

    conversation_id: str
    run_id: str
    messages: Sequence[Message] = ()
    release_lease: bool = False


@dataclass
class _Batch:
    """The locked rows of a batch of appends (fresh dicts, changed as appends land), their
    pending tool calls, and what is still to write."""

    rows: dict[str, dict[str, Any]]
    pending: defaultdict[str, builtins.list[str]]
    now: datetime
    unstored: builtins.list[dict[str, Any]]
    touched: set[str]


class RunAppending(RepositoryBase):
    """The runs' half of ConversationRepository."""

    async def append_for_runs(self, appends: Sequence[RunAppend]) -> builtins.list[Outcome]:
        """Store what many runs produced, in a few statements however many there are.

        Each append is ``append_messages(..., run_id=..., release_lease=...)`` on its own (in
        order; several may touch one conversation), except that the lease is let go even when
        it brings no message. Its outcome is the record after it, or the StorageError that
        kept it from being written (LeaseLost, ConversationNotFound, DuplicateToolCall).
        """
        batch = await self._lock_batch(appends)
        outcomes = [await self._land(batch, append) for append in appends]
        await self._insert_messages(batch.unstored)
        if batch.touched:
            changed = [
                {"key": k, **{f"new_{c}": batch.rows[k][c] for c in _RUN_COLUMNS}}
                for k in batch.touched
            ]
            await s.change(_RUN_COLUMNS, False).execute(self._session, changed)
        return outcomes

    async def _lock_batch(self, appends: Sequence[RunAppend]) -> _Batch:
        """Lock the appends' conversations (this owner's) and read their pending calls."""
        keys = sorted({conversation_key(a.conversation_id) for a in appends})
        found: builtins.list[dict[str, Any]]
        if len(keys) == 1:  # a flush of one run: the one-row lock, on the driver's cursor
            found = await s.LOCK[0].rows(self._session, {"key": keys[0]})
        else:
            result = await self._session.execute(s.LOCK_MANY, {"keys": keys})
            found = [dict(row) for row in result.mappings()]
        rows = {row["id"]: row for row in found}
        if self._owner is not None:
            rows = {key: row for key, row in rows.items() if row["owner"] == self._owner}
        pending: defaultdict[str, builtins.list[str]] = defaultdict(list)
        with_pending = [key for key, row in rows.items() if row[s.HAS_PENDING]]
        for key, ids in (await pending_ids(self._session, with_pending)).items():
            pending[key].extend(ids)
        return _Batch(rows, pending, self._now(), [], set())

    async def _land(self, batch: _Batch, append: RunAppend) -> Outcome:
        """One append, on the batch's rows: its outcome."""
        key = conversation_key(append.conversation_id)
        row = batch.rows.get(key)
        if row is None:
            return ConversationNotFound(append.conversation_id)
        if row["lease_run_id"] != append.run_id:
            return LeaseLost(key, append.run_id)
        added = message_rows(key, row["message_count"], append.messages)
        calls = [r["pending_call_id"] for r in added if r["pending_call_id"]]
        if calls:  # rare (client tool calls): check against what is stored so far
            await self._insert_messages(batch.unstored)
            try:
                await check_new_pending(self._session, key, added, completing=set())
            except StorageError as exc:
                return exc
        if added:
            batch.unstored.extend(added)
            batch.pending[key].extend(calls)
            row.update(
                version=row["version"] + 1,
                updated_at=batch.now,
                message_count=row["message_count"] + len(added),
            )
        if append.release_lease:
            row.update(s.NO_LEASE)
        batch.touched.add(key)
        return to_record(row, tuple(batch.pending[key]))
