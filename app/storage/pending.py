"""Pending client tool calls in SQL: which calls wait, completing them, and no id twice.

Imports SQLAlchemy, app.domain and app.storage. Helpers of ``ConversationRepository``: each runs on
a conversation the repository has already found in its owner's scope.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

from app.domain import ToolCallMessage
from app.storage.errors import StoredDataError, ToolCallNotPending
from app.storage.records import ToolOutcome, check_unique_pending, dump_message, load_message
from app.storage.tables import MESSAGES

_M = MESSAGES.c


async def pending_ids(session: AsyncConnection, keys: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """The pending call ids of each conversation, in message order."""
    if not keys:
        return {}
    # No ORDER BY: sorting by idx in SQL makes SQLite walk every row of the conversation
    # instead of the small partial index of pending calls.
    result = await session.execute(
        select(_M.conversation_id, _M.idx, _M.pending_call_id).where(
            _M.conversation_id.in_(keys), _M.pending_call_id.is_not(None)
        )
    )
    found: dict[str, list[tuple[int, str]]] = {}
    for key, index, call_id in result:
        found.setdefault(key, []).append((index, call_id))
    return {key: tuple(c for _, c in sorted(calls)) for key, calls in found.items()}


async def completions_for(
    session: AsyncConnection, key: str, outcomes: Sequence[ToolOutcome]
) -> list[tuple[str, int, str]]:
    """(tool_call_id, index, completed JSON) per outcome; ToolCallNotPending if one is not."""
    if not outcomes:
        return []
    ids = [outcome.tool_call_id for outcome in outcomes]
    result = await session.execute(
        select(_M.pending_call_id, _M.idx, _M.data).where(
            _M.conversation_id == key, _M.pending_call_id.in_(ids)
        )
    )
    pending = {call_id: (index, data) for call_id, index, data in result}
    completions: list[tuple[str, int, str]] = []
    for outcome in outcomes:
        if outcome.tool_call_id not in pending:  # unknown, or completed (maybe just now)
            raise ToolCallNotPending(key, outcome.tool_call_id)
        index, data = pending.pop(outcome.tool_call_id)
        call = load_message(key, index, data)
        if not isinstance(call, ToolCallMessage) or not call.pending:
            raise StoredDataError(key, index, "marked as a pending tool call but is not one")
        done = call.completed(result=outcome.result, error=outcome.error)
        if outcome.attachments:
            done = replace(done, attachments=outcome.attachments)
        completions.append((outcome.tool_call_id, index, dump_message(done, index)))
    return completions


async def check_new_pending(
    session: AsyncConnection, key: str, rows: Sequence[dict[str, Any]], completing: set[str]
) -> None:
    new_ids = [r["pending_call_id"] for r in rows if r["pending_call_id"] is not None]
    if not new_ids:
        return
    result = await session.execute(
        select(_M.pending_call_id).where(_M.conversation_id == key, _M.pending_call_id.in_(new_ids))
    )
    check_unique_pending(key, rows, stored=set(result.scalars()) - completing)
