"""The run loop of LLMConversation: model rounds, tool rounds, and the events they yield.

Imports only the standard library and the domain. A run alternates model rounds (the adapter's
StreamChunks, passed on as they arrive; the history is repaired before every request, see
``app.domain.repair``) and tool rounds (server tools executed, client tools
stored as pending) until the model answers with text or a client tool call is pending.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, Protocol

from app.domain.adapter import (
    ContentBlockDelta,
    ContentBlockStart,
    ContentBlockStop,
    ImageDone,
    MessageStop,
    ModelAdapter,
    ReasoningDone,
    RequestOptions,
    StreamChunk,
    ToolUse,
    Usage,
    new_tool_call_id,
)
from app.domain.attachments import Attachment, AttachmentStore, RunAttachments
from app.domain.config import ConversationConfig
from app.domain.context import ContextWindow, TokenCounter, approximate_tokens, context_within
from app.domain.errors import ContextWindowError, ProviderError, ToolRoundLimitError
from app.domain.message_list import MessageList
from app.domain.messages import (
    AgentMessage,
    Message,
    ReasoningMessage,
    Role,
    TextMessage,
    ToolCallMessage,
)
from app.domain.repair import repair_history
from app.domain.unicode import scrub, scrub_text


class RunHost(Protocol):
    """What the run loop needs of the conversation it runs; ``LLMConversation`` is one.

    The loop knows this protocol, not the conversation class, so imports point one way:
    conversation → run.
    """

    @property
    def messages(self) -> MessageList: ...

    @property
    def config(self) -> ConversationConfig: ...

    def reply_began(self) -> None:
        """A model reply begins: it answers every change made so far."""


@dataclass(frozen=True)
class MessageAppended:
    """A message was completed and appended to the conversation at ``index``.

    ``last`` marks the run's final message: the run appends nothing after it.
    """

    message: Message
    index: int
    kind: str = "message"
    last: bool = False


RunEvent = StreamChunk | MessageAppended


@dataclass(frozen=True)
class ToolResult:
    """The outcome of a client tool call, posted by the caller."""

    tool_call_id: str
    result: Any = None
    error: str | None = None
    attachments: tuple[Attachment, ...] = ()
    """Files the result carries (an image a tool made), by reference."""


@dataclass
class Run:
    """One run's state: the text streamed but not yet stored, and whether it was cut short."""

    partial: list[str] = field(default_factory=list)
    reasoning: dict[int, list[str]] = field(default_factory=dict)
    """The reply's reasoning blocks still streaming, by block index: their text so far."""
    provider: str = ""
    """The adapter of the reply in progress."""
    replying: bool = False
    """A model reply is in progress: streaming, or its tools running."""
    superseded: bool = False
    """The run was cut short; it ends at its next step without touching the conversation."""
    files: RunAttachments | None = None
    """The attachments' bytes this run has read (each file once), made at its first call."""
    images: list[Attachment] = field(default_factory=list)
    """The images the reply in progress made, stored: its final text carries them."""


async def run_rounds(conversation: RunHost, run: Run) -> AsyncGenerator[RunEvent, None]:
    """Model rounds and tool rounds until a final text or a pending client tool call."""
    rounds = 0
    while not run.superseded and not conversation.messages.pending_tool_calls():
        config = conversation.config
        adapter, model = config.select()
        calls: list[ToolUse] = []
        async with aclosing(_model_round(conversation, adapter, model, run)) as chunks:
            async for chunk in chunks:
                if isinstance(chunk, ToolUse):
                    calls.append(chunk)
                yield chunk
                if isinstance(chunk, ReasoningDone):
                    yield _append_reasoning(conversation, chunk, adapter.name, run)
        if run.superseded:
            return
        if not calls:
            yield _append_final_text(conversation, run)
            return
        if rounds >= config.max_tool_rounds:
            raise ToolRoundLimitError(config.max_tool_rounds)
        rounds += 1
        async with aclosing(_tool_round(conversation, calls, run)) as events:
            async for event in events:
                yield event


