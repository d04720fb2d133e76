"""Files in the messages a request brings (docs/format.md, "Attachments"): each ``file_id``
checked against the caller's files, each inline ``data`` stored as a file on arrival, and the
messages given the stored files' references.

May import the domain, the schemas, storage (the file store) and the runs layer. Everything is
checked before anything is stored: a bad item is a 422 naming it
(``body.messages[0].attachments[0].file_id``) and stores nothing; an inline file the store then
refuses (its kind, its size) is a 422 naming its ``data``.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from app.api import convert
from app.api.deps import Caller
from app.api.schemas import AttachmentIn, DeltaBundle, ToolMessageIn, UserMessageIn
from app.domain import Attachment, Message, TextMessage, ToolResult
from app.runs.delta import Delta
from app.runs.errors import InvalidInput
from app.runs.files import attachment_of
from app.storage.files import (
    FileEmpty,
    FileNotFound,
    FileRefused,
    FileStore,
    FileTooLarge,
    file_key,
)

Loc = tuple[str | int, ...]
_DATA_URL = re.compile(r"^data:([\w.+-]+/[\w.+-]+);base64,(.*)$", re.DOTALL)
_CONTENT_URL = re.compile(r"(?:^|/)files/([0-9A-Za-z-]{1,64})/content$")
UNKNOWN = "no such file: unknown, deleted, or another key's"


@dataclass(frozen=True)
class _Wanted:
    """One attachment of the request: where it is, and the id or the decoded bytes it gives."""

    loc: Loc
    file_id: str | None = None
    data: bytes | None = None
    media_type: str | None = None
    name: str | None = None


def _decoded(item: AttachmentIn, loc: Loc) -> _Wanted:
    if item.file_id is not None:
        return _Wanted((*loc, "file_id"), file_id=item.file_id)
    return _inline(item.data or "", item.name, (*loc, "data"))


def _inline(url: str, name: str | None, loc: Loc) -> _Wanted:
    """A ``data:`` URL's bytes and media type, to be stored as a file."""
    match = _DATA_URL.match(url)
    try:
        if match is None:
            raise ValueError
        data = base64.b64decode(re.sub(r"\s+", "", match.group(2)), validate=True)
    except (binascii.Error, ValueError):
        raise InvalidInput(loc, "must be a data: URL with base64 content") from None
    return _Wanted(loc, data=data, media_type=match.group(1), name=name)


def _from_url(url: str, name: str | None, loc: Loc) -> _Wanted:
    """A URL a client gives for a file: a ``data:`` URL (stored on arrival), or the content
    route of one of the caller's files (as ``GET …/messages?format=ai-sdk`` shows them)."""
    if url.startswith("data:"):
        return _inline(url, name, loc)
    ours = _CONTENT_URL.search(url)
    if ours is None:
        raise InvalidInput(loc, "must be a data: URL, or a file's /files/{id}/content URL")
    return _Wanted(loc, file_id=ours.group(1))


async def url_attachments(
    urls: Sequence[tuple[Loc, str, str | None]], files: FileStore, owner: str
) -> list[Attachment]:
    """The references of files given by URL (``(where, url, name)``, in order): all checked
    before any is stored, as a delta's attachments."""
    wanted = [_from_url(url, name, loc) for loc, url, name in urls]
    return await _stored(wanted, files, owner)


async def _stored(wanted: Sequence[_Wanted], files: FileStore, owner: str) -> list[Attachment]:
    """The references of ``wanted``, in order: ids resolved first (nothing stored when one is
    unknown), then inline files stored."""
    ids = [w.file_id for w in wanted if w.file_id is not None]
    try:
        records = await files.resolve(owner, ids)
    except FileNotFound as exc:
        where = next(w.loc for w in wanted if w.file_id == exc.file_id)
        raise InvalidInput(where, UNKNOWN) from None
    by_given = {given: records[file_key(given)] for given in ids}
    out: list[Attachment] = []
    for w in wanted:
        if w.file_id is not None:
            out.append(attachment_of(by_given[w.file_id]))
            continue
        assert w.data is not None
        try:
            record = await files.put(
                owner, w.data, w.name, w.media_type, purpose="attachment", from_message=True
            )
        except (FileRefused, FileTooLarge, FileEmpty) as exc:
            raise InvalidInput(w.loc, str(exc)) from None
        out.append(attachment_of(record))
    return out


