"""LLMConversation: the mutable execution context that owns a MessageList and runs the model.

Imports only the standard library and the domain. It runs at two grains (DESIGN §2): async
iteration yields whole messages; ``stream()`` yields every StreamChunk as it arrives plus a
``MessageAppended`` for each completed message. Stopping either early keeps completed messages
and turns text already streamed into an assistant message marked ``incomplete``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from app.domain.adapter import (
    ContentBlockDelta,
    MessageStop,
    ModelAdapter,
    RequestOptions,
    StreamChunk,
    ToolUse,
)
from app.domain.config import ConversationConfig, validated_config
from app.domain.context import ContextWindow, TokenCounter, approximate_tokens, context_within
from app.domain.errors import (
    ConversationConfigurationError,
    ConversationFileError,
    DeltaApplicationError,
    MessageListSerializationError,
    ProviderError,
    ToolRoundLimitError,
)
from app.domain.formats import to_anthropic_format, to_openai_format
from app.domain.message_list import MessageList
from app.domain.messages import AgentMessage, Message, Role, TextMessage, ToolCallMessage

if TYPE_CHECKING:
    from app.domain.builder import LLMPromptBuilder


@dataclass(frozen=True)
class MessageAppended:
    """A message was completed and appended to the conversation at ``index``."""

    message: Message
    index: int
    kind: str = "message"


RunEvent = StreamChunk | MessageAppended


@dataclass(frozen=True)
class ToolResult:
    """The outcome of a client tool call, posted by the caller."""

    tool_call_id: str
    result: Any = None
    error: str | None = None


@dataclass
class _Run:
    """What one run has streamed but not yet stored."""

    partial: list[str] = field(default_factory=list)


class LLMConversation:
    """Owns the MessageList and the config; runs the model and grows the list as it goes."""

    def __init__(
        self,
        messages: MessageList | None = None,
        config: ConversationConfig | None = None,
        *,
        system_prompt: str | None = None,
    ) -> None:
        self.messages: MessageList = messages if messages is not None else MessageList()
        self._config = config if config is not None else ConversationConfig()
        self._kwargs: dict[str, Any] = {}
        self._active: _Run | None = None
        self._iterator: AsyncIterator[Message] | None = None
        self._exhausted = False
        if system_prompt is not None and system_prompt.strip():
            self.messages.insert(0, AgentMessage(system_prompt.strip()))

    # --- state ------------------------------------------------------------------------------

    @property
    def config(self) -> ConversationConfig:
        """The execution config; change it with ``apply_config_deltas`` or a builder."""
        return self._config

    @property
    def continuation(self) -> LLMPromptBuilder:
        """A fresh builder that applies its deltas to this very conversation."""
        from app.domain.builder import LLMPromptBuilder

        if not isinstance(self.messages, MessageList):
            raise ConversationConfigurationError(
                f"conversation.messages must be a MessageList, not "
                f"{type(self.messages).__name__}; rebuild it with MessageList.from_dict(...)"
            )
        return LLMPromptBuilder(self)

    @property
    def status(self) -> str:
        """``requires_action`` while a client tool call waits for its result, else ``idle``."""
        return "requires_action" if self.messages.pending_tool_calls() else "idle"

    # --- deltas -----------------------------------------------------------------------------

    def apply_config_deltas(self, deltas: Mapping[str, Any]) -> None:
        """Update the config; ``None`` resets a key to its default. All or nothing."""
        self._config = validated_config(self._config, deltas)

    def apply_delta(
        self,
        messages: Iterable[Message] = (),
        config: Mapping[str, Any] | None = None,
        tool_results: Sequence[ToolResult] = (),
    ) -> None:
        """Apply a delta bundle: config, tool results, then new messages. All or nothing."""
        new_messages = list(messages)
        for i, message in enumerate(new_messages):
            if not isinstance(message, Message):
                raise DeltaApplicationError(
                    f"delta message {i} is a {type(message).__name__}, not a Message"
                )
        new_config = validated_config(self._config, config or {})
        completions = self._completions(tool_results)
        self._abandon_active_run()
        self._config = new_config
        for index, completed in completions:
            self.messages.replace(index, completed)
        self.messages.extend(new_messages)

    def _completions(self, results: Sequence[ToolResult]) -> list[tuple[int, ToolCallMessage]]:
        out: list[tuple[int, ToolCallMessage]] = []
        seen: set[str] = set()
        for i, r in enumerate(results):
            found = self.messages.find_tool_call(r.tool_call_id)
            if found is None:
                raise DeltaApplicationError(
                    f"tool result {i}: no tool call has id {r.tool_call_id!r}"
                )
            index, call = found
            if not call.pending or r.tool_call_id in seen:
                raise DeltaApplicationError(
                    f"tool result {i}: tool call {r.tool_call_id!r} already has its result"
                )
            seen.add(r.tool_call_id)
            out.append((index, call.completed(r.result, r.error)))
        return out

    # --- seed 002 operations ----------------------------------------------------------------

    def add(self, role: Role | str, text: str) -> Message:
        """Add a message by role (``system``, ``user``, ``assistant``) and return it."""
        try:
            role = Role(role)
        except ValueError:
            raise DeltaApplicationError(
                f"role must be 'system', 'user' or 'assistant', not {role!r}"
            ) from None
        message: Message = (
            AgentMessage(text.strip()) if role is Role.SYSTEM else TextMessage(text.strip(), role)
        )
        self.apply_delta([message])
        return message

    def add_tool_result(
        self, tool_call_id: str, result: Any = None, error: str | None = None
    ) -> ToolCallMessage:
        """Complete a pending client tool call with its result (or error), exactly once."""
        self.apply_delta(tool_results=[ToolResult(tool_call_id, result, error)])
        found = self.messages.find_tool_call(tool_call_id)
        assert found is not None
        return found[1]

    def clear(self) -> None:
        """Remove every message except the system prompt."""
        self._abandon_active_run()
        self.messages.clear()

    def get_context(
        self, max_tokens: int | None = None, counter: TokenCounter = approximate_tokens
    ) -> ContextWindow:
        """The messages a run sends within ``max_tokens`` (system prompt always kept)."""
        return context_within(list(self.messages), max_tokens, counter)

    def token_count(self, counter: TokenCounter = approximate_tokens) -> int:
        """An approximate token count of all messages."""
        return self.get_context(None, counter).total_tokens

    def to_openai_format(self) -> list[dict[str, Any]]:
        """The messages as OpenAI chat-completions messages."""
        return to_openai_format(list(self.messages))

    def to_anthropic_format(self) -> dict[str, Any]:
        """The messages as an Anthropic messages-API ``system`` and ``messages``."""
        return to_anthropic_format(list(self.messages))

    def save(self, target: str | Path | IO[str]) -> None:
        """Write ``messages.to_dict()`` as JSON to a file name, a Path or a text stream."""
        data = self.messages.to_dict()
        try:
            if isinstance(target, str | Path):
                with Path(target).open("w", encoding="utf-8") as f:
                    json.dump(data, f, ensure_ascii=False, indent=2)
            elif callable(getattr(target, "write", None)):
                json.dump(data, target, ensure_ascii=False, indent=2)
            else:
                raise TypeError(f"cannot save to a {type(target).__name__}")
        except OSError as exc:
            raise ConversationFileError(f"cannot write conversation to {target!r}: {exc}") from exc
        except TypeError as exc:
            raise MessageListSerializationError(str(exc)) from exc

    # --- running ----------------------------------------------------------------------------

    def __aiter__(self) -> LLMConversation:
        return self

    async def __anext__(self) -> Message:
        if self._exhausted:
            raise StopAsyncIteration
        if self._iterator is None:
            self._iterator = self._whole_messages()
        try:
            return await self._iterator.__anext__()
        except StopAsyncIteration:
            self._iterator, self._exhausted = None, True
            raise
        except BaseException:
            self._iterator, self._exhausted = None, True
            raise

    async def _whole_messages(self) -> AsyncGenerator[Message, None]:
        async with aclosing(self.stream()) as events:
            async for event in events:
                if isinstance(event, MessageAppended):
                    yield event.message

    def _restart_iteration(self) -> None:
        """Let the next ``async for`` start a new run (after new deltas were applied)."""
        self._abandon_active_run()
        self._iterator, self._exhausted = None, False

    async def stream(self) -> AsyncGenerator[RunEvent, None]:
        """Run the model: every StreamChunk as it arrives, and each completed message.

        Ends after the model's final text, or when a client tool call is pending. Closing the
        stream early (or a failure) keeps what was streamed as an incomplete message.
        """
        self._abandon_active_run()
        run = self._active = _Run()
        try:
            async with aclosing(self._rounds(run)) as events:
                async for event in events:
                    yield event
        finally:
            if self._active is run:
                self._abandon_active_run()

    def _abandon_active_run(self) -> None:
        """Store the active run's unfinished text as an incomplete message; forget the run."""
        run, self._active = self._active, None
        if run is not None and "".join(run.partial).strip():
            self.messages.append(TextMessage("".join(run.partial), Role.ASSISTANT, incomplete=True))

    def _append(self, message: Message) -> MessageAppended:
        self.messages.append(message)
        return MessageAppended(message, len(self.messages) - 1)

    async def _rounds(self, run: _Run) -> AsyncGenerator[RunEvent, None]:
        rounds = 0
        while True:
            if self.messages.pending_tool_calls():
                return
            adapter, model = self._config.select()
            calls: list[ToolUse] = []
            async for chunk in self._model_round(adapter, model, run):
                if isinstance(chunk, ToolUse):
                    calls.append(chunk)
                yield chunk
            text = "".join(run.partial)
            if not calls:
                run.partial.clear()
                yield self._append(TextMessage(text, Role.ASSISTANT))
                return
            if rounds >= self._config.max_tool_rounds:
                raise ToolRoundLimitError(self._config.max_tool_rounds)
            rounds += 1
            async for event in self._tool_round(calls, text, run):
                yield event

    async def _model_round(
        self, adapter: ModelAdapter, model: str, run: _Run
    ) -> AsyncGenerator[StreamChunk, None]:
        counter = _token_counter(adapter, model)
        window = context_within(list(self.messages), self._config.context_max_tokens, counter)
        options = RequestOptions(model, self._config.temperature, self._config.max_output_tokens)
        specs = [t.spec for t in self._config.tools]
        stream = adapter.stream_message(window.messages, specs, options)
        try:
            async for chunk in stream:
                if isinstance(chunk, ContentBlockDelta):
                    run.partial.append(chunk.delta)
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

    async def _tool_round(
        self, calls: list[ToolUse], text: str, run: _Run
    ) -> AsyncGenerator[RunEvent, None]:
        """Execute the server tools of one reply; client tools are stored as pending."""
        results: list[ToolCallMessage] = []
        for i, call in enumerate(calls):
            message = ToolCallMessage(
                tool_name=call.tool_name,
                tool_call_id=call.id,
                arguments=call.params,
                message=text if i == 0 else "",
            )
            tool = self._config.tool(call.tool_name)
            if tool is None:
                message = message.completed(error=f"Tool '{call.tool_name}' not found")
            elif tool.is_client_tool:
                message = dataclasses.replace(message, pending=True)
            else:
                result, error = await tool.execute(call.params, self._config.tool_timeout)
                message = message.completed(result, error)
            results.append(message)
        run.partial.clear()
        for message in results:
            yield self._append(message)


def _token_counter(adapter: ModelAdapter, model: str) -> TokenCounter:
    """The adapter's exact counter for ``model`` when it has one, else the approximation."""
    factory = getattr(adapter, "token_counter", None)
    counter = factory(model) if callable(factory) else None
    return counter if callable(counter) else approximate_tokens
