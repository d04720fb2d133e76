"""LLMConversation: the mutable execution context that owns a MessageList and runs the model.

Imports only the standard library and the domain. It runs at two grains (DESIGN §2): async
iteration yields whole messages; ``stream()`` yields every StreamChunk as it arrives plus a
``MessageAppended`` for each completed message. The run loop itself lives in ``app.domain.run``.

How a run and changes meet:

- Stopping a run early (closing ``stream()``, ``aclose()``, cancelling the task, a provider
  error) keeps the completed messages and turns text already streamed into an assistant
  message marked ``incomplete``; the adapter's stream is closed at once.
- A change made while the model is replying (a delta, ``clear``, a new ``stream()``, or
  ``prompt_conversation``) cuts that reply short the same way; the cut run then ends quietly.
  A change made between messages does not disturb the run: it sees the change in its next step
  (a client tool result added from inside ``async for`` lets the same iteration go on).
- Iterating again after an iteration ended yields nothing until the conversation changed after
  the model's last reply began (a delta, ``add``, ``add_tool_result``, ``prompt_conversation``).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Iterable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from app.domain.config import ConversationConfig, validated_config
from app.domain.context import ContextWindow, TokenCounter, approximate_tokens, context_within
from app.domain.errors import ConversationConfigurationError, DeltaApplicationError
from app.domain.files import Source, load_message_list, save_message_list
from app.domain.formats import to_anthropic_format, to_openai_format
from app.domain.message_list import MessageList
from app.domain.messages import (
    AgentMessage,
    Message,
    ReasoningMessage,
    Role,
    TextMessage,
    ToolCallMessage,
)
from app.domain.run import MessageAppended, Run, RunEvent, ToolResult, run_rounds
from app.domain.tools import to_jsonable

if TYPE_CHECKING:
    from app.domain.builder import LLMPromptBuilder

__all__ = ["LLMConversation", "MessageAppended", "RunEvent", "ToolResult"]


class LLMConversation:
    """Owns the MessageList and the config; runs the model and grows the list as it goes."""

    def __init__(
        self,
        messages: MessageList | None = None,
        config: ConversationConfig | None = None,
        *,
        system_prompt: str | None = None,
    ) -> None:
        if messages is not None and not isinstance(messages, MessageList):
            raise ConversationConfigurationError(
                f"messages must be a MessageList, not {type(messages).__name__}; "
                "wrap a list in MessageList(...) or read a saved one with MessageList.from_dict"
            )
        if config is not None and not isinstance(config, ConversationConfig):
            raise ConversationConfigurationError(
                f"config must be a ConversationConfig, not {type(config).__name__}"
            )
        self.messages: MessageList = messages if messages is not None else MessageList()
        self._config = config if config is not None else ConversationConfig()
        self._active: Run | None = None
        self._iterator: AsyncGenerator[Message, None] | None = None
        self._iteration_ended = False
        self._changes = 0  # counts changes made through the conversation's methods
        self._replied_to: int | None = None  # _changes when the model's last reply began
        if system_prompt is not None and system_prompt.strip():
            self.messages.insert(0, AgentMessage(system_prompt.strip()))

    def __repr__(self) -> str:
        return (
            f"<LLMConversation {len(self.messages)} messages, status={self.status!r}, "
            f"provider={self._config.preferred_provider!r}, model={self._config.preferred_model!r}>"
        )

    # --- state ------------------------------------------------------------------------------

    @property
    def config(self) -> ConversationConfig:
        """The execution config; change it with ``apply_config_deltas`` or a builder."""
        return self._config

    @property
    def continuation(self) -> LLMPromptBuilder:
        """A fresh builder that applies its deltas to this very conversation."""
        from app.domain.builder import LLMPromptBuilder

        self._check_messages()
        return LLMPromptBuilder(self)

    def _check_messages(self) -> None:
        if not isinstance(self.messages, MessageList):
            raise ConversationConfigurationError(
                f"conversation.messages must be a MessageList, not "
                f"{type(self.messages).__name__}; rebuild it with MessageList.from_dict(...)"
            )

    @property
    def status(self) -> str:
        """``requires_action`` while a client tool call waits for its result, else ``idle``."""
        return "requires_action" if self.messages.pending_tool_calls() else "idle"

    # --- deltas -----------------------------------------------------------------------------

    def apply_config_deltas(self, deltas: Mapping[str, Any]) -> None:
        """Update the config; ``None`` resets a key to its default. All or nothing."""
        self._config = validated_config(self._config, deltas)
        self._changes += 1

    def apply_delta(
        self,
        messages: Iterable[Message] = (),
        config: Mapping[str, Any] | None = None,
        tool_results: Sequence[ToolResult] = (),
    ) -> None:
        """Apply a delta bundle: config, tool results, then new messages. All or nothing."""
        self._check_messages()
        new_messages = list(messages)
        for i, message in enumerate(new_messages):
            if not isinstance(message, Message):
                raise DeltaApplicationError(
                    f"delta message {i} is a {type(message).__name__}, not a Message"
                )
        new_config = validated_config(self._config, config or {})
        completions = self._completions(tool_results)
        if self._active is not None and self._active.replying:
            self._interrupt()  # the reply in progress answers a conversation that is changing
        self._config = new_config
        for index, completed in completions:
            self.messages.replace(index, completed)
        self.messages.extend(new_messages)
        self._changes += 1

    def _completions(self, results: Sequence[ToolResult]) -> list[tuple[int, ToolCallMessage]]:
        out: list[tuple[int, ToolCallMessage]] = []
        seen: set[str] = set()
        for i, r in enumerate(results):
            if not isinstance(r, ToolResult):
                raise DeltaApplicationError(
                    f"tool result {i} is a {type(r).__name__}, not a ToolResult"
                )
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
            if r.result is not None and r.error is not None:
                raise DeltaApplicationError(
                    f"tool result {i}: a result or an error, not both (an error has no result)"
                )
            seen.add(r.tool_call_id)
            done = call.completed(to_jsonable(r.result), _error_text(i, r.error))
            if r.attachments:
                done = replace(done, attachments=tuple(r.attachments))
            out.append((index, done))
        return out

    # --- seed 002 operations ----------------------------------------------------------------

    def add(self, role: Role | str, text: str) -> Message:
        """Add a message by role (``system``, ``user``, ``assistant``) and return it."""
        try:
            role = Role(role)
        except ValueError:
            raise DeltaApplicationError(
                f"role must be 'system', 'user' or 'assistant', not {role!r}; "
                "add a tool's result with add_tool_result(tool_call_id, result)"
            ) from None
        if not isinstance(text, str):
            raise TypeError(f"add() takes text (a str), not {type(text).__name__}")
        message: Message = (
            AgentMessage(text.strip()) if role is Role.SYSTEM else TextMessage(text.strip(), role)
        )
        self.apply_delta([message])
        return message

    def add_tool_result(
        self, tool_call_id: str, result: Any = None, error: str | None = None
    ) -> ToolCallMessage:
        """Complete a pending client tool call with its result (or error), exactly once.

        The result is made JSON by the rule of ``to_jsonable``.
        """
        self.apply_delta(tool_results=[ToolResult(tool_call_id, result, error)])
        found = self.messages.find_tool_call(tool_call_id)
        assert found is not None
        return found[1]

    def clear(self) -> None:
        """Remove every message except the system prompt."""
        self._interrupt()
        self.messages.clear()
        self._changes += 1

    def get_context(
        self, max_tokens: int | None = None, counter: TokenCounter = approximate_tokens
    ) -> ContextWindow:
        """The messages that fit in ``max_tokens`` (system prompt always kept; None: all)."""
        return context_within(list(self.messages), max_tokens, counter, self.config.context_trim_to)

    def token_count(self, counter: TokenCounter = approximate_tokens) -> int:
        """An approximate token count of all messages."""
        return self.get_context(None, counter).total_tokens

    def to_openai_format(self) -> list[dict[str, Any]]:
        """The messages as OpenAI chat-completions messages."""
        return to_openai_format(list(self.messages))

    def to_anthropic_format(self) -> dict[str, Any]:
        """The messages as an Anthropic messages-API ``system`` and ``messages``."""
        return to_anthropic_format(list(self.messages))

    @classmethod
    def load(cls, source: Source, config: ConversationConfig | None = None) -> LLMConversation:
        """A conversation holding the MessageList saved in ``source`` (seed 002's load).

        ``source`` is a file name, a Path, a readable stream or the dict; the conversation runs
        with ``config`` (``builder.load_conversation`` loads with a builder's config). Raises
        ConversationFileError for a file that cannot be read, MessageListDeserializationError
        for one that is not JSON or a document that does not read (naming the source), and
        TypeError for a source of another kind.
        """
        return cls(load_message_list(source), config)

    def save(self, target: str | Path | IO[str] | IO[bytes]) -> None:
        """Write ``messages.to_dict()`` as JSON to a file name, a Path or a stream.

        Raises MessageListSerializationError (naming the message) before writing anything when
        a message cannot be serialized, ConversationFileError when the file cannot be written.
        """
        save_message_list(self.messages, target)

    # --- running ----------------------------------------------------------------------------

    def __aiter__(self) -> LLMConversation:
        return self

    async def __anext__(self) -> Message:
        iterator = self._iterator
        if iterator is None:
            if self._iteration_ended and self._replied_to == self._changes:
                raise StopAsyncIteration  # the model already answered everything it was given
            iterator = self._iterator = self._whole_messages()
            self._iteration_ended = False
        try:
            return await iterator.__anext__()
        except BaseException:  # the end, an error or a cancellation: this iteration is over
            if self._iterator is iterator:
                self._iterator, self._iteration_ended = None, True
            raise

    async def aclose(self) -> None:
        """Stop the running iteration now: the adapter's stream is closed at once.

        A reply in progress is kept as incomplete text. A ``stream()`` left open elsewhere is
        cut short too (its text kept); close that generator yourself to close its upstream.
        """
        iterator, self._iterator = self._iterator, None
        if iterator is not None:
            self._iteration_ended = True
            await iterator.aclose()
        self._interrupt()

    async def _whole_messages(self) -> AsyncGenerator[Message, None]:
        async with aclosing(self.stream()) as events:
            async for event in events:
                if isinstance(event, MessageAppended):
                    yield event.message

    def _restart_iteration(self) -> None:
        """Make the next ``async for`` start a new run (``prompt_conversation`` was called)."""
        self._interrupt()
        self._iterator, self._iteration_ended, self._replied_to = None, False, None

    async def stream(self) -> AsyncGenerator[RunEvent, None]:
        """Run the model: every StreamChunk as it arrives, and each completed message.

        Ends after the model's final text, or when a client tool call is pending. When the
        stream is closed early or fails, messages appended without their event (the incomplete
        text, the other calls of a tool round) are in ``messages`` after the last announced
        index. Use it as ``async with contextlib.aclosing(conversation.stream()) as events``.
        """
        self._interrupt()  # one run at a time: a run left open is cut short
        run = self._active = Run()
        try:
            async with aclosing(run_rounds(self, run)) as events:
                async for event in events:
                    yield event
        finally:
            if self._active is run:
                self._interrupt()

    def _interrupt(self) -> None:
        """Cut the active run short: its streamed text becomes an incomplete message."""
        run, self._active = self._active, None
        if run is None:
            return
        run.superseded = True
        provider = run.provider or "unknown"
        for pieces in run.reasoning.values():  # reasoning cut short: shown, never sent
            thought = "".join(pieces)
            if thought.strip():
                self.messages.append(ReasoningMessage(thought, provider, None, incomplete=True))
        run.reasoning.clear()
        text = "".join(run.partial)
        run.partial.clear()
        if text.strip():
            self.messages.append(TextMessage(text, Role.ASSISTANT, incomplete=True))

    def reply_began(self) -> None:
        """Called by the run as a model reply begins: it answers every change made so far."""
        self._replied_to = self._changes


def _error_text(index: int, error: Any) -> str | None:
    if error is None or isinstance(error, str):
        return error
    if isinstance(error, BaseException):
        return f"{type(error).__name__}: {error}"
    raise DeltaApplicationError(
        f"tool result {index}: error must be a string or null, not {type(error).__name__}"
    )
