"""What a file is, read from its bytes: the accepted kinds, their magic numbers, an image's
size from its header, and the checks that refuse markup, polyglots and truncated files.

Imports only the standard library. Pure: the storage layer feeds it the bytes as they stream.
``sniff`` names the kind from the first bytes (``SNIFF_BYTES``) and the file's name and declared
type; a ``Inspection`` then sees every chunk (``feed``) and the end (``finish``). Each refusal is
an ``UnsupportedMedia`` saying why in a sentence.
"""

from __future__ import annotations

import codecs
import struct
from dataclasses import dataclass

PNG, JPEG, GIF, WEBP = "image/png", "image/jpeg", "image/gif", "image/webp"
PDF, TEXT, MARKDOWN, CSV = "application/pdf", "text/plain", "text/markdown", "text/csv"
IMAGE_TYPES = frozenset({PNG, JPEG, GIF, WEBP})
TEXT_TYPES = frozenset({TEXT, MARKDOWN, CSV})
DOCUMENT_TYPES = frozenset({PDF, *TEXT_TYPES})
ACCEPTED_TYPES = IMAGE_TYPES | DOCUMENT_TYPES

SNIFF_BYTES = 1 << 20
"""How much of the start a kind is read from (a JPEG's size follows its EXIF and ICC segments)."""
MAX_IMAGE_PIXELS = 100_000_000
"""An image declaring more pixels than this (10,000 × 10,000) is refused: a decompression bomb."""
ZIP_TAIL = 65_535 + 22  # a ZIP's end record sits in its last 64 KiB (the comment, then 22 bytes)
PDF_EOF_TAIL = 1024  # readers look for %%EOF in the last KiB
MARKUP_HEAD = 1024  # browsers sniff markup in the first 512 bytes; twice that is checked

EXTENSIONS: dict[str, str] = {
    ".png": PNG,
    ".jpg": JPEG,
    ".jpeg": JPEG,
    ".jpe": JPEG,
    ".jfif": JPEG,
    ".gif": GIF,
    ".webp": WEBP,
    ".pdf": PDF,
    ".txt": TEXT,
    ".text": TEXT,
    ".log": TEXT,
    ".md": MARKDOWN,
    ".markdown": MARKDOWN,
    ".csv": CSV,
}
REFUSED_EXTENSIONS = frozenset(
    {".svg", ".svgz", ".html", ".htm", ".xhtml", ".xht", ".shtml", ".xml", ".js", ".mjs"}
)
_ALIASES: dict[str, frozenset[str]] = {
    PNG: frozenset({PNG, "image/x-png"}),
    JPEG: frozenset({JPEG, "image/jpg", "image/pjpeg"}),
    GIF: frozenset({GIF}),
    WEBP: frozenset({WEBP}),
    PDF: frozenset({PDF, "application/x-pdf"}),
}
# Windows browsers declare a .csv as Excel's type
_CSV_DECLARED = frozenset({CSV, "application/csv", "text/x-csv", "application/vnd.ms-excel"})
_TEXT_DECLARED = frozenset({TEXT, MARKDOWN, "text/x-markdown"}) | _CSV_DECLARED
_UNDECLARED = frozenset({"", "application/octet-stream", "binary/octet-stream"})
# Markup a browser would render: refused at the start of any text, and anywhere in an image.
_MARKUP = (b"<!doctype html", b"<html", b"<svg", b"<?xml", b"<script", b"<iframe")
# What also makes a plain text or CSV file HTML to a sniffing browser (Markdown may start so).
_HTML_START = (b"<head", b"<body", b"<!--", b"<div", b"<style", b"<title", b"<table", b"<a ")
_IMAGE_MARKUP = (b"<script", b"<html", b"<svg", b"<iframe", b"<?php")
_TEXT_CONTROLS = frozenset(range(32)) - {9, 10, 12, 13}


class UnsupportedMedia(ValueError):
    """Bytes that are none of the accepted kinds, or contradict their name or declared type."""


@dataclass(frozen=True, slots=True)
class Sniffed:
    """The kind a file's bytes are, and an image's size in pixels."""

    media_type: str
    width: int | None = None
    height: int | None = None

    @property
    def is_image(self) -> bool:
        return self.media_type in IMAGE_TYPES


