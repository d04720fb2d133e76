"""Files carried inline (base64) by an imported document, before they are stored.

Imports only the standard library and the domain. Importing a provider's request (or a portable
Parley document, ``?attachments=inline``) reads each inline image or document into an
``InlineFiles``: the message gets an ``Attachment`` whose ``file_id`` is a placeholder
(``inline:<sha256>``); the caller stores the bytes (``FileStore.put``) and swaps the placeholders
for the stored files' ids (``with_stored_files``). Nothing here touches a store.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from app.domain.attachments import Attachment, image_size, sniff_media_type
from app.domain.errors import ProviderFormatError
from app.domain.messages import Message, TextMessage, ToolCallMessage

Loc = tuple[str | int, ...]
PLACEHOLDER = "inline:"
_DATA_URL = re.compile(r"^data:([\w.+-]+/[\w.+-]+);base64,(.*)$", re.DOTALL)


@dataclass(frozen=True)
class InlineFile:
    """One inline file: its bytes, the media type read from them, and a name."""

    data: bytes
    media_type: str
    name: str


@dataclass
class InlineFiles:
    """The inline files of one import, by placeholder id (the same bytes once)."""

    files: dict[str, InlineFile] = field(default_factory=dict)

    def add(self, data: bytes, declared: str, name: str, loc: Loc) -> Attachment:
        """An attachment for ``data``; refused (naming ``loc``) unless the bytes are the kind
        they are declared as, or text declared as text."""
        actual = sniff_media_type(data)
        if actual is None and declared.startswith("text/"):
            actual = declared
        if actual != declared:
            found = actual or "none Parley takes"
            raise ProviderFormatError(loc, f"the data is declared {declared}, but is {found}")
        file_id = PLACEHOLDER + hashlib.sha256(data).hexdigest()[:32]
        self.files.setdefault(file_id, InlineFile(data, declared, name))
        size = image_size(data) if declared.startswith("image/") else None
        width, height = size if size is not None else (None, None)
        return Attachment(file_id, declared, name, len(data), width, height)

    def base64(self, text: Any, declared: Any, name: str, loc: Loc) -> Attachment:
        """An attachment for base64 ``text`` of media type ``declared``."""
        if not isinstance(declared, str) or not declared:
            raise ProviderFormatError((*loc, "media_type"), "must be a media type")
        if not isinstance(text, str):
            raise ProviderFormatError((*loc, "data"), "must be base64 text")
        try:
            data = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            raise ProviderFormatError((*loc, "data"), "is not base64") from None
        return self.add(data, declared, name, loc)

    def data_url(self, url: Any, name: str, loc: Loc) -> Attachment:
        """An attachment for a ``data:<type>;base64,…`` URL (another URL is refused: Parley
        fetches nothing)."""
        match = _DATA_URL.match(url) if isinstance(url, str) else None
        if match is None:
            raise ProviderFormatError(loc, "must be a data: URL with base64 content")
        return self.base64(match.group(2), match.group(1), name, loc)


def with_stored_files(
    messages: Iterable[Message], stored: Mapping[str, Attachment]
) -> list[Message]:
    """``messages`` with each attachment whose ``file_id`` is in ``stored`` replaced by the
    stored file's attachment (its id and the store's own description of it)."""

    def swapped(attachments: tuple[Attachment, ...]) -> tuple[Attachment, ...]:
        return tuple(stored.get(a.file_id, a) for a in attachments)

    out: list[Message] = []
    for message in messages:
        if isinstance(message, TextMessage | ToolCallMessage) and message.attachments:
            message = replace(message, attachments=swapped(message.attachments))
        out.append(message)
    return out


def inline_document_files(document: Mapping[str, Any], files: InlineFiles) -> dict[str, str]:
    """The inline files of a portable Parley document (``"data"`` beside an attachment's
    fields, base64), added to ``files``; the document's file ids → their placeholders."""
    ids: dict[str, str] = {}
    raw = document.get("messages")
    for i, message in enumerate(raw if isinstance(raw, list) else []):
        items = message.get("attachments") if isinstance(message, Mapping) else None
        for j, item in enumerate(items if isinstance(items, list) else []):
            if isinstance(item, Mapping) and "data" in item:
                loc: Loc = ("messages", i, "attachments", j)
                given = item.get("name")
                name = given if isinstance(given, str) else ""
                found = files.base64(item["data"], item.get("media_type"), name, loc)
                ids[str(item.get("file_id"))] = found.file_id
    return ids


def inline_document(document: dict[str, Any], files: Mapping[str, bytes]) -> dict[str, Any]:
    """A serialized document made portable: each attachment whose bytes are in ``files`` gets
    them as base64 ``data`` beside its reference (``?attachments=inline``)."""
    for message in document.get("messages", []):
        for item in message.get("attachments", ()):
            data = files.get(item["file_id"])
            if data is not None:
                item["data"] = base64.b64encode(data).decode("ascii")
    return document
