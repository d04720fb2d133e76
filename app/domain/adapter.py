"""The model interface (seed 004): the ModelAdapter protocol and the StreamChunk variants.

Imports only the standard library. Implementations live in ``app.providers``; the conversation
runs against this protocol and never sees a vendor type.

A stream is: for each content block ``ContentBlockStart`` (its ``type``: ``text`` or
``reasoning``), ``ContentBlockDelta``…, ``ContentBlockStop``; an image the model made is one
``ImageDone`` with its bytes (the run stores it as a file and passes on an ``image`` block,
``ContentBlockStart`` with its ``attachment``, and its stop); after a reasoning block's stop, one
``ReasoningDone`` with its whole text and the provider's opaque payload; a ``ToolUse`` per call
once its arguments are complete; and last one ``MessageStop`` with the stop reason and usage.
Block indices are unique within one reply. A stream that cannot finish raises ``ProviderError``.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

from app.domain.attachments import Attachment, RunAttachments
from app.domain.messages import Message

BlockType = Literal["text", "reasoning", "image"]
ImageGeneration = Literal["auto", "required"]
"""Whether a request offers the model its image tool (``auto``) or asks it for an image."""


@dataclass(frozen=True)
class ContentBlockStart:
    """A content block begins: the reply's ``text``, or the model's ``reasoning``."""

    index: int = 0
    type: BlockType = "text"
    attachment: Attachment | None = None
    """An ``image`` block's stored file (the run sets it: adapters yield ``ImageDone``)."""
    kind: ClassVar[Literal["content_block_start"]] = "content_block_start"


@dataclass(frozen=True)
class ContentBlockDelta:
    """A piece of text of the current block."""

    delta: str
    index: int = 0
    kind: ClassVar[Literal["content_block_delta"]] = "content_block_delta"


@dataclass(frozen=True)
class ContentBlockStop:
    """The current content block ends."""

    index: int = 0
    kind: ClassVar[Literal["content_block_stop"]] = "content_block_stop"


@dataclass(frozen=True)
class ReasoningDone:
    """A reasoning block is complete: its whole visible text and the provider's opaque
    ``payload`` (what must go back to it, exactly; None when nothing can)."""

    text: str
    payload: dict[str, Any] | None
    index: int = 0
    kind: ClassVar[Literal["reasoning_done"]] = "reasoning_done"


@dataclass(frozen=True)
class ImageDone:
    """The model made an image: its bytes and media type (the run stores them as a file)."""

    data: bytes
    media_type: str = "image/png"
    index: int = 0
    kind: ClassVar[Literal["image_done"]] = "image_done"


def new_tool_call_id() -> str:
    """A fresh id for a tool call whose provider gave none."""
    return f"call_{uuid.uuid4().hex[:24]}"


@dataclass(frozen=True)
class ToolUse:
    """The model calls a tool; ``params`` are the complete arguments.

    ``id`` is the provider's id for the call; seed 004's ``ToolUse { tool_name, params }``
    has none, so one is made when it is not given.
    """

    tool_name: str
    params: dict[str, Any]
    id: str = field(default_factory=new_tool_call_id)
    kind: ClassVar[Literal["tool_use"]] = "tool_use"


@dataclass(frozen=True)
class Usage:
    """Tokens the provider counted for one model reply, by kind (None: it did not say).

    ``input_tokens`` is every token of the request, ``cache_read_tokens`` and
    ``cache_write_tokens`` the parts of it read from and written to the provider's prompt
    cache; ``output_tokens`` is every token of the reply, ``reasoning_tokens`` the part of it
    spent reasoning.
    """

    input_tokens: int | None = None
    output_tokens: int | None = None
    reasoning_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None

    KINDS: ClassVar[tuple[str, ...]] = (
        "input_tokens",
        "output_tokens",
        "reasoning_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
    )
    """The field names, in the order every usage object lists them."""

    def as_dict(self) -> dict[str, int | None]:
        """The counts by kind, in ``KINDS`` order."""
        return {kind: getattr(self, kind) for kind in self.KINDS}


@dataclass(frozen=True)
class MessageStop:
    """The model's reply ends. ``stop_reason``: ``end_turn``, ``tool_use``, ``max_tokens``…"""

    stop_reason: str = "end_turn"
    usage: Usage = field(default_factory=Usage)
    kind: ClassVar[Literal["message_stop"]] = "message_stop"


