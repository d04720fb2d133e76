"""Conversations in and out: create, the served conversation, its pages and its context.

May import pydantic and the other schema modules.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    TypeAdapter,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapValidator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from app.api.schemas.base import SERVED
from app.api.schemas.config import ConfigPatch
from app.api.schemas.messages import InitialMessageIn, MessageListDocument

_ITEMS: TypeAdapter[list[InitialMessageIn]] = TypeAdapter(list[InitialMessageIn])
_DOCUMENT = TypeAdapter(MessageListDocument)


def _by_json_type(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """An array is a delta's messages, an object the serialized document: each validated as
    itself, so that an error is located as ``messages.<i>.<field>`` (no union branch names)."""
    if value is None:
        return handler(value)
    if isinstance(value, list):
        _no_tool_results(value)
        return _ITEMS.validate_python(value)
    if isinstance(value, dict | MessageListDocument):
        return _DOCUMENT.validate_python(value)
    raise PydanticCustomError(
        "messages_type",
        "messages is a list of messages (as deltas take them) or the serialized document "
        "(an object with version and messages)",
    )


def _no_tool_results(items: list[Any]) -> None:
    errors = [
        InitErrorDetails(
            type=PydanticCustomError(
                "tool_result_at_create",
                "a tool result answers a pending tool call, and a new conversation has none: "
                "post it to …/deltas",
            ),
            loc=(i, "role"),
            input="tool",
        )
        for i, item in enumerate(items)
        if isinstance(item, dict) and item.get("role") == "tool"
    ]
    if errors:
        raise ValidationError.from_exception_data("messages", errors)


InitialMessages = Annotated[
    list[InitialMessageIn] | MessageListDocument | None, WrapValidator(_by_json_type)
]
"""A new conversation's messages, told apart by JSON type: an array of delta messages, or
an object, the serialized document (as ``GET …/messages`` gives it)."""


class ConversationCreate(BaseModel):
    """A new conversation: optional system prompt, config, metadata and first messages."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"system_prompt": "You are a helpful assistant.", "metadata": {"topic": "demo"}},
                {"messages": [{"role": "user", "text": "Why is the sky blue?"}]},
            ]
        },
    )

    system_prompt: str | None = None
    config: ConfigPatch | None = None
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    messages: InitialMessages = Field(
        None,
        description="The first messages, after `system_prompt`: either a list of messages as "
        "`POST …/deltas` takes them (`system`, `user`, `assistant`; no `tool` results), or "
        "an object, the serialized document as `GET …/messages` gives it (with `version`).",
    )


class ConversationPatch(BaseModel):
    """A JSON Merge Patch (RFC 7396) of what describes a conversation; a member left out stays
    as it is, a null removes it (the title; all the metadata; `archived` becomes false)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"title": "Why the sky is blue"},
                {"metadata": {"topic": "physics", "draft": None}, "archived": True},
            ]
        },
    )

    title: str | None = Field(
        None,
        max_length=200,
        strict=True,
        description="The new title (trimmed); null or a blank one clears it.",
    )
    metadata: dict[str, JsonValue] | None = Field(
        None,
        description="Merged into the stored metadata (RFC 7396: a null member removes that "
        "key, an object merges into the stored object); null empties the metadata.",
    )
    archived: bool | None = Field(
        None, strict=True, description="Archive (true) or restore (false)."
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
    title: str | None = Field(
        None,
        description="Set by `PATCH`, or made after the first completed reply when the server "
        "sets `PARLEY_AUTO_TITLE`; null until then.",
    )
    archived: bool = Field(
        False, description="Archived conversations are listed only with `?archived=true`."
    )


class ConversationListItem(ConversationOut):
    """A conversation in a listing; in a search (`?q=`), with the text that matched."""

    snippet: str | None = Field(
        None,
        description="With `q`: the words around the match in the best-matching message (or "
        "the title, when only the title matched); null without `q`.",
    )


class ConversationPage(BaseModel):
    """One page of conversations: newest first, or best match first with `q`."""

    model_config = SERVED

    items: list[ConversationListItem]
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
