"""Conversations in and out: create, the served conversation, its pages and its context.

May import pydantic and the other schema modules.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from app.api.schemas.base import SERVED
from app.api.schemas.config import ConfigPatch
from app.api.schemas.messages import MessageListDocument


class ConversationCreate(BaseModel):
    """A new conversation: optional system prompt, config, metadata and imported messages."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"system_prompt": "You are a helpful assistant.", "metadata": {"topic": "demo"}}
            ]
        },
    )

    system_prompt: str | None = None
    config: ConfigPatch | None = None
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    messages: MessageListDocument | None = Field(
        None, description="Messages to load, in the serialized format."
    )


Status = Literal["idle", "running", "requires_action"]


class ConversationOut(BaseModel):
    """A conversation's state (its messages are at ``…/messages``)."""

    model_config = SERVED

    id: str
    created_at: datetime
    updated_at: datetime
    status: Status
    config: dict[str, Any]
    metadata: dict[str, Any]
    message_count: int
    version: int
    run_id: str | None = Field(None, description="The running run, while status is running.")
    pending_tool_call_ids: list[str] = Field(default_factory=list)


class ConversationPage(BaseModel):
    """One page of conversations, newest first."""

    model_config = SERVED

    items: list[ConversationOut]
    next_cursor: str | None = Field(None, description="Pass as ?cursor= for the next page.")


class ContextMessage(BaseModel):
    """One message a run would send, with its index and token count.

    The history is repaired before it is sent (docs/format.md): a message may stand for
    several stored ones (``indices``) and differ from what is stored (``repaired``).
    """

    index: int = Field(description="The stored index of the first message it was made from.")
    indices: list[int] = Field(description="The stored indices of every message it was made from.")
    repaired: bool = Field(description="True when it differs from the stored message.")
    tokens: int
    message: dict[str, Any]


class ContextOut(BaseModel):
    """What a run would send within ``max_tokens``."""

    max_tokens: int | None
    total_tokens: int
    exact: bool = Field(description="True when counted with the model's own tokenizer.")
    dropped: int = Field(description="Messages left out to fit the budget.")
    messages: list[ContextMessage]
