"""Request and response schemas of the HTTP API (pydantic); never domain or storage types.

May import pydantic only. The examples here become the OpenAPI document's examples.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator

TOOL_NAME = r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$"
MAX_INDEX = 2_147_483_647  # the largest message index or count a request may name


def _empty_object_schema() -> dict[str, JsonValue]:
    return {"type": "object", "properties": {}}


class ClientToolIn(BaseModel):
    """A tool the client executes: the run stops with the call pending until its result."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=TOOL_NAME, examples=["lookup_order"])
    description: str = Field("", max_length=4000)
    parameters: dict[str, JsonValue] = Field(
        default_factory=_empty_object_schema,
        description='A JSON schema with `"type": "object"`; `{}` (or leaving it out) '
        "declares a tool without parameters.",
        examples=[{"type": "object", "properties": {"order_id": {"type": "string"}}}],
        json_schema_extra={
            "anyOf": [
                {"maxProperties": 0},
                {"required": ["type"], "properties": {"type": {"const": "object"}}},
            ]
        },
    )

    @model_validator(mode="after")
    def _object_schema(self) -> ClientToolIn:
        if not self.parameters:
            self.parameters = _empty_object_schema()
        elif self.parameters.get("type") != "object":
            raise ValueError('parameters must be a JSON schema with "type": "object"')
        return self


class ReasoningPatch(BaseModel):
    """How much the model reasons (merged key by key; ``null`` resets a key to the provider's
    default). docs/providers.md says how each provider takes it."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"effort": "low"}]})

    effort: Literal["none", "low", "medium", "high"] | None = Field(
        None, description="`none` turns reasoning off where the model allows it."
    )
    budget_tokens: int | None = Field(
        None,
        ge=1024,
        le=1_000_000,
        strict=True,
        description="The most tokens the model may spend reasoning, where it takes a budget.",
    )
    summary: Literal["auto", "none"] | None = Field(
        None, description="Whether the provider should summarize its reasoning for display."
    )


class ConfigPatch(BaseModel):
    """A JSON Merge Patch over the conversation's config: ``null`` resets a key; an object
    (``reasoning``) is merged key by key."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"provider": "offline", "temperature": None},
                {"reasoning": {"effort": "low"}},
            ]
        },
    )

    provider: str | None = Field(None, min_length=1, max_length=64)
    model: str | None = Field(None, min_length=1, max_length=200)
    tools: list[str] | None = Field(None, description="Names of server-side tools.")
    client_tools: list[ClientToolIn] | None = None
    # Strict: "1", true or 1.0 are not numbers here (a client's type bug, not a setting).
    temperature: float | None = Field(None, ge=0, le=2, strict=True, allow_inf_nan=False)
    max_output_tokens: int | None = Field(None, ge=1, le=1_000_000, strict=True)
    context_max_tokens: int | None = Field(None, ge=1, le=10_000_000, strict=True)
    max_tool_rounds: int | None = Field(None, ge=0, le=100, strict=True)
    reasoning: ReasoningPatch | None = Field(
        None, description="Reasoning effort, budget and summary; `null` resets all three."
    )


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


class UserMessageIn(TextMessageIn):
    """A user message (the builder's `.request()`)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"role": "user", "text": "Why is the sky blue?"}]},
    )
    role: Literal["user"]


class AssistantMessageIn(TextMessageIn):
    """An injected assistant message (the builder's `.assistant()`); last, it is a prefill."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"role": "assistant", "text": "Sure, ask away."}]},
    )
    role: Literal["assistant"]


def _result_or_error(schema: dict[str, Any]) -> None:
    schema["anyOf"] = [{"required": ["result"]}, {"required": ["error"]}]
    schema["not"] = {  # an error has no result
        "required": ["result", "error"],
        "properties": {"result": {"not": {"type": "null"}}, "error": {"type": "string"}},
    }
    schema["examples"] = [{"role": "tool", "tool_call_id": "call_1", "result": {"temp_c": 21}}]


class ToolMessageIn(BaseModel):
    """The result (or error) of a pending client tool call: `result` or `error` is required;
    with an `error`, `result` is absent or null."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_result_or_error)

    role: Literal["tool"]
    tool_call_id: str = Field(min_length=1, max_length=200)
    result: JsonValue = Field(None, description="What the tool returned (any JSON).")
    error: str | None = Field(
        None, description="What went wrong, when the tool failed (then no `result`)."
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
    or "1.1" when it holds a `ReasoningMessage` (docs/format.md)."""

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
    version: Literal["1.0", "1.1"] = Field(
        description='The serialized format\'s version: "1.1" when the messages hold reasoning.'
    )


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

# A response model: every field is always served (a default too), so the document marks
# every field required, and a generated client reads it without an "unset" case.
SERVED = ConfigDict(json_schema_serialization_defaults_required=True)


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


