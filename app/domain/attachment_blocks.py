"""Attachments as the providers' content blocks, their bytes inlined as base64 (docs/providers.md).

Imports only the standard library and the domain. ``files`` maps a file id to its bytes (what the
run read, or what an export loaded); an attachment whose bytes are not there, of a kind the shape
cannot hold, or over the provider's limit becomes a text note (``Attachment.note``), never an error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from app.domain.attachments import Attachment, as_text, b64, data_url

Files = Mapping[str, bytes]

ANTHROPIC_IMAGE_BYTES = 5 * 1024 * 1024
"""Anthropic refuses an image over 5 MB (of decoded bytes) …"""
ANTHROPIC_IMAGE_PIXELS = 8000
"""… or over 8000 px on a side."""
OPENAI_FILE_BYTES = 50 * 1024 * 1024
"""OpenAI refuses a file input over 50 MB."""

UNREADABLE = "not readable by this model"
MISSING = "its content could not be read"
TOO_LARGE = "too large for this model"


def _note(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _unusable(attachment: Attachment, files: Files, limit: int) -> str | None:
    """Why the bytes of ``attachment`` cannot be sent (a note's reason), or None."""
    data = files.get(attachment.file_id)
    if data is None:
        return MISSING
    if len(data) > limit:
        return TOO_LARGE
    return None


def anthropic_blocks(attachments: Sequence[Attachment], files: Files) -> list[dict[str, Any]]:
    """``image`` and ``document`` blocks (base64 sources), text files as text, else notes."""
    blocks: list[dict[str, Any]] = []
    for a in attachments:
        why = _unusable(a, files, ANTHROPIC_IMAGE_BYTES if a.kind == "image" else 32 << 20)
        if a.kind == "image" and max(a.width or 0, a.height or 0) > ANTHROPIC_IMAGE_PIXELS:
            why = TOO_LARGE
        if a.kind == "other":
            why = UNREADABLE
        if why is not None:
            blocks.append(_note(a.note(why)))
            continue
        data = files[a.file_id]
        if a.kind == "text":
            blocks.append(_note(as_text(a, data)))
            continue
        source = {"type": "base64", "media_type": a.media_type, "data": b64(data)}
        blocks.append({"type": a.kind, "source": source})
        if a.kind == "document" and a.name:
            blocks[-1]["title"] = a.name
    return blocks


def openai_chat_parts(attachments: Sequence[Attachment], files: Files) -> list[dict[str, Any]]:
    """Chat-completions content parts: ``image_url`` (a data URL), ``file`` (a PDF), text."""
    parts: list[dict[str, Any]] = []
    for a in attachments:
        why = UNREADABLE if a.kind == "other" else _unusable(a, files, OPENAI_FILE_BYTES)
        if why is not None:
            parts.append(_note(a.note(why)))
            continue
        data = files[a.file_id]
        if a.kind == "image":
            parts.append({"type": "image_url", "image_url": {"url": data_url(a.media_type, data)}})
        elif a.kind == "document":
            file = {
                "filename": a.name or f"{a.file_id}.pdf",
                "file_data": data_url(a.media_type, data),
            }
            parts.append({"type": "file", "file": file})
        else:
            parts.append(_note(as_text(a, data)))
    return parts


def responses_parts(attachments: Sequence[Attachment], files: Files) -> list[dict[str, Any]]:
    """Responses input content: ``input_image`` (a data URL), ``input_file`` (a PDF), text."""
    parts: list[dict[str, Any]] = []
    for a in attachments:
        why = UNREADABLE if a.kind == "other" else _unusable(a, files, OPENAI_FILE_BYTES)
        if why is not None:
            parts.append({"type": "input_text", "text": a.note(why)})
            continue
        data = files[a.file_id]
        if a.kind == "image":
            url = data_url(a.media_type, data)
            parts.append({"type": "input_image", "image_url": url, "detail": "auto"})
        elif a.kind == "document":
            name = a.name or f"{a.file_id}.pdf"
            url = data_url(a.media_type, data)
            parts.append({"type": "input_file", "filename": name, "file_data": url})
        else:
            parts.append({"type": "input_text", "text": as_text(a, data)})
    return parts


def notes(attachments: Sequence[Attachment], why: str = UNREADABLE) -> str:
    """The attachments as one line of notes, for a place that holds only text."""
    return " ".join(a.note(why) for a in attachments)
