"""A conversation's config as a request patches it: tools, reasoning, provider and sampling.

May import pydantic and the schemas' base. The examples here become the OpenAPI document's examples.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.api.schemas.base import TOOL_NAME, empty_object_schema


class ClientToolIn(BaseModel):
    """A tool the client executes: the run stops with the call pending until its result."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=TOOL_NAME, examples=["lookup_order"])
    description: str = Field("", max_length=4000)
    # Any, not JsonValue: a body is JSON already, and a recursive `$ref` under
    # `additionalProperties` is what schemathesis cannot negate ("Cannot generate an array with
    # 1 demanded elements" for `POST …/deltas` in negative mode).
    parameters: dict[str, Any] = Field(
        default_factory=empty_object_schema,
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
            self.parameters = empty_object_schema()
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
    tools: list[str] | None = Field(
        None,
        description="Names of server-side tools; `image_generation` lets the model make images "
        "(OpenAI Responses' image tool; the offline model draws for a message starting `draw`).",
    )
    client_tools: list[ClientToolIn] | None = None
    # Strict: "1", true or 1.0 are not numbers here (a client's type bug, not a setting).
    temperature: float | None = Field(None, ge=0, le=2, strict=True, allow_inf_nan=False)
    max_output_tokens: int | None = Field(None, ge=1, le=1_000_000, strict=True)
    context_max_tokens: int | None = Field(None, ge=1, le=10_000_000, strict=True)
    max_tool_rounds: int | None = Field(None, ge=0, le=100, strict=True)
    reasoning: ReasoningPatch | None = Field(
        None, description="Reasoning effort, budget and summary; `null` resets all three."
    )
