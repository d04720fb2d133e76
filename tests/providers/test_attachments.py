"""Attachments on the wire: each adapter, through the real SDK, sends an image and a PDF as its
API's blocks with the file's bytes in base64 and its media type, to fakes that refuse what the
real APIs refuse; what cannot be sent is a note; a run reads each file once."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from app.domain import (
    Attachment,
    ContentBlockStart,
    ConversationConfig,
    DefaultModelSelectionStrategy,
    LLMConversation,
    MemoryAttachments,
    MessageList,
    ModelAdapter,
    TextMessage,
)
from app.providers.anthropic_messages import AnthropicAdapter
from app.providers.offline import OfflineAdapter
from app.providers.openai_chat import OpenAIAdapter
from app.providers.openai_responses import OpenAIResponsesAdapter
from app.providers.png import draw_png

from . import wire
from .anthropic_rules import Registry, anthropic_violations, refusal
from .attachment_rules import (
    anthropic_attachment_violations,
    chat_attachment_violations,
    chat_check,
    responses_part_violation,
)
from .fake_server import FakeServer, Received, Reply
from .helpers import run
from .responses_rules import Issued, Violation, error_body, responses_violations

PNG = draw_png(64, 48, "cat")
PDF = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"
IMAGE = Attachment("file_img", "image/png", "cat.png", len(PNG), 64, 48)
DOC = Attachment("file_pdf", "application/pdf", "report.pdf", len(PDF))


class Store:
    """An AttachmentReader over a dict, counting its reads (a missing id raises KeyError)."""

    def __init__(self, **blobs: bytes) -> None:
        self.blobs = blobs
        self.reads: list[str] = []

    async def read(self, file_id: str) -> bytes:
        self.reads.append(file_id)
        return self.blobs[file_id]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def conv(
    adapter: ModelAdapter, store: Any, *messages: TextMessage, **config: Any
) -> LLMConversation:
    selector = DefaultModelSelectionStrategy([adapter], adapter.name)
    settings = ConversationConfig(model_selector=selector, attachments=store, **config)
    return LLMConversation(MessageList(messages), settings)


def anthropic_check(received: Received) -> Reply | None:
    found = anthropic_violations(received.body, Registry())
    return refusal(found[0]) if found else None


def responses_check(received: Received) -> Reply | None:
    found = responses_violations(received.body, Issued())
    return Reply(400, error_body(Violation(found[0]))) if found else None


def asked() -> TextMessage:
    return TextMessage("What is in these?", attachments=(IMAGE, DOC))


async def test_anthropic_sends_image_and_document_blocks(
    server: FakeServer, anthropic_adapter: AnthropicAdapter
) -> None:
    server.check = anthropic_check
    server.script(Reply(events=wire.an_text("A cat.")))
    store = Store(file_img=PNG, file_pdf=PDF)
    _events, error = await run(conv(anthropic_adapter, store, asked()))
    assert error is None
    (body,) = server.bodies
    content = body["messages"][0]["content"]  # less the prompt cache's breakpoint
    assert [{k: v for k, v in b.items() if k != "cache_control"} for b in content] == [
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": b64(PNG)},
        },
        {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": b64(PDF)},
            "title": "report.pdf",
        },
        {"type": "text", "text": "What is in these?"},
    ]


async def test_responses_sends_input_image_and_input_file(
    server: FakeServer, responses_adapter: OpenAIResponsesAdapter
) -> None:
    server.check = responses_check
    server.script(Reply(events=wire.rs_text("A cat.")))
    _events, error = await run(conv(responses_adapter, Store(file_img=PNG, file_pdf=PDF), asked()))
    assert error is None
    (body,) = server.bodies
    assert body["input"][0] == {
        "type": "message",
        "role": "user",
        "content": [
            {"type": "input_text", "text": "What is in these?"},
            {
                "type": "input_image",
                "image_url": f"data:image/png;base64,{b64(PNG)}",
                "detail": "auto",
            },
            {
                "type": "input_file",
                "filename": "report.pdf",
                "file_data": f"data:application/pdf;base64,{b64(PDF)}",
            },
        ],
    }


async def test_chat_sends_image_url_and_file(
    server: FakeServer, openai_adapter: OpenAIAdapter
) -> None:
    server.check = chat_check
    server.script(Reply(events=wire.oa_text("A cat.")))
    _events, error = await run(conv(openai_adapter, Store(file_img=PNG, file_pdf=PDF), asked()))
    assert error is None
    (body,) = server.bodies
    assert body["messages"][0] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "What is in these?"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64(PNG)}"}},
            {
                "type": "file",
                "file": {
                    "filename": "report.pdf",
                    "file_data": f"data:application/pdf;base64,{b64(PDF)}",
                },
            },
        ],
    }


async def test_what_cannot_be_sent_is_a_note_and_the_run_goes_on(
    server: FakeServer, anthropic_adapter: AnthropicAdapter
) -> None:
    big = PNG + b"\0" * (6 * 1024 * 1024)  # still a PNG, over Anthropic's 5 MB
    attachments = (
        Attachment("file_big", "image/png", "huge.png", len(big), 64, 48),
        Attachment("file_gone", "image/png", "gone.png", 2_100_000, 10, 10),
        Attachment("file_zip", "application/zip", "a.zip", 1200),
        Attachment("file_txt", "text/plain", "notes.txt", 11),
    )
    server.check = anthropic_check
    server.script(Reply(events=wire.an_text("ok")))
    store = Store(file_big=big, file_zip=b"PK\3\4", file_txt=b"hello notes")
    _events, error = await run(
        conv(anthropic_adapter, store, TextMessage("see", attachments=attachments))
    )
    assert error is None
    texts = [b["text"] for b in server.bodies[0]["messages"][0]["content"]]
    assert texts == [
        "[attached: huge.png, 6.3 MB, too large for this model]",
        "[attached: gone.png, 2.1 MB, its content could not be read]",
        "[attached: a.zip, 1 KB, not readable by this model]",
        "[file: notes.txt]\nhello notes",
        "see",
    ]


async def test_a_run_reads_each_file_once_across_its_requests(
    server: FakeServer, anthropic_adapter: AnthropicAdapter
) -> None:
    def get_weather(city: str) -> str:
        """Weather in a city."""
        return "sunny"

    server.check = anthropic_check
    server.script(
        Reply(
            events=[
                wire.an_start(),
                *wire.an_tool_block(0, "toolu_1", "get_weather", '{"city": "Paris"}'),
                *wire.an_stop("tool_use"),
            ]
        ),
        Reply(events=wire.an_text("Sunny.")),
    )
    store = Store(file_img=PNG, file_pdf=PDF)
    _events, error = await run(conv(anthropic_adapter, store, asked(), tools=[get_weather]))
    assert error is None
    assert len(server.bodies) == 2
    for body in server.bodies:  # both requests carry the image, read once
        assert body["messages"][0]["content"][0]["source"]["data"] == b64(PNG)
    assert sorted(store.reads) == ["file_img", "file_pdf"]


@pytest.mark.parametrize("provider", ["anthropic", "responses", "chat"])
async def test_the_fakes_refuse_a_media_type_that_does_not_match_the_bytes(
    provider: str,
    server: FakeServer,
    anthropic_adapter: AnthropicAdapter,
    responses_adapter: OpenAIResponsesAdapter,
    openai_adapter: OpenAIAdapter,
) -> None:
    adapters: dict[str, tuple[ModelAdapter, Any]] = {
        "anthropic": (anthropic_adapter, anthropic_check),
        "responses": (responses_adapter, responses_check),
        "chat": (openai_adapter, chat_check),
    }
    adapter, check = adapters[provider]
    server.check = check
    lying = Attachment("file_img", "image/jpeg", "cat.jpg", len(PNG))
    _events, error = await run(
        conv(adapter, Store(file_img=PNG), TextMessage("?", attachments=(lying,)))
    )
    assert error is not None and error.code == "invalid_request"
    assert "image/jpeg" in error.detail


def test_anthropic_refuses_bad_base64_big_images_and_other_documents() -> None:
    def body(block: dict[str, Any]) -> dict[str, Any]:
        return {"messages": [{"role": "user", "content": [block]}]}

    def image(data: str, media_type: str = "image/png") -> dict[str, Any]:
        return {
            "type": "image",
            "source": {"type": "base64", "media_type": media_type, "data": data},
        }

    assert anthropic_attachment_violations(body(image(b64(PNG)))) == []
    assert "invalid base64" in anthropic_attachment_violations(body(image("not base64!")))[0]
    over = anthropic_attachment_violations(body(image(b64(PNG + b"\0" * (5 << 20)))))
    assert "exceeds 5 MB maximum" in over[0]
    wide = anthropic_attachment_violations(body(image(b64(draw_png(8001, 1)))))
    assert "exceed max allowed size: 8000 pixels" in wide[0]
    text_doc = {
        "type": "document",
        "source": {"type": "base64", "media_type": "text/csv", "data": b64(b"a,b")},
    }
    assert "Input should be 'application/pdf'" in anthropic_attachment_violations(body(text_doc))[0]
    svg = image(b64(b"<svg/>"), "image/svg+xml")
    assert "media_type: Input should be" in anthropic_attachment_violations(body(svg))[0]


def test_openai_refuses_bad_data_urls_and_non_pdf_files() -> None:
    good = {"type": "input_image", "image_url": f"data:image/png;base64,{b64(PNG)}"}
    assert responses_part_violation("input[0].content[0]", good) is None
    bad = {"type": "input_image", "image_url": "data:image/png;base64,@@@"}
    assert "could not be decoded" in str(responses_part_violation("x", bad))
    csv = {
        "type": "input_file",
        "filename": "a.csv",
        "file_data": f"data:text/csv;base64,{b64(b'a')}",
    }
    assert "Invalid MIME type 'text/csv'" in str(responses_part_violation("x", csv))
    lying = {"type": "image_url", "image_url": {"url": f"data:image/gif;base64,{b64(PNG)}"}}
    found = chat_attachment_violations({"messages": [{"role": "user", "content": [lying]}]})
    assert "not a valid image/gif" in found[0]


async def test_the_offline_model_describes_what_it_received() -> None:
    photo = draw_png(640, 480, "cat")
    image = Attachment("file_cat", "image/png", "cat.png", len(photo))  # no size given: read
    store = Store(file_cat=photo, file_pdf=PDF)
    message = TextMessage("What is this?", attachments=(image, DOC))
    events, error = await run(conv(OfflineAdapter(), store, message))
    assert error is None
    reply = events[-1].message  # type: ignore[union-attr]
    assert reply.text == (
        f"[image: cat.png, image/png, 640×480] [file: report.pdf, application/pdf, {len(PDF)} B]\n"
        "What is this?"
    )


async def test_responses_image_generation_is_stored_and_referenced(
    server: FakeServer, responses_adapter: OpenAIResponsesAdapter
) -> None:
    drawn = draw_png(32, 16, "sunset")
    item = {
        "id": "ig_1",
        "type": "image_generation_call",
        "status": "completed",
        "output_format": "png",
        "result": b64(drawn),
    }
    server.check = responses_check
    server.script(
        Reply(
            events=[
                *wire.rs_created(),
                wire.rs_event("response.output_item.done", output_index=0, item=item),
                *wire.rs_message(1, "msg_1", "Here it is."),
                wire.rs_completed(),
            ]
        )
    )
    store = MemoryAttachments()
    conversation = conv(
        responses_adapter, store, TextMessage("draw a sunset"), image_generation="auto"
    )
    events, error = await run(conversation)
    assert error is None
    (body,) = server.bodies
    assert {"type": "image_generation"} in body["tools"] and "tool_choice" not in body
    starts = [e for e in events if isinstance(e, ContentBlockStart) and e.type == "image"]
    final = conversation.messages[-1]
    assert isinstance(final, TextMessage) and final.text == "Here it is."
    assert [s.attachment for s in starts] == list(final.attachments)
    (image,) = final.attachments
    assert (image.media_type, image.width, image.height) == ("image/png", 32, 16)
    assert store.files[image.file_id] == drawn
