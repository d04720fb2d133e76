"""Request and response schemas of the history routes (issue 14): fork, rewind, import, pages.

May import pydantic and the other schema modules.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from app.api.schemas.base import MAX_INDEX, SERVED
from app.api.schemas.config import ConfigPatch


class ForkIn(BaseModel):
    """How much of the conversation the fork starts with."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"keep": 4}]})

    keep: int | None = Field(
        None,
        ge=0,
        le=MAX_INDEX,
        strict=True,
        description="Copy the first `keep` messages (default: all).",
    )


class RewindIn(BaseModel):
    """How many messages to keep; the later ones are dropped."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"keep": 2}]})

    keep: int = Field(
        ge=0, le=MAX_INDEX, strict=True, description="Keep the first `keep` messages."
    )


class ImportIn(BaseModel):
    """A provider's own request shape, plus an optional config and metadata.

    OpenAI: `messages` with `system`, `user`, `assistant` (with `tool_calls`) and `tool`
    messages. Anthropic: `system` and `messages` with `text`, `tool_use`, `tool_result`,
    `thinking` and `redacted_thinking` blocks (kept as Anthropic's reasoning, byte for byte).
    Other request keys (`model`, `max_tokens`, …) are accepted and ignored.
    """

    model_config = ConfigDict(
        extra="allow",
        json_schema_extra={
            "examples": [
                {
                    "messages": [
                        {"role": "system", "content": "Be brief."},
                        {"role": "user", "content": "What time is it?"},
                        {
                            "role": "assistant",
                            "content": None,
                            "tool_calls": [
                                {
                                    "id": "call_1",
                                    "type": "function",
                                    "function": {"name": "clock", "arguments": "{}"},
                                }
                            ],
                        },
                        {"role": "tool", "tool_call_id": "call_1", "content": '"12:00"'},
                    ],
                    "metadata": {"source": "openai"},
                }
            ]
        },
    )

    messages: list[dict[str, JsonValue]]
    system: str | list[dict[str, JsonValue]] | None = Field(
        None, description="Anthropic only: a string or text blocks."
    )
    config: ConfigPatch | None = None
    metadata: dict[str, JsonValue] = Field(default_factory=dict)


class MessagePage(BaseModel):
    """A page of the serialized MessageList: the messages from index `start` on."""

    model_config = SERVED

    messages: list[JsonValue]
    version: str = Field(
        description='The format\'s version these messages need: "1.2" when they carry '
        'attachments, "1.1" when they hold reasoning, else "1.0".'
    )
    start: int = Field(description="The index of the first message of this page.")
    total: int = Field(description="How many messages the conversation holds.")
    next_after: int | None = Field(
        None, description="Pass as `?after=` for the next page; null on the last page."
    )


class OpenAIMessagesOut(BaseModel):
    """`?format=openai`: the chat-completions `messages` (system, user, assistant with
    `tool_calls`, tool); reasoning is left out (Chat Completions has no place for it)."""

    messages: list[dict[str, JsonValue]]


class AnthropicMessagesOut(BaseModel):
    """`?format=anthropic`: the Messages API's `system` and `messages` with `text`,
    `tool_use` and `tool_result` blocks, and Anthropic's own reasoning as `thinking` and
    `redacted_thinking` blocks (other providers' reasoning is left out)."""

    system: str = Field(description="The system prompt (empty without one).")
    messages: list[dict[str, JsonValue]]
