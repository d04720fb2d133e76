"""Small files of each accepted kind, and hostile ones, made here byte by byte."""

from __future__ import annotations

import os
import struct
import zlib


def png(width: int = 4, height: int = 3, extra: bytes = b"") -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    # a header past a few thousand pixels keeps a tiny body (a decompression bomb's header)
    rows = (
        b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
        if width * height < 10**6
        else b"\x00"
    )
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + (chunk(b"tEXt", extra) if extra else b"")
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def jpeg(width: int = 640, height: int = 480, padding: int = 0) -> bytes:
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    sof = b"\xff\xc0" + struct.pack(">HBHHB", 17, 8, height, width, 3) + b"\x01\x11\x00" * 3
    scan = b"\xff\xda" + struct.pack(">H", 8) + b"\x01\x01\x00\x00\x3f\x00"
    return (
        b"\xff\xd8"
        + app0
        + sof
        + scan
        + os.urandom(padding).replace(b"\xff", b"\x00")
        + b"\xff\xd9"
    )


def gif(width: int = 2, height: int = 2) -> bytes:
    return (
        b"GIF89a"
        + struct.pack("<HHBBB", width, height, 0, 0, 0)
        + b"\x2c\x00\x00\x00\x00"
        + struct.pack("<HH", width, height)
        + b"\x00\x02\x02\x44\x01\x00;"
    )


def webp(width: int = 300, height: int = 200) -> bytes:
    vp8x = b"VP8X" + struct.pack("<I", 10) + b"\x00\x00\x00\x00"
    vp8x += (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
    body = b"WEBP" + vp8x
    return b"RIFF" + struct.pack("<I", len(body)) + body


def pdf(size: int = 2048) -> bytes:
    head = b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<< /Type /Catalog >>\nendobj\nstream\n"
    tail = b"\nendstream\ntrailer\n<< /Root 1 0 R >>\n%%EOF\n"
    filler = os.urandom(max(0, size - len(head) - len(tail)))
    return head + filler.replace(b"PK", b"pk") + tail


SVG = (
    b'<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'
)
HTML = b"<!DOCTYPE html><html><body><script>alert(document.cookie)</script></body></html>"
ZIP_END = b"PK\x05\x06" + b"\x00" * 18
