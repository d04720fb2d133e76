"""Editing what describes a conversation — title, metadata, archived — and the made title.

Imports SQLAlchemy and app.storage. None of these touch the message list, so none is refused
while a run holds the lease: the row lock orders them with the run's writes, which read the
version under that lock and write only the columns runs change (run_appends.py), so a run's
ending neither undoes an edit nor reuses its version.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from sqlalchemy import update

from app.storage.conversations import statements as s
from app.storage.conversations.base import RepositoryBase
from app.storage.errors import VersionConflict
from app.storage.records import ConversationRecord, conversation_key
from app.storage.tables import CONVERSATIONS

MetadataUpdate = Callable[[dict[str, Any]], dict[str, Any]]


class Editing(RepositoryBase):
    """The editing half of ConversationRepository: PATCH, and the title a run's end makes."""

    async def edit(
        self,
        conversation_id: str,
        *,
        title: str | None = None,
        set_title: bool = False,
        archived: bool | None = None,
        update_metadata: MetadataUpdate | None = None,
        expected_version: int | None = None,
    ) -> ConversationRecord:
        """Set the title (``set_title``: to ``title``, None clears it), ``archived``, and the
        metadata (``update_metadata`` turns the stored one into the new one), one version up.

        Allowed while a run holds the lease; VersionConflict on a stale ``expected_version``.
        Even an edit that changes nothing bumps the version (it was asked for and answered).
        """
        row = await self._locked_row(conversation_id)
        if expected_version is not None and row["version"] != expected_version:
            raise VersionConflict(row["id"], row["version"], expected_version)
        changes: dict[str, Any] = {}
        if set_title:
            changes["title"] = title
        if archived is not None:
            changes["archived"] = archived
        if update_metadata is not None:
            changes["metadata"] = update_metadata(dict(row["metadata"]))
        return await self._bump(row, **changes)

    async def title_if_untitled(self, conversation_id: str, title: str) -> bool:
        """Store ``title`` unless the conversation has one; whether it was stored.

        One statement, so of processes titling one conversation at once exactly one stores.
        The version does not move: a made title never makes a client's If-Match stale.
        """
        key = conversation_key(conversation_id)
        statement = (
            update(CONVERSATIONS).where(self._mine(key), s.C.title.is_(None)).values(title=title)
        )
        result = await self._session.execute(statement)
        return bool(result.rowcount)


def merge_document(stored: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """``stored`` with the JSON Merge Patch ``patch`` applied (RFC 7396): null removes a key,
    an object merges into the stored object key by key, anything else replaces the value."""
    merged = dict(stored)
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, Mapping):
            current = merged.get(key)
            merged[key] = merge_document(current if isinstance(current, Mapping) else {}, value)
        else:
            merged[key] = value
    return merged