def _append_reasoning(
    conversation: RunHost, done: ReasoningDone, provider: str, run: Run
) -> MessageAppended:
    """Store a finished reasoning block at once, in its place before the rest of the reply."""
    run.reasoning.pop(done.index, None)
    message = ReasoningMessage(done.text, provider, done.payload)
    conversation.messages.append(message)
    return MessageAppended(message, len(conversation.messages) - 1)


async def _stored_image(
    config: ConversationConfig, image: ImageDone, run: Run
) -> AsyncGenerator[StreamChunk, None]:
    """An image the model made, stored as a file and announced as an ``image`` block; its
    reply's text will carry it. Without a store that keeps files, a note takes its place."""
    store = config.attachments
    if not isinstance(store, AttachmentStore):
        run.partial.append("[an image was made, but there is no file store to keep it]")
        return
    extension = image.media_type.partition("/")[2] or "bin"
    name = f"image-{len(run.images) + 1}.{extension}"
    attachment = await store.put(image.data, image.media_type, name)
    run.images.append(attachment)
    yield ContentBlockStart(image.index, "image", attachment)
    yield ContentBlockStop(image.index)


def _append_final_text(conversation: RunHost, run: Run) -> MessageAppended:
    message = TextMessage("".join(run.partial), Role.ASSISTANT, attachments=tuple(run.images))
    run.images.clear()
    run.partial.clear()
    run.reasoning.clear()
    run.replying = False
    conversation.messages.append(message)
    return MessageAppended(message, len(conversation.messages) - 1, last=True)


async def _model_round(
    conversation: RunHost, adapter: ModelAdapter, model: str, run: Run
) -> AsyncGenerator[StreamChunk, None]:
    """One model reply: the adapter's chunks, its text gathered in ``run.partial``."""
    config = conversation.config
    if run.files is None and config.attachments is not None:
        run.files = RunAttachments(config.attachments, config.attachment_bytes)
    options = RequestOptions(
        model,
        config.temperature,
        config.max_output_tokens,
        config.reasoning,
        cache_key=config.cache_key,
        image_generation=config.image_generation,
        attachments=run.files,
    )
    specs = [t.spec for t in config.tools]
    run.replying, run.provider = True, adapter.name
    conversation.reply_began()
    history = repair_history(_window(conversation, adapter, model), provider=adapter.name)
    stream = adapter.stream_message(history, specs, options)
    call_ids: set[str] = set()
    try:
        async for received in stream:
            if run.superseded:
                return
            chunk = _scrubbed(received)
            if isinstance(chunk, ImageDone):
                async for block in _stored_image(config, chunk, run):
                    yield block
                continue
            if isinstance(chunk, ToolUse):
                _check_call(chunk, call_ids, adapter.name)
            if isinstance(chunk, ContentBlockStart) and chunk.type == "reasoning":
                run.reasoning[chunk.index] = []
            elif isinstance(chunk, ContentBlockDelta):
                reasoning = run.reasoning.get(chunk.index)
                (run.partial if reasoning is None else reasoning).append(chunk.delta)
            yield chunk
            if isinstance(chunk, MessageStop):
                return
    finally:  # closing the adapter's stream closes the upstream request
        close = getattr(stream, "aclose", None)
        if close is not None:
            await close()
    raise ProviderError(
        "bad_response", f"{adapter.name}: the reply ended before its stop", retryable=True
    )


def _window(conversation: RunHost, adapter: ModelAdapter, model: str) -> Sequence[Message]:
    """The messages a request sends: all of them without a budget (nothing is counted, so no
    tokenizer is loaded), else those within ``context_max_tokens``."""
    messages = list(conversation.messages)
    budget = conversation.config.context_max_tokens
    if budget is None:
        return messages
    counter = _token_counter(adapter, model)
    window = context_within(messages, budget, counter, conversation.config.context_trim_to)
    _check_window(window, messages, budget)
    return window.messages


