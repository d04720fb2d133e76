"""Attachments: a message's reference to a stored file, and how a model call reads its bytes.

Imports only the standard library. A message carries ``Attachment`` values (file id, media type,
name, size, width/height for images), never bytes: the bytes live in a file store that adapters
read through an ``AttachmentReader``, once per run (``RunAttachments``, bounded in memory).
"""

from __future__ import annotations

import base64
import hashlib
import math
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from app.domain.errors import MessageListDeserializationError

IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
DOCUMENT_TYPES = ("application/pdf",)
TEXT_TYPES = ("text/plain", "text/markdown", "text/csv")

Kind = Literal["image", "document", "text", "other"]

DEFAULT_RUN_BYTES = 64 * 1024 * 1024
"""How many attachment bytes one run keeps in memory at most (more are read again per call)."""


@dataclass(frozen=True)
class Attachment:
    """A file a message refers to (by ``file_id``), with what a reader needs without its bytes."""

    file_id: str
    media_type: str
    name: str
    size: int
    width: int | None = None
    height: int | None = None

    def __post_init__(self) -> None:
        for name in ("file_id", "media_type"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise TypeError(f"Attachment.{name} must be a non-empty str")
        if not isinstance(self.name, str):
            raise TypeError("Attachment.name must be a str")
        if isinstance(self.size, bool) or not isinstance(self.size, int) or self.size < 0:
            raise TypeError("Attachment.size must be an integer of at least 0")

    @property
    def kind(self) -> Kind:
        """``image``, ``document`` (PDF), ``text`` (plain text, Markdown, CSV) or ``other``."""
        if self.media_type in IMAGE_TYPES:
            return "image"
        if self.media_type in DOCUMENT_TYPES:
            return "document"
        if self.media_type in TEXT_TYPES:
            return "text"
        return "other"

    def note(self, why: str = "not readable by this model") -> str:
        """What a model reads in place of a file it cannot take."""
        return f"[attached: {self.name or self.file_id}, {human_size(self.size)}, {why}]"

    def description(self) -> str:
        """A short line naming the file: ``[image: cat.png, image/png, 640×480]``."""
        parts = [self.name or self.file_id, self.media_type]
        if self.width and self.height:
            parts.append(f"{self.width}×{self.height}")
        else:
            parts.append(human_size(self.size))
        label = "image" if self.kind == "image" else "file"
        return f"[{label}: {', '.join(parts)}]"

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "file_id": self.file_id,
            "media_type": self.media_type,
            "name": self.name,
            "size": self.size,
        }
        if self.width is not None and self.height is not None:
            data["width"], data["height"] = self.width, self.height
        return data


def human_size(size: int) -> str:
    """``2.1 MB``, ``12 KB``, ``512 B`` (decimal units, as people read file sizes)."""
    if size >= 1_000_000:
        return f"{size / 1_000_000:.1f} MB"
    if size >= 1_000:
        return f"{size / 1_000:.0f} KB"
    return f"{size} B"


def checked_attachments(given: Any) -> tuple[Attachment, ...]:
    """A message's ``attachments`` as a tuple; TypeError for anything but Attachments."""
    if not isinstance(given, list | tuple) or not all(isinstance(a, Attachment) for a in given):
        raise TypeError("attachments must be a sequence of Attachment")
    return tuple(given)


def write_attachments(attachments: tuple[Attachment, ...], data: dict[str, Any]) -> None:
    """Add ``attachments`` to a serialized message, only when there are some: a message
    without files is written as before."""
    if attachments:
        data["attachments"] = [a.to_dict() for a in attachments]


def attachments_from_data(raw: Any, where: str) -> tuple[Attachment, ...]:
    """The ``attachments`` field of a serialized message; errors name the item and field."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise MessageListDeserializationError(f"{where}.attachments: must be an array")
    return tuple(_attachment(item, f"{where}.attachments[{i}]") for i, item in enumerate(raw))


def _attachment(item: Any, where: str) -> Attachment:
    if not isinstance(item, Mapping):
        raise MessageListDeserializationError(f"{where}: must be an object")
    for key in ("file_id", "media_type"):
        if not isinstance(item.get(key), str) or not item[key].strip():
            raise MessageListDeserializationError(f"{where}.{key}: must be a non-empty string")
    name = item.get("name") or ""
    size = item.get("size", 0)
    if not isinstance(name, str):
        raise MessageListDeserializationError(f"{where}.name: must be a string")
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise MessageListDeserializationError(f"{where}.size: must be an integer of at least 0")
    width, height = item.get("width"), item.get("height")
    for key, value in (("width", width), ("height", height)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise MessageListDeserializationError(f"{where}.{key}: must be an integer or null")
    return Attachment(item["file_id"], item["media_type"], name, size, width, height)


# --- bytes --------------------------------------------------------------------------------


class AttachmentReader(Protocol):
    """Where adapters read an attachment's bytes (the file store); raises on a missing file."""

    async def read(self, file_id: str) -> bytes: ...


@runtime_checkable
class AttachmentStore(AttachmentReader, Protocol):
    """A reader that also stores files: where a run keeps the images a model makes."""

    async def put(self, data: bytes, media_type: str, name: str) -> Attachment: ...