def extension(name: str) -> str:
    """The lower-case extension of a file name (``".png"``), empty if none."""
    base = name.rsplit("/", 1)[-1].rsplit("\\", 1)[-1]
    stem, dot, ext = base.rpartition(".")
    return f".{ext.lower()}" if dot and stem else ""


def magic_type(head: bytes) -> str | None:
    """The binary kind the first bytes announce, or None."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return PNG
    if head.startswith(b"\xff\xd8\xff"):
        return JPEG
    if head.startswith((b"GIF87a", b"GIF89a")):
        return GIF
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return WEBP
    if head.startswith(b"%PDF-"):
        return PDF
    return None


def sniff(head: bytes, name: str, declared: str | None = None) -> Sniffed:
    """The kind of a file that starts with ``head`` (its first ``SNIFF_BYTES``, or all of it),
    checked against its name's extension and its declared media type."""
    ext = extension(name)
    declared_type = (declared or "").partition(";")[0].strip().lower()
    if ext in REFUSED_EXTENSIONS:
        raise UnsupportedMedia(f"{ext} files are not accepted (markup a browser would run)")
    kind = magic_type(head)
    if kind is None:
        kind = _text_kind(head, ext, declared_type)
    elif declared_type not in _UNDECLARED and declared_type not in _ALIASES[kind]:
        raise UnsupportedMedia(f"the bytes are {kind}, not the declared {declared_type}")
    named = EXTENSIONS.get(ext)
    if named is not None and named != kind and not (named in TEXT_TYPES and kind in TEXT_TYPES):
        raise UnsupportedMedia(f"the bytes are {kind}, but the name ends in {ext}")
    if kind in IMAGE_TYPES:
        width, height = image_size(kind, head)
        _check_markup(head[:MARKUP_HEAD], _MARKUP, kind)
        return Sniffed(kind, width, height)
    if kind == PDF:
        _check_markup(head[:MARKUP_HEAD], _MARKUP, kind)
    return Sniffed(kind)


def _text_kind(head: bytes, ext: str, declared: str) -> str:
    if declared not in _UNDECLARED and declared not in _TEXT_DECLARED:
        raise UnsupportedMedia(
            f"the bytes are no accepted kind (declared {declared}): PNG, JPEG, GIF, WebP, PDF, "
            "or UTF-8 text"
        )
    reason = text_problem(codecs.getincrementaldecoder("utf-8")(), head, final=False)
    if reason is not None:
        raise UnsupportedMedia(
            f"the bytes are no accepted kind (PNG, JPEG, GIF, WebP, PDF, or UTF-8 text): {reason}"
        )
    named = EXTENSIONS.get(ext)
    kind = named if named in TEXT_TYPES else None
    if kind is None:
        kind = {"text/x-markdown": MARKDOWN, MARKDOWN: MARKDOWN}.get(declared)
    if kind is None and declared in _CSV_DECLARED:
        kind = CSV
    kind = kind or TEXT
    start = head.lstrip(b"\xef\xbb\xbf").lstrip()[:64].lower()
    html = _MARKUP if kind == MARKDOWN else _MARKUP + _HTML_START
    if start.startswith(html):
        raise UnsupportedMedia("the text is HTML, SVG or XML markup, which is not accepted")
    return kind


def text_problem(decoder: codecs.IncrementalDecoder, chunk: bytes, *, final: bool) -> str | None:
    """Why ``chunk`` (the next bytes of a text) is not accepted text, or None."""
    try:
        text = decoder.decode(chunk, final)
    except UnicodeDecodeError:
        return "it is not valid UTF-8"
    if any(ord(c) in _TEXT_CONTROLS for c in text) or "\x7f" in text:
        return "it holds NUL or control characters"
    return None


def _check_markup(data: bytes, markers: tuple[bytes, ...], kind: str) -> None:
    lowered = data.lower()
    for marker in markers:
        if marker in lowered:
            raise UnsupportedMedia(
                f"the {kind} file holds {marker.decode()}…: a polyglot, not accepted"
            )


# --- image sizes from their headers -------------------------------------------------------------


