"""Attachments in the domain: messages carry references (never bytes), documents holding them are
version "1.2" (older ones still read), bad references name their place, and they count in the
context with their message."""

from __future__ import annotations

import asyncio
import json

import pytest

from app.domain import (
    ATTACHMENTS_FORMAT_VERSION,
    Attachment,
    LLMPromptBuilder,
    MemoryAttachments,
    MessageList,
    MessageListDeserializationError,
    ReasoningMessage,
    RunAttachments,
    TextMessage,
    ToolCallMessage,
    context_within,
)
from app.domain.attachments import anthropic_image_tokens, image_size, openai_image_tokens
from app.domain.context import count_message_tokens

IMAGE = Attachment("file_1", "image/png", "cat.png", 2048, 640, 480)
DOC = Attachment("file_2", "application/pdf", "report.pdf", 2_100_000)


def test_a_document_with_attachments_is_version_1_2_and_holds_references_only() -> None:
    messages = MessageList(
        [
            TextMessage("What is this?", attachments=(IMAGE, DOC)),
            ToolCallMessage("shot", "c1", result="ok", attachments=(IMAGE,)),
        ]
    )
    data = messages.to_dict()
    assert data["version"] == ATTACHMENTS_FORMAT_VERSION == "1.2"
    assert data["messages"][0]["attachments"] == [
        {
            "file_id": "file_1",
            "media_type": "image/png",
            "name": "cat.png",
            "size": 2048,
            "width": 640,
            "height": 480,
        },
        {
            "file_id": "file_2",
            "media_type": "application/pdf",
            "name": "report.pdf",
            "size": 2_100_000,
        },
    ]
    assert MessageList.from_dict(json.loads(json.dumps(data))) == messages


def test_older_documents_still_read_and_write_as_before() -> None:
    plain = {"version": "1.0", "messages": [{"type": "TextMessage", "text": "hi", "role": "user"}]}
    assert MessageList.from_dict(plain).to_dict() == plain
    reasoning = MessageList([ReasoningMessage("hm", "offline"), TextMessage("hi")])
    assert reasoning.to_dict()["version"] == "1.1"
    assert "attachments" not in json.dumps(reasoning.to_dict())


@pytest.mark.parametrize(
    ("item", "error"),
    [
        ({"media_type": "image/png"}, r"messages\[0\]\.attachments\[0\]\.file_id"),
        ({"file_id": "f", "media_type": "image/png", "size": -1}, r"attachments\[0\]\.size"),
        ({"file_id": "f", "media_type": ""}, r"attachments\[0\]\.media_type"),
        ("f", r"attachments\[0\]: must be an object"),
    ],
)
def test_a_bad_reference_names_its_place(item: object, error: str) -> None:
    data = {
        "version": "1.2",
        "messages": [{"type": "TextMessage", "text": "", "role": "user", "attachments": [item]}],
    }
    with pytest.raises(MessageListDeserializationError, match=error):
        MessageList.from_dict(data)


def test_attachments_count_by_the_providers_rules_and_stay_with_their_message() -> None:
    assert anthropic_image_tokens(1000, 1000) == 1334
    assert openai_image_tokens(1024, 1024) == 765  # OpenAI's own worked example
    plain, with_image = TextMessage("look"), TextMessage("look", attachments=(IMAGE,))
    assert count_message_tokens(with_image) == count_message_tokens(plain) + 410
    messages = [TextMessage("old " * 100), with_image, TextMessage("and?")]
    window = context_within(messages, count_message_tokens(with_image) + 10)
    assert window.indices == (1, 2) or window.indices == (2,)
    assert all(m.attachments == (IMAGE,) for m in window if m.text == "look")


def test_a_run_reads_each_file_once_and_keeps_within_its_bound() -> None:
    reads: list[str] = []

    class Reader:
        async def read(self, file_id: str) -> bytes:
            reads.append(file_id)
            if file_id == "gone":
                raise KeyError(file_id)
            return b"x" * 600

    files = RunAttachments(Reader(), max_bytes=1000)
    small = Attachment("a", "image/png", "a.png", 600)
    other = Attachment("b", "image/png", "b.png", 600)
    gone = Attachment("gone", "image/png", "g.png", 1)

    async def twice() -> None:
        for _ in range(2):
            found = await files.load([small, other, gone])
            assert set(found) == {"a", "b"}

    asyncio.run(twice())
    assert reads == ["a", "b", "gone", "b"]  # "b" did not fit in 1000 bytes: read again


def test_prompt_for_image_runs_through_the_conversation_with_the_offline_model(
    llm: LLMPromptBuilder,
) -> None:
    builder = llm.request("a cat on a mat")
    image = asyncio.run(builder.prompt_for_image())
    assert image.media_type == "image/png" and image.data.startswith(b"\x89PNG")
    assert image_size(image.data) == (64, 64) == (image.attachment.width, image.attachment.height)

    store = MemoryAttachments()
    conversation = builder.prompt_conversation(attachments=store)
    continued = conversation.continuation.request("another")
    again = asyncio.run(continued.prompt_for_image())
    final = conversation.messages[-1]
    assert isinstance(final, TextMessage) and final.attachments == (again.attachment,)
    assert store.files[again.attachment.file_id] == again.data  # in the conversation's store
    assert conversation.config.image_generation is None  # offered for that one run only
    assert asyncio.run(conversation.continuation.request("plain").prompt()) == "plain"