class MemoryAttachments:
    """An AttachmentStore in a dict: for the domain used as a library (``prompt_for_image``
    without a file store) and for tests. Ids are the bytes' sha256, so a file is kept once."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}

    async def read(self, file_id: str) -> bytes:
        return self.files[file_id]

    async def put(self, data: bytes, media_type: str, name: str) -> Attachment:
        file_id = "mem_" + hashlib.sha256(data).hexdigest()[:32]
        self.files[file_id] = data
        size = image_size(data) if media_type in IMAGE_TYPES else None
        width, height = size if size is not None else (None, None)
        return Attachment(file_id, media_type, name, len(data), width, height)


@dataclass(frozen=True)
class Image:
    """An image a model made (``prompt_for_image``): its stored file and its bytes."""

    attachment: Attachment
    data: bytes

    @property
    def media_type(self) -> str:
        return self.attachment.media_type


class RunAttachments:
    """The bytes one run reads: each file read once and kept while the run keeps under
    ``max_bytes`` in all; a file past that is read again when a later call needs it. A file
    that cannot be read is ``None`` (the model then reads a note, the run goes on)."""

    def __init__(self, reader: AttachmentReader, max_bytes: int = DEFAULT_RUN_BYTES) -> None:
        self.reader = reader
        self.max_bytes = max_bytes
        self._kept: dict[str, bytes | None] = {}
        self._held = 0

    async def read(self, file_id: str) -> bytes | None:
        if file_id in self._kept:
            return self._kept[file_id]
        try:
            data: bytes | None = await self.reader.read(file_id)
        except Exception:  # a deleted or unreadable file: a note, never a failed run
            data = None
        size = len(data) if data is not None else 0
        if self._held + size <= self.max_bytes:
            self._kept[file_id] = data
            self._held += size
        return data

    async def load(self, attachments: Iterable[Attachment]) -> dict[str, bytes]:
        """The bytes of ``attachments`` that could be read, by file id."""
        found: dict[str, bytes] = {}
        for attachment in attachments:
            if attachment.file_id not in found:
                data = await self.read(attachment.file_id)
                if data is not None:
                    found[attachment.file_id] = data
        return found


def attachments_of(messages: Iterable[Any]) -> list[Attachment]:
    """Every attachment of ``messages``, in order."""
    return [a for m in messages for a in getattr(m, "attachments", ())]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def data_url(media_type: str, data: bytes) -> str:
    return f"data:{media_type};base64,{b64(data)}"


def as_text(attachment: Attachment, data: bytes) -> str:
    """A text file as the text a model reads, headed by its name."""
    body = data.decode("utf-8", errors="replace")
    return f"[file: {attachment.name or attachment.file_id}]\n{body}"


# --- what the bytes are ---------------------------------------------------------------------


def sniff_media_type(data: bytes) -> str | None:
    """The media type the bytes are, by their signature; None for what Parley does not take."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    if data.startswith(b"%PDF-"):
        return "application/pdf"
    return None


def image_size(data: bytes) -> tuple[int, int] | None:
    """``(width, height)`` of a PNG, GIF or JPEG, read from its header; None when unknown."""
    if data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) >= 24:
        w, h = struct.unpack(">II", data[16:24])
        return int(w), int(h)
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        w, h = struct.unpack("<HH", data[6:10])
        return int(w), int(h)
    if data.startswith(b"\xff\xd8"):
        return _jpeg_size(data)
    return None


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    i = 2
    while i + 9 < len(data):
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        length = struct.unpack(">H", data[i + 2 : i + 4])[0]
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            h, w = struct.unpack(">HH", data[i + 5 : i + 9])
            return int(w), int(h)
        i += 2 + length
    return None


# --- what they cost -------------------------------------------------------------------------

PDF_BYTES_PER_PAGE = 60_000
"""The approximation of a PDF's pages from its size (docs/providers.md, "Attachments")."""
PDF_TOKENS_PER_PAGE = 1_500
"""Tokens a PDF page costs (text plus the page image, about what Anthropic documents)."""
UNKNOWN_IMAGE_TOKENS = 1_600


def anthropic_image_tokens(width: int, height: int) -> int:
    """Anthropic's rule: ``width × height / 750``, after scaling to 1568 px on the long side."""
    scale = min(1.0, 1568 / max(width, height, 1))
    return math.ceil(width * scale * height * scale / 750)


def openai_image_tokens(width: int, height: int) -> int:
    """OpenAI's tiles (detail ``high``): fit in 2048², shortest side to 768, 170 a 512-tile + 85."""
    scale = min(1.0, 2048 / max(width, height, 1))
    w, h = width * scale, height * scale
    scale = min(1.0, 768 / max(min(w, h), 1))
    w, h = w * scale, h * scale
    return 170 * math.ceil(w / 512) * math.ceil(h / 512) + 85


def attachment_tokens(attachment: Attachment, image_rule: str = "anthropic") -> int:
    """What one attachment costs a request, approximately: images by their provider's rule
    (``anthropic`` or ``openai``), PDFs by pages (from the size), text by characters."""
    if attachment.kind == "image":
        if not (attachment.width and attachment.height):
            return UNKNOWN_IMAGE_TOKENS
        rule = openai_image_tokens if image_rule == "openai" else anthropic_image_tokens
        return rule(attachment.width, attachment.height)
    if attachment.kind == "document":
        return PDF_TOKENS_PER_PAGE * max(1, math.ceil(attachment.size / PDF_BYTES_PER_PAGE))
    if attachment.kind == "text":
        return math.ceil(attachment.size / 4)
    return 20  # the note