def image_size(kind: str, head: bytes) -> tuple[int, int]:
    """An image's width and height in pixels, from its header."""
    try:
        if kind == PNG:
            if head[12:16] != b"IHDR":
                raise UnsupportedMedia("the PNG has no IHDR header")
            width, height = struct.unpack(">II", head[16:24])
        elif kind == GIF:
            width, height = struct.unpack("<HH", head[6:10])
        elif kind == WEBP:
            width, height = _webp_size(head)
        else:
            width, height = _jpeg_size(head)
    except struct.error:
        raise UnsupportedMedia(f"the {kind} header is cut short") from None
    if width < 1 or height < 1 or width * height > MAX_IMAGE_PIXELS:
        raise UnsupportedMedia(
            f"the {kind} declares {width}×{height} pixels (at most {MAX_IMAGE_PIXELS:,})"
        )
    return width, height


def _webp_size(head: bytes) -> tuple[int, int]:
    chunk = head[12:16]
    if chunk == b"VP8 " and head[23:26] == b"\x9d\x01\x2a":
        width, height = struct.unpack("<HH", head[26:30])
        return width & 0x3FFF, height & 0x3FFF
    if chunk == b"VP8L" and head[20:21] == b"\x2f":
        (bits,) = struct.unpack("<I", head[21:25])
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X":
        width = int.from_bytes(head[24:27], "little") + 1
        height = int.from_bytes(head[27:30], "little") + 1
        return width, height
    raise UnsupportedMedia("the WebP header is none of VP8, VP8L or VP8X")


_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def _jpeg_size(head: bytes) -> tuple[int, int]:
    """The size in the JPEG's frame header (SOFn), walking the segments before it."""
    at = 2
    while at + 4 <= len(head):
        if head[at] != 0xFF:
            raise UnsupportedMedia("the JPEG's segments do not read")
        marker = head[at + 1]
        if marker == 0xFF:  # fill byte
            at += 1
            continue
        if marker in (0x01, *range(0xD0, 0xD8)):  # standalone markers
            at += 2
            continue
        (length,) = struct.unpack(">H", head[at + 2 : at + 4])
        if marker in _SOF:
            height, width = struct.unpack(">HH", head[at + 5 : at + 9])
            return width, height
        if marker == 0xDA or length < 2:
            break
        at += 2 + length
    raise UnsupportedMedia(f"the JPEG's frame header is not in its first {SNIFF_BYTES} bytes")


# --- the whole stream ---------------------------------------------------------------------------


class Inspection:
    """Checks on every byte of a file whose kind ``sniff`` named: text stays UTF-8 without
    controls, an image holds no markup, and the end is the kind's own (no ZIP or other file
    appended: a polyglot)."""

    def __init__(self, sniffed: Sniffed) -> None:
        self.kind = sniffed.media_type
        self._decoder = codecs.getincrementaldecoder("utf-8")() if self.kind in TEXT_TYPES else None
        self._carry = b""  # the last bytes of the previous chunk, for a marker split across
        self._tail = b""
        self._head = b""

    def feed(self, chunk: bytes) -> None:
        """The next bytes of the file (any size)."""
        if not self._head:
            self._head = chunk[:32]
        if self._decoder is not None:
            reason = text_problem(self._decoder, chunk, final=False)
            if reason is not None:
                raise UnsupportedMedia(f"the text is not accepted: {reason}")
        elif self.kind in IMAGE_TYPES:
            _check_markup(self._carry + chunk, _IMAGE_MARKUP, self.kind)
            self._carry = chunk[-16:]
        self._tail = (self._tail + chunk)[-ZIP_TAIL:]

    def finish(self, size: int) -> None:
        """The file ended after ``size`` bytes: its end must be its kind's."""
        if self._decoder is not None:
            reason = text_problem(self._decoder, b"", final=True)
            if reason is not None:
                raise UnsupportedMedia(f"the text is not accepted: {reason}")
            return
        if b"PK\x05\x06" in self._tail:
            raise UnsupportedMedia(f"a ZIP archive is appended to the {self.kind}: a polyglot")
        ends = {
            PNG: self._tail.endswith(b"IEND\xaeB`\x82"),
            GIF: self._tail.endswith(b";"),
            JPEG: self._tail.rstrip(b"\x00").endswith(b"\xff\xd9"),
            WEBP: struct.unpack("<I", self._head[4:8])[0] + 8 == size,
            PDF: b"%%EOF" in self._tail[-PDF_EOF_TAIL:],
        }
        if not ends[self.kind]:
            raise UnsupportedMedia(
                f"the {self.kind} does not end as one does: cut short, or other data appended"
            )
