"""ConversationRepository: conversations and their messages in SQL, for the API and the runs.

Imports SQLAlchemy, app.domain and app.storage. It flushes and never commits: a use case commits
once. Writers lock the conversation row first, so concurrent writers queue, in any process. A
repository is made for one owner and every query it runs is scoped to that owner's conversations;
``owner=None`` is the system's unscoped view, for code that acts for no caller.
"""

from __future__ import annotations

import builtins
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any

from sqlalchemy import and_, bindparam, delete, exists, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from app.domain import AgentMessage, Message, MessageList
from app.storage.driver import Direct, Row
from app.storage.errors import (
    ConversationNotFound,
    LeaseHeld,
    LeaseLost,
    StorageError,
    StoredDataError,
    VersionConflict,
)
from app.storage.paging import newest_first
from app.storage.pending import check_new_pending, completions_for, pending_ids
from app.storage.records import (
    ConversationRecord,
    ToolOutcome,
    check_unique_pending,
    conversation_key,
    load_message,
    message_rows,
    new_conversation_id,
    stored_type,
    to_record,
    utcnow,
)
from app.storage.tables import CONVERSATIONS, MESSAGES

_CONVERSATIONS = CONVERSATIONS
_MESSAGES = MESSAGES
_C = CONVERSATIONS.c
_M = MESSAGES.c
_NO_LEASE: dict[str, Any] = {"lease_run_id": None, "lease_expires_at": None}
_HAS_PENDING = "has_pending"
# A conversation's row with whether it has pending tool calls: most have none, and then
# reading it needs no second query for their ids.
_ROW = select(
    _CONVERSATIONS,
    exists()
    .where(_M.conversation_id == _C.id, _M.pending_call_id.is_not(None))
    .label(_HAS_PENDING),
)

# The statements of the hot paths are built once, with bound parameters: SQLAlchemy then
# reuses their compiled form without walking them again (building a statement per call
# costs more than SQLite takes to run it). Each scoped pair is (system, one owner's).
_KEY: Any = bindparam("key")
_SCOPES = (_C.id == _KEY, and_(_C.id == _KEY, _C.owner == bindparam("of_owner")))
Scoped = tuple[Any, Any]


def _scoped(build: Callable[[Any], Any]) -> Scoped:
    return build(_SCOPES[0]), build(_SCOPES[1])


_GET = _scoped(lambda scope: _ROW.where(scope))
# The statements of a run's start and ending go to the driver's cursor (app/storage/driver/direct.py).
_LOCK = _scoped(lambda scope: Direct(_ROW.where(scope).with_for_update(of=_CONVERSATIONS)))
_COUNT = _scoped(lambda scope: select(_C.message_count).where(scope))
_RELEASE = _scoped(
    lambda scope: (
        update(_CONVERSATIONS).where(scope, _C.lease_run_id == bindparam("run")).values(_NO_LEASE)
    )
)
_RENEW = _scoped(
    lambda scope: (
        update(_CONVERSATIONS)
        .where(scope, _C.lease_run_id == bindparam("run"))
        .values(lease_expires_at=bindparam("expires"))
    )
)
_LOAD = Direct(
    select(_M.idx, _M.data)
    .where(_M.conversation_id == _KEY, _M.idx >= bindparam("start"), _M.idx < bindparam("end"))
    .order_by(_M.idx)
)
_INSERT_CONVERSATION = Direct(insert(_CONVERSATIONS))
_INSERT_MESSAGES = Direct(insert(_MESSAGES))
_LOCK_MANY = _ROW.where(_C.id.in_(bindparam("keys", expanding=True))).with_for_update(
    of=_CONVERSATIONS
)
_HOLDERS = (
    select(_C.id, _C.owner, _C.lease_run_id)
    .where(_C.id.in_(bindparam("keys", expanding=True)))
    .with_for_update()
)


@cache
def _change(columns: tuple[str, ...], returning: bool) -> Direct:
    """The UPDATE of a conversation (by ``key``) setting ``columns`` to ``new_<column>``."""
    statement = (
        update(_CONVERSATIONS)
        .where(_C.id == _KEY)
        .values({column: bindparam(f"new_{column}") for column in columns})
    )
    return Direct(statement.returning(*_CONVERSATIONS.c) if returning else statement)


