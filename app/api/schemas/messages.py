"""Messages as a request sends them: the delta bundle and the serialized MessageList document.

May import pydantic and the other schema modules. The examples become the OpenAPI document's.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator

from app.api.schemas.config import ConfigPatch


class TextMessageIn(BaseModel):
    """A message made of text: `system`, `user` or `assistant`."""

    model_config = ConfigDict(extra="forbid")

    role: Literal["system", "user", "assistant"]
    text: str = Field(description="The message's text.")


class SystemMessageIn(TextMessageIn):
    """A system message: an instruction (the builder's `.agent()`)."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"role": "system", "text": "Be brief."}]}
    )
    role: Literal["system"]


DATA_URL = r"^data:[A-Za-z0-9.+-]+/[A-Za-z0-9.+-]+;base64,[A-Za-z0-9+/=\s]*$"


class AttachmentIn(BaseModel):
    """A file a user message carries: `file_id`, a file uploaded with `POST /files`; or
    `data`, the file itself as a base64 `data:` URL (stored as a file on arrival, then referred
    to like an upload; `name` names it). The message stores the reference, never the bytes."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"file_id": "0b5e9c3a4f6d4b1f9a2c7e8d1f0a3b4c"},
                {"data": "data:image/png;base64,iVBORw0KGgo…", "name": "cat.png"},
            ],
            # exactly one of the two, as text (null is absent): what the validator below checks
            "oneOf": [
                {"required": ["file_id"], "properties": {"file_id": {"type": "string"}}},
                {"required": ["data"], "properties": {"data": {"type": "string"}}},
            ],
        },
    )

    file_id: str | None = Field(None, min_length=1, max_length=64, description="An uploaded file.")
    data: str | None = Field(
        None,
        pattern=DATA_URL,
        description="The file inline, as `data:<media type>;base64,<bytes>`.",
    )
    name: str | None = Field(None, max_length=255, description="The inline file's name.")

    @model_validator(mode="after")
    def _one_source(self) -> AttachmentIn:
        if (self.file_id is None) == (self.data is None):
            raise ValueError("an attachment has a file_id or data, not both or neither")
        return self


class UserMessageIn(TextMessageIn):
    """A user message (the builder's `.request()`), with the files it carries, if any."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"role": "user", "text": "Why is the sky blue?"},
                {
                    "role": "user",
                    "text": "What is in this picture?",
                    "attachments": [{"file_id": "0b5e9c3a4f6d4b1f9a2c7e8d1f0a3b4c"}],
                },
            ]
        },
    )
    role: Literal["user"]
    attachments: list[AttachmentIn] = Field(
        default_factory=list,
        max_length=20,
        description="Files (images, PDFs, text) the message refers to; by reference only.",
    )


class AssistantMessageIn(TextMessageIn):
    """An injected assistant message (the builder's `.assistant()`); last, it is a prefill."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"role": "assistant", "text": "Sure, ask away."}]},
    )
    role: Literal["assistant"]


def _result_or_error(schema: dict[str, Any]) -> None:
    # A result (and no error but null), or an error (and no result but null). Spelled without
    # `not`, which generators (schemathesis's negative mode) cannot draw the opposite of; and
    # inside `allOf`, which means the same: openapi-typescript 7 types an object whose own
    # `anyOf` lists only `required` as `unknown` (and with it every delta bundle).
    schema["allOf"] = [
        {
            "anyOf": [
                {"required": ["result"], "properties": {"error": {"type": "null"}}},
                {"required": ["error"], "properties": {"result": {"type": "null"}}},
            ]
        }
    ]
    schema["examples"] = [
        {"role": "tool", "tool_call_id": "call_1", "result": {"temp_c": 21}},
        {
            "role": "tool",
            "tool_call_id": "call_2",
            "result": "the chart",
            "attachments": [{"file_id": "0b5e9c3a4f6d4b1f9a2c7e8d1f0a3b4c"}],
        },
    ]


class ToolMessageIn(BaseModel):
    """The result (or error) of a pending client tool call: `result` or `error` is required;
    with an `error`, `result` is absent or null. `attachments`: files the result carries (an
    image a tool made), as a user message's; sent where the provider takes them in a tool
    result (Anthropic, OpenAI Responses), a note elsewhere."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_result_or_error)

    role: Literal["tool"]
    tool_call_id: str = Field(min_length=1, max_length=200)
    result: JsonValue = Field(None, description="What the tool returned (any JSON).")
    error: str | None = Field(
        None, description="What went wrong, when the tool failed (then no `result`)."
    )
    attachments: list[AttachmentIn] = Field(
        default_factory=list,
        max_length=20,
        description="Files (images, PDFs, text) the result carries; by reference only.",
    )

    @model_validator(mode="after")
    def _result_or_error(self) -> ToolMessageIn:
        if "result" not in self.model_fields_set and "error" not in self.model_fields_set:
            raise ValueError("a tool message needs result or error")
        if self.result is not None and self.error is not None:
            raise ValueError("a tool message has a result or an error, not both")
        return self


MessageIn = Annotated[
    SystemMessageIn | UserMessageIn | AssistantMessageIn | ToolMessageIn,
    Field(discriminator="role"),
]
"""One message of a delta bundle, by `role`; `tool` completes a pending client tool call."""

InitialMessageIn = Annotated[
    SystemMessageIn | UserMessageIn | AssistantMessageIn, Field(discriminator="role")
]
"""One message a conversation is created with: a delta's text messages (a `tool` result
answers a pending call, and a new conversation has none)."""


class DeltaBundle(BaseModel):
    """New messages and a config patch, applied all or nothing."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "messages": [
                        {"role": "system", "text": "Answer in one sentence."},
                        {"role": "assistant", "text": "Sure, ask away."},
                        {"role": "user", "text": "Why is the sky blue?"},
                    ],
                    "config": {"provider": "offline", "temperature": None},
                }
            ]
        },
    )

    messages: list[MessageIn] = Field(default_factory=list)
    config: ConfigPatch | None = None


class MessageListDocument(BaseModel):
    """A MessageList in the serialized format, as ``GET …/messages`` gives it: version "1.0",
    "1.1" when it holds a `ReasoningMessage`, "1.2" when a message carries attachments
    (docs/format.md)."""

    model_config = ConfigDict(
        extra="allow",
        json_schema_extra={
            "examples": [
                {
                    "messages": [
                        {"type": "AgentMessage", "text": "Be brief.", "role": "system"},
                        {"type": "TextMessage", "text": "Hi!", "role": "user"},
                    ],
                    "version": "1.0",
                }
            ]
        },
    )

    messages: list[dict[str, JsonValue]]
    version: Literal["1.0", "1.1", "1.2"] = Field(
        description='The serialized format\'s version: "1.1" when the messages hold reasoning, '
        '"1.2" when they carry attachments.'
    )
