"""Runs as the API serves them: a run, its usage, its pages, a cancellation.

May import pydantic, the schemas' base and the runs layer's vocabulary (statuses, usage).
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from app.api.schemas.base import SERVED
from app.runs.events import RunStatus
from app.runs.payloads import (
    CACHE_READ_TOKENS,
    CACHE_WRITE_TOKENS,
    INPUT_TOKENS,
    OUTPUT_TOKENS,
    REASONING_TOKENS,
)

__all__ = [
    "CACHE_READ_TOKENS",
    "CACHE_WRITE_TOKENS",
    "INPUT_TOKENS",
    "OUTPUT_TOKENS",
    "REASONING_TOKENS",
    "CancelOut",
    "RunOut",
    "RunPage",
    "RunStatusOut",
    "UsageOut",
]


class CancelOut(BaseModel):
    """The run that was asked to stop."""

    model_config = SERVED

    run_id: str
    status: Literal["cancelling"] = "cancelling"


RunStatusOut = RunStatus
"""A run's status: the runs layer's own type."""


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
