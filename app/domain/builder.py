"""LLMPromptBuilder: the immutable composition tool of the delta pattern (seeds 000, 001, 003).

Imports only the standard library and the domain. Every method returns a new builder; the
deltas (messages, tool results, config) are applied to the referenced conversation — or to a new
one, for a fresh builder — only by ``prompt_conversation``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from app.domain.adapter import Effort, Summary
from app.domain.attachments import AttachmentStore, Image, MemoryAttachments
from app.domain.config import ConversationConfig, validated_config
from app.domain.conversation import LLMConversation, ToolResult
from app.domain.errors import ConversationConfigurationError, ConversationError
from app.domain.files import Source, load_message_list
from app.domain.message_list import MessageList
from app.domain.messages import AgentMessage, Message, Role, TextMessage
from app.domain.selection import ModelSelectionStrategy
from app.domain.tools import Tool


class LLMPromptBuilder:
    """Accumulates deltas immutably; applies them to its conversation on execution."""

    __slots__ = ("_base_config", "_conversation", "_delta_config", "_delta_messages", "_results")

    def __init__(
        self,
        conversation: LLMConversation | None = None,
        delta_messages: MessageList | None = None,
        delta_config: Mapping[str, Any] | None = None,
        *,
        model_selector: ModelSelectionStrategy | None = None,
        _tool_results: tuple[ToolResult, ...] = (),
    ) -> None:
        self._conversation = conversation
        self._delta_messages = MessageList(delta_messages or ())
        self._delta_config: dict[str, Any] = dict(delta_config or {})
        self._base_config = (
            ConversationConfig()
            if model_selector is None
            else ConversationConfig(model_selector=model_selector)
        )
        self._results = _tool_results  # set last: from here on the builder is frozen

    def __setattr__(self, name: str, value: Any) -> None:
        if hasattr(self, "_results"):
            raise AttributeError("LLMPromptBuilder is immutable; its methods return new builders")
        object.__setattr__(self, name, value)

    def __repr__(self) -> str:
        target = "fresh" if self._conversation is None else repr(self._conversation)
        return (
            f"<LLMPromptBuilder for {target}: {len(self._delta_messages)} delta messages, "
            f"config delta {sorted(self._delta_config)}, {len(self._results)} tool results>"
        )

    def _copy(
        self,
        message: Message | None = None,
        config: Mapping[str, Any] | None = None,
        result: ToolResult | None = None,
    ) -> LLMPromptBuilder:
        if config:  # check now, where the mistake is made, not when the delta is applied
            validated_config(ConversationConfig(), config)
        messages = self._delta_messages.copy()
        if message is not None:
            messages.append(message)
        new = LLMPromptBuilder(
            self._conversation,
            messages,
            {**self._delta_config, **(config or {})},
            _tool_results=self._results + ((result,) if result else ()),
        )
        object.__setattr__(new, "_base_config", self._base_config)
        return new

    # --- what it holds ----------------------------------------------------------------------

    @property
    def conversation(self) -> LLMConversation | None:
        """The conversation the deltas apply to; None for a fresh builder."""
        return self._conversation

    @property
    def delta_messages(self) -> MessageList:
        """A copy of the messages this builder will add."""
        return self._delta_messages.copy()

    @property
    def delta_config(self) -> dict[str, Any]:
        """A copy of the config changes this builder will apply."""
        return dict(self._delta_config)

    # --- messages ---------------------------------------------------------------------------

    def agent(self, text: str) -> LLMPromptBuilder:
        """Add a system prompt."""
        return self._copy(AgentMessage(_text(text, "agent")))

    def assistant(self, text: str) -> LLMPromptBuilder:
        """Inject an assistant message (priming, or a prefill when it is last)."""
        return self._copy(TextMessage(_text(text, "assistant"), Role.ASSISTANT))

    def context(self, text: str) -> LLMPromptBuilder:
        """Add user-side context."""
        return self._copy(TextMessage(_text(text, "context"), Role.USER))

    def request(self, text: str) -> LLMPromptBuilder:
        """Add the user's request."""
        return self._copy(TextMessage(_text(text, "request"), Role.USER))

    def tool_result(
        self, tool_call_id: str, result: Any = None, error: str | None = None
    ) -> LLMPromptBuilder:
        """Complete a pending client tool call when the deltas are applied."""
        return self._copy(result=ToolResult(tool_call_id, result, error))

    # --- config -----------------------------------------------------------------------------

    def provider(self, provider_name: str) -> LLMPromptBuilder:
        """Run on this provider from now on."""
        return self._copy(config={"preferred_provider": provider_name})

    def model(self, model_name: str) -> LLMPromptBuilder:
        """Run on this model from now on."""
        return self._copy(config={"preferred_model": model_name})

    def tools(self, *tool_functions: Callable[..., Any] | Tool) -> LLMPromptBuilder:
        """Make these tools available in addition to those already configured.

        A function becomes a server-side tool (``Tool.from_function``); pass ``Tool.client(...)``
        for a tool the caller executes. A tool replaces a configured one of the same name.
        """
        added = [f if isinstance(f, Tool) else Tool.from_function(f) for f in tool_functions]
        earlier = self._delta_config.get("tools") or ()
        return self._copy(config={"tools": [*earlier, *added]})

    def reasoning(
        self,
        effort: Effort | None = None,
        *,
        budget_tokens: int | None = None,
        summary: Summary | None = None,
    ) -> LLMPromptBuilder:
        """Ask the model to reason: ``effort`` ``none``, ``low``, ``medium`` or ``high``, an
        optional token budget and summary (``auto``, ``none``); unset fields: the provider's
        default."""
        value = {"effort": effort, "budget_tokens": budget_tokens, "summary": summary}
        return self._copy(config={"reasoning": value})

    def configure(self, **changes: Any) -> LLMPromptBuilder:
        """Change any config key: ``temperature``, ``max_output_tokens``, ``max_tool_rounds``,
        ``tool_timeout``, ``context_max_tokens``, ``model_selector``… ``None`` resets one.
        """
        return self._copy(config=changes)

    # --- execution --------------------------------------------------------------------------

    def prompt_conversation(self, **config: Any) -> LLMConversation:
        """Apply the deltas to the conversation (a new one for a fresh builder) and return it.

        Keyword arguments are config changes too (``prompt_conversation(temperature=0.2)``).
        All or nothing: on DeltaApplicationError the conversation is unchanged.
        """
        conversation = self._conversation or LLMConversation(config=self._base_config)
        changes = {**self._delta_config, **config}
        if changes.get("tools"):
            changes["tools"] = _merged(list(conversation.config.tools), changes["tools"])
        conversation.apply_delta(self._delta_messages, changes, self._results)
        conversation._restart_iteration()
        return conversation

    async def prompt(self, **config: Any) -> str:
        """One-shot: run a conversation to its end and return the final assistant text."""
        final = await _final_message(self.prompt_conversation(**config))
        if isinstance(final, TextMessage) and final.role is Role.ASSISTANT:
            return final.text
        return ""  # pragma: no cover - a run without pending calls ends with assistant text

    async def prompt_for_image(self, **config: Any) -> Image:
        """One-shot image (seed 000 R9.3): the same conversation run as ``prompt()``, with
        ``image_generation: required``; returns the image the final reply carries (stored in
        the conversation's file store, or in memory when it has none). A conversation this
        builder continues keeps the image in its history and its own image setting after.
        Raises ConversationError when the model made no image.
        """
        base = self._conversation.config if self._conversation else self._base_config
        changes = {**self._delta_config, **config}
        before = changes.get("image_generation", base.image_generation)
        changes["image_generation"] = "required"
        if not isinstance(changes.get("attachments", base.attachments), AttachmentStore):
            changes["attachments"] = MemoryAttachments()
        conversation = self.prompt_conversation(**changes)
        try:
            final = await _final_message(conversation)
        finally:
            conversation.apply_config_deltas({"image_generation": before})
        images = [a for a in getattr(final, "attachments", ()) if a.kind == "image"]
        store = conversation.config.attachments
        if not images or store is None:
            raise ConversationError("the model answered without an image")
        return Image(images[-1], await store.read(images[-1].file_id))

    def load_conversation(self, source: Source) -> LLMConversation:
        """A new conversation from a saved MessageList (file name, Path, stream or dict).

        It runs with this builder's config (the referenced conversation's, for a continuation
        builder); this builder's deltas are then applied to it, as ``prompt_conversation`` would.
        """
        messages = load_message_list(source)
        base = self._base_config if self._conversation is None else self._conversation.config
        target = LLMPromptBuilder(
            LLMConversation(messages, base),
            self._delta_messages,
            self._delta_config,
            _tool_results=self._results,
        )
        return target.prompt_conversation()


async def _final_message(conversation: LLMConversation) -> Message | None:
    """Run ``conversation`` to its end (its async iteration, as every run goes) and return
    its last message; a run left waiting for client tool calls is an error."""
    final: Message | None = None
    async for message in conversation:
        final = message
    pending = conversation.messages.pending_tool_calls()
    if pending:
        ids = ", ".join(repr(call.tool_call_id) for _, call in pending)
        raise ConversationConfigurationError(
            f"the run stopped for client tool calls ({ids}), which prompt() cannot finish: "
            "use prompt_conversation(), then add_tool_result() and iterate again"
        )
    return final


def _text(text: Any, method: str) -> str:
    if not isinstance(text, str):
        raise TypeError(f".{method}() takes text (a str), not {type(text).__name__}")
    return text.strip()


def _merged(current: list[Tool], added: list[Any]) -> list[Tool]:
    """``current`` with ``added`` on top; a tool of the same name is replaced."""
    added = [Tool.from_function(t) for t in added]
    names = {t.name for t in added}
    return [*(t for t in current if t.name not in names), *added]
