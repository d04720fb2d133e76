"""Provider-format export inlines attachments as base64; import reads them back as inline files
to be stored; export → import → export is the same document."""

from __future__ import annotations

import base64

import pytest

from app.domain import (
    Attachment,
    ProviderFormatError,
    TextMessage,
    from_anthropic_format,
    from_openai_format,
    to_anthropic_format,
    to_openai_format,
)
from app.domain.inline_files import InlineFiles, with_stored_files
from app.providers.png import draw_png

PNG = draw_png(8, 4, "x")
PDF = b"%PDF-1.4\n%%EOF\n"
IMAGE = Attachment("f_img", "image/png", "image-1", len(PNG), 8, 4)
DOC = Attachment("f_pdf", "application/pdf", "report.pdf", len(PDF))
FILES = {"f_img": PNG, "f_pdf": PDF}


def stored(files: InlineFiles) -> tuple[dict[str, Attachment], dict[str, bytes]]:
    """What a store would do: keep each inline file under a new id."""
    ids: dict[str, Attachment] = {}
    blobs: dict[str, bytes] = {}
    for n, (placeholder, f) in enumerate(files.files.items()):
        new = Attachment(f"stored_{n}", f.media_type, f.name, len(f.data))
        ids[placeholder], blobs[new.file_id] = new, f.data
    return ids, blobs


def test_anthropic_export_import_export_is_identity() -> None:
    messages = [
        TextMessage("What is in these?", attachments=(IMAGE, DOC)),
        TextMessage("ok", "assistant"),
    ]
    first = to_anthropic_format(messages, files=FILES)
    assert first["messages"][0]["content"][0]["source"]["data"] == base64.b64encode(PNG).decode()
    files = InlineFiles()
    back = from_anthropic_format(first["system"], first["messages"], files=files)
    assert [f.media_type for f in files.files.values()] == ["image/png", "application/pdf"]
    ids, blobs = stored(files)
    again = with_stored_files(back, ids)
    assert again[0].attachments[1].name == "report.pdf"  # type: ignore[union-attr]
    assert to_anthropic_format(again, files=blobs) == first


def test_openai_export_import_export_is_identity() -> None:
    messages = [TextMessage("look", attachments=(IMAGE, DOC))]
    first = to_openai_format(messages, files=FILES)
    files = InlineFiles()
    back = from_openai_format(first, files=files)
    ids, blobs = stored(files)
    assert to_openai_format(with_stored_files(back, ids), files=blobs) == first


def test_inline_files_are_checked_against_their_bytes() -> None:
    lying = {
        "type": "image",
        "source": {
            "type": "base64",
            "media_type": "image/jpeg",
            "data": base64.b64encode(PNG).decode(),
        },
    }
    with pytest.raises(ProviderFormatError) as caught:
        from_anthropic_format(None, [{"role": "user", "content": [lying]}], files=InlineFiles())
    assert caught.value.loc == ("messages", 0, "content", 0, "source")
    remote = {
        "role": "user",
        "content": [{"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}],
    }
    with pytest.raises(ProviderFormatError, match="data: URL"):
        from_openai_format([remote], files=InlineFiles())
    with pytest.raises(ProviderFormatError, match="must be text or tool_result"):
        from_anthropic_format(None, [{"role": "user", "content": [lying]}])  # no place for files