def _wanted(items: Sequence[object]) -> list[tuple[bool, int, list[_Wanted]]]:
    """Each item with attachments: (a tool result?, its position among the request's
    messages or among its tool results, its attachments decoded)."""
    wanted: list[tuple[bool, int, list[_Wanted]]] = []
    positions = [0, 0]  # messages, tool results
    for i, item in enumerate(items):
        tool = isinstance(item, ToolMessageIn)
        if isinstance(item, UserMessageIn | ToolMessageIn) and item.attachments:
            loc: Loc = ("body", "messages", i, "attachments")
            decoded = [_decoded(a, (*loc, j)) for j, a in enumerate(item.attachments)]
            wanted.append((tool, positions[tool], decoded))
        positions[tool] += 1
    return wanted


async def attached(
    messages: Sequence[Message],
    results: Sequence[ToolResult],
    items: Sequence[object],
    files: FileStore,
    owner: str,
) -> tuple[list[Message], list[ToolResult]]:
    """``messages`` and ``results`` (made, in order, from the request's ``items``) with the
    attachments of its user messages and tool results: resolved and stored as references."""
    wanted = _wanted(items)
    out, done = list(messages), list(results)
    if not wanted:
        return out, done
    stored = iter(await _stored([w for _, _, ws in wanted for w in ws], files, owner))
    for tool, position, ws in wanted:
        attachments = tuple(next(stored) for _ in ws)
        if tool:
            done[position] = replace(done[position], attachments=attachments)
            continue
        message = out[position]
        assert isinstance(message, TextMessage)
        out[position] = replace(message, attachments=attachments)
    return out, done


async def with_attachments(
    messages: Sequence[Message],
    items: Sequence[object],
    files: FileStore,
    owner: str,
) -> list[Message]:
    """``messages`` (made, in order, from the request's non-tool ``items``) with the user
    messages' attachments: resolved and stored as references."""
    return (await attached(messages, (), items, files, owner))[0]


async def delta(bundle: DeltaBundle, caller: Caller) -> Delta:
    """The domain delta of a bundle (``convert.delta``), its attachments resolved and stored."""
    services = caller.services
    converted = convert.delta(bundle, services.settings)
    messages, results = await attached(
        converted.messages, converted.tool_results, bundle.messages, services.files, caller.owner
    )
    return replace(converted, messages=messages, tool_results=results)


async def checked_document(
    document: dict[str, Any], files: FileStore, owner: str
) -> dict[str, Any]:
    """A serialized document whose attachments are the caller's files: each ``file_id``
    resolved (its description taken from the store, not from the document), each inline
    ``data`` (a portable export, ``?attachments=inline``) stored as a new file."""
    wanted: list[tuple[dict[str, Any], _Wanted]] = []
    for i, message in enumerate(document.get("messages") or []):
        items = message.get("attachments") if isinstance(message, dict) else None
        for j, item in enumerate(items if isinstance(items, list) else []):
            if not isinstance(item, dict):
                continue  # the document's own reader names it
            loc: Loc = ("body", "messages", "messages", i, "attachments", j)
            wanted.append((item, _document_item(item, loc)))
    if not wanted:
        return document
    stored = await _stored([w for _, w in wanted], files, owner)
    for (item, _), attachment in zip(wanted, stored, strict=True):
        item.pop("data", None)
        item.update(attachment.to_dict())
    return document


def _document_item(item: Mapping[str, Any], loc: Loc) -> _Wanted:
    if "data" not in item:
        file_id = item.get("file_id")
        if not isinstance(file_id, str) or not file_id:
            raise InvalidInput((*loc, "file_id"), "must be a non-empty string")
        return _Wanted((*loc, "file_id"), file_id=file_id)
    try:
        data = base64.b64decode(str(item["data"]), validate=True)
    except (binascii.Error, ValueError):
        raise InvalidInput((*loc, "data"), "must be base64") from None
    name = item.get("name") if isinstance(item.get("name"), str) else None
    media_type = item.get("media_type") if isinstance(item.get("media_type"), str) else None
    return _Wanted((*loc, "data"), data=data, media_type=media_type, name=name)