StreamChunk = (
    ContentBlockStart
    | ContentBlockDelta
    | ContentBlockStop
    | ReasoningDone
    | ImageDone
    | ToolUse
    | MessageStop
)


@dataclass(frozen=True)
class ToolSpec:
    """What a model is told about a tool: name, description, JSON-schema parameters."""

    name: str
    description: str
    parameters: dict[str, Any]


Effort = Literal["none", "low", "medium", "high"]
EFFORTS: tuple[Effort, ...] = ("none", "low", "medium", "high")
Summary = Literal["auto", "none"]
SUMMARIES: tuple[Summary, ...] = ("auto", "none")


@dataclass(frozen=True)
class Reasoning:
    """How much the model should reason (``config.reasoning``); None in a field: the
    provider's default. Each adapter maps it (docs/providers.md)."""

    effort: Effort | None = None
    budget_tokens: int | None = None
    summary: Summary | None = None

    @property
    def off(self) -> bool:
        """Reasoning is asked to be off (``effort: none``)."""
        return self.effort == "none"

    @property
    def on(self) -> bool:
        """Reasoning is asked for: an effort other than ``none``, or a budget."""
        return self.effort not in (None, "none") or (
            self.budget_tokens is not None and self.effort is None
        )


@dataclass(frozen=True)
class RequestOptions:
    """Per-request model settings taken from the conversation's config."""

    model: str | None = None
    temperature: float | None = None
    max_output_tokens: int | None = None
    reasoning: Reasoning | None = None
    cache_key: str | None = None
    """Groups the requests of one conversation for a provider's prompt cache (OpenAI's
    ``prompt_cache_key``); None: not sent."""
    image_generation: ImageGeneration | None = None
    """Offer the model its image tool (OpenAI Responses' ``image_generation``; the offline
    model draws), or require an image (``prompt_for_image``); None: no images."""
    attachments: RunAttachments | None = None
    """Where the adapter reads the bytes of the messages' attachments (the run's, read once
    per run); None: nothing to read them from, each attachment is sent as a note."""


DEFAULT_OPTIONS = RequestOptions()
"""The options of a request that names none (seed 004's send_message takes messages and tools)."""


@dataclass(frozen=True)
class ModelResponse:
    """A whole (non-streamed) model reply."""

    text: str = ""
    tool_calls: tuple[ToolUse, ...] = ()
    stop_reason: str = "end_turn"
    usage: Usage = field(default_factory=Usage)
    reasoning: tuple[ReasoningDone, ...] = ()
    images: tuple[ImageDone, ...] = ()


@runtime_checkable
class ModelAdapter(Protocol):
    """A model provider behind one interface (seed 004)."""

    name: str
    """The provider's name in a conversation's config: ``openai``, ``anthropic``, ``offline``."""

    default_model: str
    """The model used when the conversation names none."""

    async def send_message(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        options: RequestOptions = DEFAULT_OPTIONS,
    ) -> ModelResponse:
        """Send the messages and return the whole reply."""
        ...

    def stream_message(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        options: RequestOptions = DEFAULT_OPTIONS,
    ) -> AsyncIterator[StreamChunk]:
        """Send the messages and yield the reply as StreamChunks, ``MessageStop`` last.

        Closing the iterator early closes the upstream request.
        """
        ...


async def collect_response(chunks: AsyncIterator[StreamChunk]) -> ModelResponse:
    """Gather a chunk stream into one ModelResponse (an adapter may use it for send_message);
    the text is that of the text blocks, reasoning is gathered apart."""
    text: list[str] = []
    calls: list[ToolUse] = []
    reasoning: list[ReasoningDone] = []
    images: list[ImageDone] = []
    reasoning_blocks: set[int] = set()
    stop = MessageStop()
    async for chunk in chunks:
        if isinstance(chunk, ContentBlockStart) and chunk.type == "reasoning":
            reasoning_blocks.add(chunk.index)
        elif isinstance(chunk, ContentBlockDelta) and chunk.index not in reasoning_blocks:
            text.append(chunk.delta)
        elif isinstance(chunk, ToolUse):
            calls.append(chunk)
        elif isinstance(chunk, ReasoningDone):
            reasoning.append(chunk)
        elif isinstance(chunk, ImageDone):
            images.append(chunk)
        elif isinstance(chunk, MessageStop):
            stop = chunk
    return ModelResponse(
        "".join(text), tuple(calls), stop.stop_reason, stop.usage, tuple(reasoning), tuple(images)
    )
