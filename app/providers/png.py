"""A small PNG encoder (standard library: zlib, struct) for the images the offline model draws.

Imports only the standard library.
"""

from __future__ import annotations

import struct
import zlib


def _chunk(kind: bytes, data: bytes) -> bytes:
    crc = zlib.crc32(kind + data) & 0xFFFFFFFF
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)


def draw_png(width: int, height: int, seed: str = "") -> bytes:
    """An RGB PNG of ``width`` × ``height``: a diagonal gradient tinted by ``seed``'s hash, so
    two prompts draw two different pictures and one prompt always the same one."""
    tint = zlib.crc32(seed.encode("utf-8"))
    r0, g0, b0 = tint & 0xFF, (tint >> 8) & 0xFF, (tint >> 16) & 0xFF
    rows = bytearray()
    for y in range(height):
        rows.append(0)  # filter: none
        for x in range(width):
            shade = (x + y) * 255 // max(width + height - 2, 1)
            rows += bytes(
                ((r0 + shade) & 0xFF, (g0 + shade // 2) & 0xFF, (b0 + 255 - shade) & 0xFF)
            )
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(bytes(rows), 9))
        + _chunk(b"IEND", b"")
    )
