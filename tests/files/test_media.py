"""The pure sniffing rules (app/domain/media.py): kinds, sizes, and what is refused."""

from __future__ import annotations

import pytest

from app.domain.media import Inspection, UnsupportedMedia, sniff
from tests.files import samples


@pytest.mark.parametrize(
    ("data", "name", "kind", "size"),
    [
        (samples.png(4, 3), "a.png", "image/png", (4, 3)),
        (samples.jpeg(640, 480), "a.jpg", "image/jpeg", (640, 480)),
        (samples.gif(2, 2), "a.gif", "image/gif", (2, 2)),
        (samples.webp(300, 200), "a.webp", "image/webp", (300, 200)),
        (samples.pdf(), "a.pdf", "application/pdf", (None, None)),
        ("héllo\tworld\n".encode(), "notes", "text/plain", (None, None)),
        (b"# Title\n", "readme.md", "text/markdown", (None, None)),
        (b"a,b\n1,2\n", "t.csv", "text/csv", (None, None)),
        (b"<div>hi</div>\n", "readme.md", "text/markdown", (None, None)),
    ],
)
def test_each_kind_is_read_from_its_bytes(
    data: bytes, name: str, kind: str, size: tuple[int | None, int | None]
) -> None:
    sniffed = sniff(data, name, None)
    assert (sniffed.media_type, (sniffed.width, sniffed.height)) == (kind, size)
    inspection = Inspection(sniffed)
    inspection.feed(data)
    inspection.finish(len(data))


@pytest.mark.parametrize(
    ("data", "name", "declared"),
    [
        (samples.png(), "report.pdf", None),  # a PNG named .pdf
        (samples.png(), "a.png", "application/pdf"),  # declared otherwise
        (samples.SVG, "a.svg", None),
        (samples.SVG, "image.txt", None),
        (samples.HTML, "page.txt", None),
        (samples.HTML, "page", "text/html"),
        (b"PK\x03\x04" + b"\x00" * 30, "a.zip", None),
        (b"\x00\x01\x02binary", "a.bin", None),
        (b"\xff\xfe not utf-8 \xc3", "a.txt", None),
        (samples.png(70_000, 70_000), "bomb.png", None),  # more pixels than allowed
        (samples.png(extra=b"Comment\x00<script>alert(1)</script>"), "a.png", None),
    ],
)
def test_what_the_bytes_contradict_or_hide_is_refused(
    data: bytes, name: str, declared: str | None
) -> None:
    with pytest.raises(UnsupportedMedia):
        sniffed = sniff(data, name, declared)
        inspection = Inspection(sniffed)
        inspection.feed(data)
        inspection.finish(len(data))


@pytest.mark.parametrize(
    "data",
    [
        samples.png() + samples.ZIP_END,  # a ZIP appended: a polyglot
        samples.pdf() + samples.ZIP_END,
        b"%PDF-1.7\n" + b"\x00junk" * 5000,  # a PDF header and then no PDF
        samples.png()[:-12],  # cut short
        samples.webp() + b"trailing",
    ],
)
def test_an_end_that_is_not_the_kinds_own_is_refused(data: bytes) -> None:
    sniffed = sniff(data, "file", None)
    inspection = Inspection(sniffed)
    inspection.feed(data)
    with pytest.raises(UnsupportedMedia):
        inspection.finish(len(data))


@pytest.mark.parametrize(
    ("name", "declared", "kind"),
    [
        ("t.csv", "application/vnd.ms-excel", "text/csv"),  # as Windows browsers send it
        ("data", "text/csv", "text/csv"),
        ("notes", "text/markdown; charset=utf-8", "text/markdown"),
        ("notes.txt", "application/octet-stream", "text/plain"),
    ],
)
def test_a_texts_kind_follows_its_extension_then_its_declared_type(
    name: str, declared: str, kind: str
) -> None:
    assert sniff(b"a,b\n", name, declared).media_type == kind
