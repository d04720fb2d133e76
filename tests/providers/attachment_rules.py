"""The providers' rules on images and documents in a request, as the fakes enforce them.

Standard library only (it reads the bytes itself, not with Parley's code). Each function is pure
and lists the refusals, in the API's wording, the real API would answer a body with:
base64 that does not decode, a media type that does not match the bytes, an image over the
provider's limit, a document type the API does not take. ``anthropic_rules`` and
``responses_rules`` call theirs; ``chat_check`` is a ``FakeServer`` check for chat completions.
"""

from __future__ import annotations

import base64
import binascii
import re
import struct
from typing import Any

from .fake_server import Received, Reply

ANTHROPIC_IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
ANTHROPIC_MAX_IMAGE = 5 * 1024 * 1024
ANTHROPIC_MAX_PIXELS = 8000
OPENAI_IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
OPENAI_MAX_FILE = 50 * 1024 * 1024
_DATA_URL = re.compile(r"^data:([\w.+-]+/[\w.+-]+);base64,(.*)$", re.DOTALL)


def sniff(data: bytes) -> str | None:
    """The media type of ``data`` by its signature."""
    signatures = {
        b"\x89PNG\r\n\x1a\n": "image/png",
        b"\xff\xd8\xff": "image/jpeg",
        b"GIF87a": "image/gif",
        b"GIF89a": "image/gif",
        b"%PDF-": "application/pdf",
    }
    for head, kind in signatures.items():
        if data.startswith(head):
            return kind
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def png_size(data: bytes) -> tuple[int, int] | None:
    if data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) >= 24:
        w, h = struct.unpack(">II", data[16:24])
        return int(w), int(h)
    return None


def decode(text: Any) -> bytes | None:
    """Strict base64, as the APIs read it; None when it does not decode."""
    if not isinstance(text, str):
        return None
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None


# --- Anthropic --------------------------------------------------------------------------------


def anthropic_attachment_violations(body: dict[str, Any]) -> list[str]:
    """What the messages API refuses in the ``image`` and ``document`` blocks of ``body``."""
    found: list[str] = []
    for i, turn in enumerate(body.get("messages", [])):
        content = turn.get("content") if isinstance(turn, dict) else None
        for j, block in enumerate(content if isinstance(content, list) else []):
            where = f"messages.{i}.content.{j}"
            found += _anthropic_block(where, block, turn.get("role"))
            inner = block.get("content") if block.get("type") == "tool_result" else None
            for k, part in enumerate(inner if isinstance(inner, list) else []):
                found += _anthropic_block(f"{where}.tool_result.content.{k}", part, "user")
    return found


def _anthropic_block(where: str, block: dict[str, Any], role: Any) -> list[str]:
    kind = block.get("type")
    if kind not in ("image", "document"):
        return []
    if role != "user":
        return [f"{where}: {kind} content blocks are only allowed in user messages"]
    source = block.get("source") or {}
    if source.get("type") != "base64":
        return [f"{where}.{kind}.source: only base64 sources are sent by Parley"]
    media_type = source.get("media_type")
    data = decode(source.get("data"))
    if kind == "document":
        if media_type != "application/pdf":
            return [f"{where}.document.source.base64.media_type: Input should be 'application/pdf'"]
        if data is None or sniff(data) != "application/pdf":
            return [f"{where}.document.source.base64.data: The PDF specified was not valid."]
        return []
    if media_type not in ANTHROPIC_IMAGE_TYPES:
        allowed = ", ".join(f"'{t}'" for t in ANTHROPIC_IMAGE_TYPES)
        return [f"{where}.image.source.base64.media_type: Input should be {allowed}"]
    if data is None:
        return [f"{where}.image.source.base64.data: invalid base64 data"]
    actual = sniff(data)
    if actual != media_type:
        return [
            f"{where}.image.source.base64: The image was specified using the {media_type} media "
            f"type, but the image appears to be a {actual} image"
        ]
    if len(data) > ANTHROPIC_MAX_IMAGE:
        return [
            f"{where}.image.source.base64: image exceeds 5 MB maximum: {len(data)} bytes > "
            f"{ANTHROPIC_MAX_IMAGE} bytes"
        ]
    size = png_size(data)
    if size is not None and max(size) > ANTHROPIC_MAX_PIXELS:
        return [
            f"{where}.image.source.base64.data: At least one of the image dimensions exceed "
            f"max allowed size: {ANTHROPIC_MAX_PIXELS} pixels"
        ]
    return []


# --- OpenAI -----------------------------------------------------------------------------------


def data_url_violation(where: str, url: Any, allowed: tuple[str, ...]) -> str | None:
    """Why OpenAI refuses a data URL (for an image, or a file's ``file_data``), or None."""
    match = _DATA_URL.match(url) if isinstance(url, str) else None
    if match is None:
        return (
            f"Invalid '{where}'. Expected a base64-encoded data URL with an image MIME type "
            "(e.g. 'data:image/png;base64,aW1nIGJ5dGVzIGhlcmU='), but got a value of another form."
        )
    media_type, data = match.group(1), decode(match.group(2))
    if media_type not in allowed:
        return f"Invalid MIME type '{media_type}' in '{where}'. Supported: {', '.join(allowed)}."
    if data is None:
        return f"Invalid '{where}': the base64 data could not be decoded."
    if sniff(data) != media_type:
        return f"Invalid '{where}': the data is not a valid {media_type} file."
    if len(data) > OPENAI_MAX_FILE:
        return f"Invalid '{where}': the file is larger than the 50 MB limit."
    return None


def responses_part_violation(where: str, part: dict[str, Any]) -> str | None:
    """Why the Responses API refuses an ``input_image`` or ``input_file`` part, or None."""
    kind = part.get("type")
    if kind == "input_image":
        return data_url_violation(f"{where}.image_url", part.get("image_url"), OPENAI_IMAGE_TYPES)
    if kind == "input_file":
        if not part.get("filename"):
            return f"Missing required parameter: '{where}.filename'."
        url = part.get("file_data")
        return data_url_violation(f"{where}.file_data", url, ("application/pdf",))
    return None


def chat_attachment_violations(body: dict[str, Any]) -> list[str]:
    """What chat completions refuses in the ``image_url`` and ``file`` parts of ``body``."""
    found: list[str] = []
    for i, message in enumerate(body.get("messages", [])):
        content = message.get("content")
        for j, part in enumerate(content if isinstance(content, list) else []):
            where = f"messages[{i}].content[{j}]"
            kind = part.get("type")
            if kind in ("image_url", "file") and message.get("role") != "user":
                found.append(f"Invalid '{where}': {kind} parts are only allowed in user messages.")
            elif kind == "image_url":
                url = (part.get("image_url") or {}).get("url")
                problem = data_url_violation(f"{where}.image_url.url", url, OPENAI_IMAGE_TYPES)
                found += [problem] if problem else []
            elif kind == "file":
                file = part.get("file") or {}
                problem = data_url_violation(
                    f"{where}.file.file_data", file.get("file_data"), ("application/pdf",)
                )
                found += [problem] if problem else []
    return found


def chat_check(received: Received) -> Reply | None:
    """A ``FakeServer`` check: chat completions' 400 for a refused attachment."""
    if not received.path.endswith("/chat/completions") or not isinstance(received.body, dict):
        return None
    found = chat_attachment_violations(received.body)
    if not found:
        return None
    error = {"message": found[0], "type": "invalid_request_error", "param": None, "code": None}
    return Reply(400, {"error": error})