def _scrubbed(chunk: StreamChunk) -> StreamChunk:
    """The chunk with text that can be encoded (a model's JSON may hold lone surrogates) and
    token counts that are counts."""
    if isinstance(chunk, MessageStop):
        usage = Usage(**{k: _count(v) for k, v in chunk.usage.as_dict().items()})
        return chunk if usage == chunk.usage else dataclasses.replace(chunk, usage=usage)
    if isinstance(chunk, ReasoningDone):
        payload = chunk.payload if chunk.payload is None else scrub(chunk.payload)
        return dataclasses.replace(chunk, text=scrub_text(chunk.text), payload=payload)
    if isinstance(chunk, ContentBlockDelta):
        delta = scrub_text(chunk.delta)
        return chunk if delta is chunk.delta else dataclasses.replace(chunk, delta=delta)
    if isinstance(chunk, ToolUse):
        return dataclasses.replace(
            chunk,
            tool_name=scrub_text(chunk.tool_name),
            params=scrub(chunk.params),
            id=scrub_text(chunk.id) if chunk.id.strip() else new_tool_call_id(),
        )
    return chunk


def _count(value: object) -> int | None:
    """A provider's token count as one: a whole number, 0 or more; None for anything else (its
    JSON may say NaN, 1.5 or "12", which no run's usage can hold)."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def _check_call(call: ToolUse, earlier_ids: set[str], provider: str) -> None:
    """Refuse (``bad_response``) a tool call that could not be answered or stored: an id an
    earlier call of the same reply has (its result would answer both), or arguments holding a
    number JSON cannot (NaN, infinity: a provider's JSON may, storage's may not), or no tool
    name (a call stored without one could not be read back)."""
    if not call.tool_name.strip():
        raise ProviderError(
            "bad_response", f"{provider}: a tool call has no tool name", retryable=True
        )
    if call.id in earlier_ids:
        raise ProviderError(
            "bad_response",
            f"{provider}: two tool calls of one reply have the id {call.id!r}",
            retryable=True,
        )
    earlier_ids.add(call.id)
    values: list[Any] = [call.params]
    while values:
        value = values.pop()
        if isinstance(value, dict):
            values.extend(value.values())
        elif isinstance(value, list):
            values.extend(value)
        elif isinstance(value, float) and not math.isfinite(value):
            raise ProviderError(
                "bad_response",
                f"{provider}: the arguments of tool call {call.tool_name!r} hold {value!r}, "
                "which JSON cannot",
                retryable=True,
            )


def _check_window(window: ContextWindow, messages: list[Message], budget: int | None) -> None:
    """Refuse to send a window that kept nothing but the system prompt."""
    if window.dropped and all(isinstance(m, AgentMessage) for m in window.messages):
        raise ContextWindowError(
            f"context_max_tokens={budget} leaves no room for the latest message "
            f"({window.dropped} of {len(messages)} messages would be dropped, the latest "
            "among them); raise context_max_tokens"
        )


async def _tool_round(
    conversation: RunHost, calls: list[ToolUse], run: Run
) -> AsyncGenerator[RunEvent, None]:
    """Execute the server tools of one reply; client tools are stored as pending.

    The calls of one reply are appended together, then announced one by one, so the history
    is whole at every event: the reply's text rides on its first call.
    """
    text = "".join(run.partial)
    config = conversation.config
    results: list[ToolCallMessage] = []
    for i, call in enumerate(calls):
        message = ToolCallMessage(
            tool_name=call.tool_name,
            tool_call_id=call.id,
            arguments=call.params,
            message=text if i == 0 else "",
        )
        tool = config.tool(call.tool_name)
        if tool is None:
            message = message.completed(error=f"Tool '{call.tool_name}' not found")
        elif tool.is_client_tool:
            message = dataclasses.replace(message, pending=True)
        else:
            result, error = await tool.execute(call.params, config.tool_timeout)
            message = message.completed(scrub(result), error and scrub_text(error))
        results.append(message)
    if run.superseded:
        return
    run.partial.clear()
    run.reasoning.clear()
    run.replying = False
    start = len(conversation.messages)
    conversation.messages.extend(results)
    ends_run = any(m.pending for m in results)  # the caller must run the client tools
    for offset, message in enumerate(results):
        yield MessageAppended(message, start + offset, last=ends_run and offset == len(results) - 1)


def _token_counter(adapter: ModelAdapter, model: str) -> TokenCounter:
    """The adapter's exact counter for ``model`` when it has one, else the approximation."""
    factory = getattr(adapter, "token_counter", None)
    counter = factory(model) if callable(factory) else None
    return counter if callable(counter) else approximate_tokens