def _new(values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` as the parameters of ``_change``."""
    return {f"new_{column}": value for column, value in values.items()}


# What runs change of a conversation (``append_for_runs``: many in one statement).
_RUN_COLUMNS = ("version", "updated_at", "message_count", "lease_run_id", "lease_expires_at")


@dataclass(frozen=True)
class RunAppend:
    """What a run stores: its messages, at the end of its conversation; ``release_lease``
    lets go of the run's lease in the same write (its ending)."""

    conversation_id: str
    run_id: str
    messages: Sequence[Message] = ()
    release_lease: bool = False


AbandonedRunHandler = Callable[["ConversationRepository", str, str], Awaitable[bool]]
"""Called as ``handler(repository, conversation_id, run_id)`` when a writer meets the expired
lease of ``run_id``: its process died, or stopped for longer than the lease. It may store what
that run left (with ``run_id`` it may still append and release) and returns True, then the lease
is released; or it knows the run is alive after all (its own process had stalled), renews its
lease and returns False, then the run holds the conversation as before."""


class ConversationRepository:
    """Reads and changes conversations through one AsyncConnection, which the caller commits.

    Every change takes the conversation's row lock (``SELECT ... FOR UPDATE`` on PostgreSQL, the
    database write lock that ``Database`` sessions take up front on SQLite), checks, then writes;
    each change bumps ``version`` by one and sets ``updated_at``. When a StorageError is raised
    nothing has been written. Lease operations change neither ``version`` nor ``updated_at``.
    """

    def __init__(
        self,
        session: AsyncConnection,
        *,
        owner: str | None,
        clock: Callable[[], datetime] = utcnow,
        on_abandoned_run: AbandonedRunHandler | None = None,
    ) -> None:
        self._session = session
        self._owner = owner
        self._clock = clock
        self._on_abandoned_run = on_abandoned_run

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
            return _C.id == key
        return and_(_C.id == key, _C.owner == self._owner)

    def _scoped(self, statements: Scoped, key: str, **params: Any) -> Any:
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

    # --- reading ------------------------------------------------------------------------------

    async def get(self, conversation_id: str) -> ConversationRecord:
        """The conversation; ConversationNotFound if unknown, malformed, or not the owner's."""
        key = conversation_key(conversation_id)
        row = (await self._scoped(_GET, key)).mappings().one_or_none()
        if row is None:
            raise ConversationNotFound(conversation_id)
        return await self._record(row, row)

    async def list(
        self, limit: int, cursor: str | None = None
    ) -> tuple[list[ConversationRecord], str | None]:
        """A page of the owner's conversations, newest first, and the next page's cursor."""
        if limit < 1:
            raise ValueError("limit must be at least 1")
        page, next_cursor = await newest_first(
            self._session, _CONVERSATIONS, _C.owner == self._owner_only(), limit, cursor
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
        count = (await self._scoped(_COUNT, key)).scalar()
        if count is None:
            raise ConversationNotFound(conversation_id)
        return key, count

    async def _load(self, key: str, start: int, end: int) -> builtins.list[Message]:
        """Messages ``start`` to ``end`` (exclusive) of a conversation known to be visible."""
        if start >= end:
            return []
        rows = await _LOAD.rows(self._session, {"key": key, "start": start, "end": end})
        messages: builtins.list[Message] = []
        for expected, row in enumerate(rows, start):
            index, data = row["idx"], row["data"]
            if index != expected:
                raise StoredDataError(key, expected, f"missing (next stored index is {index})")
            messages.append(load_message(key, index, data))
        if len(messages) != end - start:
            raise StoredDataError(key, start + len(messages), f"missing (expected {end} messages)")
        return messages

    # --- changing -----------------------------------------------------------------------------

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
            **_NO_LEASE,
        }
        await _INSERT_CONVERSATION.execute(self._session, values)
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
        (LeaseHeld), on a stale ``expected_version`` (VersionConflict), and when a result targets
        a call that is not pending (ToolCallNotPending). An empty delta changes nothing.
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

        LeaseHeld while another run holds it.
        """
        row = await self._lock(conversation_id, expected_version=expected_version)
        config = update_config(dict(row["config"])) if update_config is not None else None
        changes, rows = await self._write_delta(row, messages, tool_results, config)
        lease = {"lease_run_id": run_id, "lease_expires_at": self._now() + _ttl(ttl_seconds)}
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
                update(_MESSAGES)
                .where(_M.conversation_id == key, _M.idx == index)
                .values(data=data, pending_call_id=None)
            )
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
        changes = dict(_NO_LEASE) if release_lease and run_id is not None else {}
        count = row["message_count"] + len(rows)
        return await self._bump(row, rows, message_count=count, **changes)

    async def lease_holders(self, conversation_ids: Iterable[str]) -> dict[str, str | None]:
        """Lock these conversations' rows, in one statement; which run holds each one's lease
        (None: no run), by id. Only a holder writes to its conversation and its run's log."""
        keys = sorted({conversation_key(c) for c in conversation_ids})
        result = await self._session.execute(_HOLDERS, {"keys": keys})
        return {
            key: holder
            for key, owner, holder in result
            if self._owner is None or owner == self._owner
        }

    async def append_for_runs(
        self, appends: Sequence[RunAppend]
    ) -> builtins.list[ConversationRecord | StorageError]:
        """Store what many runs produced, in a few statements however many there are.

        Each append is ``append_messages(..., run_id=..., release_lease=...)`` on its own (in
        order; several may touch one conversation), except that the lease is let go even when
        it brings no message. Its outcome is the record after it, or the StorageError that
        kept it from being written (LeaseLost, ConversationNotFound, DuplicateToolCall).
        """
        keys = sorted({conversation_key(a.conversation_id) for a in appends})
        found: builtins.list[dict[str, Any]]  # fresh dicts: changed below as appends land
        if len(keys) == 1:  # a flush of one run: the one-row lock, on the driver's cursor
            found = await _LOCK[0].rows(self._session, {"key": keys[0]})
        else:
            result = await self._session.execute(_LOCK_MANY, {"keys": keys})
            found = [dict(row) for row in result.mappings()]
        rows = {row["id"]: row for row in found}
        if self._owner is not None:
            rows = {key: row for key, row in rows.items() if row["owner"] == self._owner}
        pending: dict[str, builtins.list[str]] = defaultdict(list)
        with_pending = [key for key, row in rows.items() if row[_HAS_PENDING]]
        for key, ids in (await pending_ids(self._session, with_pending)).items():
            pending[key].extend(ids)
        now = self._now()
        unstored: builtins.list[dict[str, Any]] = []
        outcomes: builtins.list[ConversationRecord | StorageError] = []
        touched: set[str] = set()
        for append in appends:
            key = conversation_key(append.conversation_id)
            row = rows.get(key)
            if row is None:
                outcomes.append(ConversationNotFound(append.conversation_id))
                continue
            if row["lease_run_id"] != append.run_id:
                outcomes.append(LeaseLost(key, append.run_id))
                continue
            added = message_rows(key, row["message_count"], append.messages)
            calls = [r["pending_call_id"] for r in added if r["pending_call_id"]]
            if calls:  # rare (client tool calls): check against what is stored so far
                await self._insert_messages(unstored)
                try:
                    await check_new_pending(self._session, key, added, completing=set())
                except StorageError as exc:
                    outcomes.append(exc)
                    continue
            if added:
                unstored.extend(added)
                pending[key].extend(calls)
                row.update(
                    version=row["version"] + 1,
                    updated_at=now,
                    message_count=row["message_count"] + len(added),
                )
            if append.release_lease:
                row.update(_NO_LEASE)
            touched.add(key)
            outcomes.append(to_record(row, tuple(pending[key])))
        await self._insert_messages(unstored)
        if touched:
            changed = [
                {"key": k, **{f"new_{c}": rows[k][c] for c in _RUN_COLUMNS}} for k in touched
            ]
            await _change(_RUN_COLUMNS, False).execute(self._session, changed)
        return outcomes

    async def _insert_messages(self, rows: builtins.list[dict[str, Any]]) -> None:
        """Insert ``rows`` (and empty the list)."""
        if rows:
            await _INSERT_MESSAGES.execute(self._session, rows)
            rows.clear()

    async def clear(
        self, conversation_id: str, expected_version: int | None = None
    ) -> ConversationRecord:
        """Remove every message but the system prompts (AgentMessage), which are renumbered."""
        row = await self._lock(conversation_id, expected_version=expected_version)
        key = row["id"]
        result = await self._session.execute(
            select(_M.idx, _M.data).where(_M.conversation_id == key).order_by(_M.idx)
        )
        kept = [
            index for index, data in result if stored_type(key, index, data) == AgentMessage.type
        ]
        await self._session.execute(
            delete(_MESSAGES).where(_M.conversation_id == key, _M.idx.not_in(kept))
        )
        # Ascending order: each row moves down into a slot that is already free.
        for new_index, old_index in enumerate(kept):
            if new_index != old_index:
                await self._session.execute(
                    update(_MESSAGES)
                    .where(_M.conversation_id == key, _M.idx == old_index)
                    .values(idx=new_index)
                )
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
            delete(_MESSAGES).where(_M.conversation_id == row["id"], _M.idx >= keep)
        )
        return await self._bump(row, message_count=keep)

    async def delete(self, conversation_id: str, expected_version: int | None = None) -> None:
        """Delete the conversation and its messages; refused (LeaseHeld) while running."""
        row = await self._lock(conversation_id, expected_version=expected_version)
        await self._session.execute(delete(_CONVERSATIONS).where(self._mine(row["id"])))

    # --- the run lease --------------------------------------------------------------------------

    async def acquire_lease(
        self, conversation_id: str, run_id: str, ttl_seconds: float
    ) -> ConversationRecord:
        """Hold the conversation for ``run_id`` for ``ttl_seconds``; LeaseHeld if another holds it.

        An expired lease is taken over; acquiring again as the holder extends the lease.
        """
        row = await self._locked_row(conversation_id)
        holder = row["lease_run_id"]
        if holder is not None and holder != run_id:
            if row["lease_expires_at"] > self._now():
                raise LeaseHeld(row["id"], holder)
            ended = await self._end_abandoned_run(row)
            if ended is None:
                raise LeaseHeld(row["id"], holder)
            row = ended
        now = self._now()
        values = {"lease_run_id": run_id, "lease_expires_at": now + _ttl(ttl_seconds)}
        await self._set(row["id"], values)
        return await self._record({**row, **values}, row)

    async def renew_lease(self, conversation_id: str, run_id: str, ttl_seconds: float) -> bool:
        """Extend ``run_id``'s lease to ``ttl_seconds`` from now; False if it no longer holds it.

        A holder whose lease expired keeps it until someone else takes it or writes past it.
        """
        result = await self._scoped(
            _RENEW,
            conversation_key(conversation_id),
            run=run_id,
            expires=self._now() + _ttl(ttl_seconds),
        )
        return bool(result.rowcount)

    async def release_lease(self, conversation_id: str, run_id: str) -> None:
        """Let go of the lease if ``run_id`` holds it; otherwise do nothing."""
        await self._scoped(_RELEASE, conversation_key(conversation_id), run=run_id)

    # --- internals ----------------------------------------------------------------------------

    async def _locked_row(self, conversation_id: str) -> Row:
        key = conversation_key(conversation_id)
        rows: builtins.list[dict[str, Any]]
        if self._owner is None:
            rows = await _LOCK[0].rows(self._session, {"key": key})
        else:
            rows = await _LOCK[1].rows(self._session, {"key": key, "of_owner": self._owner})
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
        """Lock the row, check the owner, the lease and the version; an expired lease is
        ended first."""
        row = await self._locked_row(conversation_id)
        holder, expires = row["lease_run_id"], row["lease_expires_at"]
        ended_a_run = False
        if run_id is not None:
            if holder != run_id:
                raise LeaseLost(row["id"], run_id)
        elif holder is not None:
            if expires > self._now():
                raise LeaseHeld(row["id"], holder)
            ended = await self._end_abandoned_run(row)  # writing past an expired lease ends it
            if ended is None:
                raise LeaseHeld(row["id"], holder)
            row, ended_a_run = ended, ended["version"] != row["version"]
        if expected_version is not None and row["version"] != expected_version:
            if ended_a_run:
                # The dead run's ending (its reply stored, one version up) stands whatever this
                # request asked: kept, the version the 412 names is the one a reader then sees.
                # Rolled back with the refused write, readers went on seeing the old version
                # and every retry with its ETag met the same 412.
                await self._session.commit()
            raise VersionConflict(row["id"], row["version"], expected_version)
        return row

    async def end_abandoned_run(self, conversation_id: str) -> bool:
        """End the run whose lease expired (its process died), if one holds the conversation:
        the handler stores what it left, the lease is released. True if there was one (and the
        handler did not find it alive)."""
        row = await self._locked_row(conversation_id)
        if row["lease_run_id"] is None or row["lease_expires_at"] > self._now():
            return False
        return await self._end_abandoned_run(row) is not None

    async def _end_abandoned_run(self, row: Row) -> Row | None:
        """Hand the expired lease's run to the handler, release the lease; the row after, or
        None when the handler found the run alive (it holds the conversation still)."""
        handler = self._on_abandoned_run
        if handler is not None and not await handler(self, row["id"], row["lease_run_id"]):
            return None
        await self.release_lease(row["id"], row["lease_run_id"])
        return await self._locked_row(row["id"])

    async def _set(self, key: str, values: Mapping[str, Any]) -> None:
        """Set these columns of conversation ``key``, as they are (no version bump)."""
        await _change(tuple(values), False).execute(self._session, {"key": key, **_new(values)})

    async def _bump(
        self, row: Row, added: Sequence[dict[str, Any]] = (), **values: Any
    ) -> ConversationRecord:
        """Change the locked ``row``, one version up; ``added``: the message rows just added."""
        values = {"version": row["version"] + 1, "updated_at": self._now(), **values}
        statement = _change(tuple(values), True)
        changed = await statement.rows(self._session, {"key": row["id"], **_new(values)})
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
        if read is not None and not read[_HAS_PENDING]:
            pending = tuple(r["pending_call_id"] for r in added if r["pending_call_id"])
            return to_record(row, pending)
        found = await pending_ids(self._session, [row["id"]])
        return to_record(row, found.get(row["id"], ()))


def _ttl(ttl_seconds: float) -> timedelta:
    if ttl_seconds <= 0:
        raise ValueError("a lease needs a positive ttl_seconds")
    return timedelta(seconds=ttl_seconds)
