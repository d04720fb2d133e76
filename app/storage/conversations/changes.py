"""Changing conversations: create, deltas, a run's start, appends, clear, rewind, delete.

Imports SQLAlchemy, app.domain and app.storage. Each change locks the conversation's row, checks
the lease and the version (a run's start takes the lease in the same write), then writes; each
bumps ``version`` by one and sets ``updated_at``. A StorageError raised means nothing was written.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import delete, select, update

from app.domain import AgentMessage, Message, MessageList
from app.storage.conversations import statements as s
from app.storage.conversations.base import RepositoryBase, ttl
from app.storage.driver import Row
from app.storage.files.refs import add_refs
from app.storage.pending import check_new_pending, completions_for
from app.storage.records import (
    ConversationRecord,
    ToolOutcome,
    check_unique_pending,
    message_rows,
    new_conversation_id,
    referenced_files,
    stored_type,
    to_record,
)
from app.storage.tables import CONVERSATIONS, MESSAGES


class Changing(RepositoryBase):
    """The writing half of ConversationRepository (but for runs' appends and the lease)."""

    async def create(
        self,
        messages: MessageList,
        config: dict[str, Any],
        metadata: dict[str, Any],
    ) -> ConversationRecord:
        """A new conversation at version 1 holding ``messages``."""
        key, now = new_conversation_id(), self._now()
        rows = message_rows(key, 0, messages)
        check_unique_pending(key, rows, stored=set())
        values = {
            "id": key,
            "owner": self._owner_only(),
            "created_at": now,
            "updated_at": now,
            "config": dict(config),
            "metadata": dict(metadata),
            "version": 1,
            "message_count": len(rows),
            **s.NO_LEASE,
        }
        await s.INSERT_CONVERSATION.execute(self._session, values)
        await self._insert_messages(list(rows))
        pending = tuple(r["pending_call_id"] for r in rows if r["pending_call_id"] is not None)
        return to_record(values, pending)

    async def apply_delta(
        self,
        conversation_id: str,
        *,
        messages: Sequence[Message] = (),
        tool_results: Sequence[ToolOutcome] = (),
        config: dict[str, Any] | None = None,
        expected_version: int | None = None,
    ) -> ConversationRecord:
        """Complete pending tool calls, append messages and replace the config, all or nothing.

        ``config`` is the whole new config (None keeps it). Refused while a run holds the lease
        (LeaseHeld; LeaseExpired once it expired), on a stale ``expected_version``
        (VersionConflict), and when a result targets a call that is not pending
        (ToolCallNotPending). An empty delta changes nothing.
        """
        row = await self._lock(conversation_id, expected_version=expected_version)
        changes, rows = await self._write_delta(row, messages, tool_results, config)
        if changes is None:
            return await self._record(row, row)
        return await self._bump(row, rows, **changes)

    async def begin_run(
        self,
        conversation_id: str,
        run_id: str,
        ttl_seconds: float,
        *,
        messages: Sequence[Message] = (),
        tool_results: Sequence[ToolOutcome] = (),
        update_config: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
        expected_version: int | None = None,
    ) -> tuple[ConversationRecord, MessageList]:
        """Apply a delta (as ``apply_delta``; ``update_config`` turns the stored config into
        the new one) and take the lease for ``run_id``, in one locked write; the record and
        every message after it.

        LeaseHeld while another run holds it (LeaseExpired once its lease expired).
        """
        row = await self._lock(conversation_id, expected_version=expected_version)
        config = update_config(dict(row["config"])) if update_config is not None else None
        changes, rows = await self._write_delta(row, messages, tool_results, config)
        lease = {"lease_run_id": run_id, "lease_expires_at": self._now() + ttl(ttl_seconds)}
        if changes is not None:
            record = await self._bump(row, rows, **changes, **lease)
        else:
            await self._set(row["id"], lease)
            record = await self._record({**row, **lease}, row)
        return record, MessageList(await self._load(record.id, 0, record.message_count))

    async def _write_delta(
        self,
        row: Row,
        messages: Sequence[Message],
        tool_results: Sequence[ToolOutcome],
        config: dict[str, Any] | None,
    ) -> tuple[dict[str, Any] | None, builtins.list[dict[str, Any]]]:
        """Write a delta's rows; the conversation's changed columns (None for an empty delta)
        and the new message rows."""
        key = row["id"]
        completions = await completions_for(self._session, key, tool_results)
        rows = message_rows(key, row["message_count"], messages)
        await check_new_pending(self._session, key, rows, completing={c[0] for c in completions})
        if not (rows or completions or config is not None):
            return None, rows
        for _call_id, index, data in completions:
            await self._session.execute(
                update(MESSAGES)
                .where(s.M.conversation_id == key, s.M.idx == index)
                .values(data=data, pending_call_id=None)
            )
        completed = [{"conversation_id": key, "data": data} for _, _, data in completions]
        for _key, file_ids in referenced_files(completed).items():
            await add_refs(self._session, key, file_ids)
        await self._insert_messages(list(rows))
        changes: dict[str, Any] = {"message_count": row["message_count"] + len(rows)}
        if config is not None:
            changes["config"] = dict(config)
        return changes, rows

    async def append_messages(
        self,
        conversation_id: str,
        messages: Sequence[Message],
        *,
        run_id: str | None = None,
        expected_version: int | None = None,
        release_lease: bool = False,
    ) -> ConversationRecord:
        """Append messages at the end, one version bump; costs the same at any length.

        With ``run_id`` (a run persisting what it produced) the run must hold the lease, else
        LeaseLost; without it, like ``apply_delta(messages=...)``: refused while running.
        ``release_lease`` lets go of the run's lease in the same write (its last messages).
        """
        row = await self._lock(conversation_id, expected_version=expected_version, run_id=run_id)
        key = row["id"]
        rows = message_rows(key, row["message_count"], messages)
        await check_new_pending(self._session, key, rows, completing=set())
        if not rows:
            return await self._record(row, row)
        await self._insert_messages(list(rows))
        changes = dict(s.NO_LEASE) if release_lease and run_id is not None else {}
        count = row["message_count"] + len(rows)
        return await self._bump(row, rows, message_count=count, **changes)

    async def clear(
        self, conversation_id: str, expected_version: int | None = None
    ) -> ConversationRecord:
        """Remove every message but the system prompts (AgentMessage), which are renumbered."""
        row = await self._lock(conversation_id, expected_version=expected_version)
        key = row["id"]
        result = await self._session.execute(
            select(s.M.idx, s.M.data).where(s.M.conversation_id == key).order_by(s.M.idx)
        )
        kept = [
            index for index, data in result if stored_type(key, index, data) == AgentMessage.type
        ]
        await self._session.execute(
            delete(MESSAGES).where(s.M.conversation_id == key, s.M.idx.not_in(kept))
        )
        # Ascending order: each row moves down into a slot that is already free.
        for new_index, old_index in enumerate(kept):
            if new_index != old_index:
                await self._session.execute(
                    update(MESSAGES)
                    .where(s.M.conversation_id == key, s.M.idx == old_index)
                    .values(idx=new_index)
                )
        await self._reset_refs(key)
        return await self._bump(row, message_count=len(kept))

    async def rewind(
        self, conversation_id: str, keep: int, expected_version: int | None = None
    ) -> ConversationRecord:
        """Keep the first ``keep`` messages and delete the rest, pending tool calls with them.

        Refused while a run holds the lease (LeaseHeld) and on a stale version; ValueError when
        ``keep`` is not between 0 and the message count.
        """
        row = await self._lock(conversation_id, expected_version=expected_version)
        if not 0 <= keep <= row["message_count"]:
            raise ValueError(f"keep must be between 0 and {row['message_count']}, not {keep}")
        await self._session.execute(
            delete(MESSAGES).where(s.M.conversation_id == row["id"], s.M.idx >= keep)
        )
        await self._reset_refs(row["id"])
        return await self._bump(row, message_count=keep)

    async def delete(self, conversation_id: str, expected_version: int | None = None) -> None:
        """Delete the conversation and its messages; refused (LeaseHeld) while running."""
        row = await self._lock(conversation_id, expected_version=expected_version)
        await self._session.execute(delete(CONVERSATIONS).where(self._mine(row["id"])))