class CancelOut(BaseModel):
    """The run that was asked to stop."""

    model_config = SERVED

    run_id: str
    status: Literal["cancelling"] = "cancelling"


RunStatusOut = Literal[
    "running", "completed", "requires_action", "aborted", "failed", "interrupted"
]


INPUT_TOKENS = "Every token of the requests, cached ones included."
OUTPUT_TOKENS = "Every token of the replies, reasoning included."
REASONING_TOKENS = "The part of `output_tokens` spent reasoning."
CACHE_READ_TOKENS = "The part of `input_tokens` read from the provider's prompt cache."
CACHE_WRITE_TOKENS = "The part of `input_tokens` written to the provider's prompt cache."


class UsageOut(BaseModel):
    """Tokens the provider counted for the run (all its model replies), by kind; 0 for a kind
    the provider did not count."""

    model_config = SERVED

    input_tokens: int = Field(0, description=INPUT_TOKENS)
    output_tokens: int = Field(0, description=OUTPUT_TOKENS)
    reasoning_tokens: int = Field(0, description=REASONING_TOKENS)
    cache_read_tokens: int = Field(0, description=CACHE_READ_TOKENS)
    cache_write_tokens: int = Field(0, description=CACHE_WRITE_TOKENS)


class RunOut(BaseModel):
    """One run of the model on a conversation."""

    model_config = SERVED

    id: str
    conversation_id: str
    status: RunStatusOut = Field(
        description="`running` until it ends; `interrupted` when its process stopped (shutdown, "
        "crash) before it could finish."
    )
    on_disconnect: Literal["cancel", "continue"]
    cancel_requested: bool
    error_code: str | None = Field(None, description="The `code` of its `error` event, if any.")
    usage: UsageOut | None = None
    created_at: datetime
    finished_at: datetime | None = None


class RunPage(BaseModel):
    """One page of a conversation's runs, newest first."""

    model_config = SERVED

    items: list[RunOut]
    next_cursor: str | None = Field(None, description="Pass as ?cursor= for the next page.")


# --- the bodies of the stream's events (app/runs/events.py builds them) -------------------------


class RunStartedData(BaseModel):
    """`run_started`: the run began; its id, and the conversation as the run found it."""

    run_id: str
    conversation_id: str
    message_count: int
    version: int


class ContentBlockStartData(BaseModel):
    """`content_block_start`: a block of the model's reply begins; `index` is unique within
    the reply. A `reasoning` block streams the model's reasoning (its stored
    `ReasoningMessage` is announced by a `message` event); a `text` block, the reply's text."""

    index: int
    type: Literal["text", "reasoning"]


class ContentBlockStopData(BaseModel):
    """`content_block_stop`: the block at `index` is complete."""

    index: int


class ContentBlockDeltaData(BaseModel):
    """`content_block_delta`: the next piece of a block's text."""

    index: int
    delta: str


class ToolUseData(BaseModel):
    """`tool_use`: the model calls a tool."""

    tool_call_id: str
    tool_name: str
    params: dict[str, JsonValue]


class StreamUsage(BaseModel):
    """Tokens the provider counted for one model reply, by kind (null for a kind it did not
    count)."""

    input_tokens: int | None = Field(description=INPUT_TOKENS)
    output_tokens: int | None = Field(description=OUTPUT_TOKENS)
    reasoning_tokens: int | None = Field(description=REASONING_TOKENS)
    cache_read_tokens: int | None = Field(description=CACHE_READ_TOKENS)
    cache_write_tokens: int | None = Field(description=CACHE_WRITE_TOKENS)


class MessageStopData(BaseModel):
    """`message_stop`: the model's reply ended."""

    stop_reason: str
    usage: StreamUsage


class MessageData(BaseModel):
    """`message`: a message appended to the conversation and already stored, at `index`, in
    the serialized format; `version` is the conversation's after it. A `ReasoningMessage`
    carries its opaque `payload` here too (it may be several KB)."""

    index: int
    version: int
    message: dict[str, JsonValue]


class PendingToolCall(BaseModel):
    """A client tool call that waits for its result."""

    tool_call_id: str
    tool_name: str
    arguments: dict[str, JsonValue]


class RequiresActionData(BaseModel):
    """`requires_action`: the client tool calls whose results the run waits for."""

    tool_calls: list[PendingToolCall]


class ErrorEventData(BaseModel):
    """`error`: why the run stopped (a stable `code`, as problem+json's), sent before `done`."""

    code: str
    detail: str
    retryable: bool
    retry_after: float | None = Field(
        None, description="Seconds to wait before retrying, when the provider named them."
    )


class DoneData(BaseModel):
    """`done`, always last: how the run ended and the conversation after it."""

    status: Literal["completed", "requires_action", "aborted", "failed", "interrupted"]
    message_count: int
    version: int
