"""Settings of the SSE streams' reconnect behaviour (a mixin of ``Settings``).

Imports pydantic-settings only.
"""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings


class StreamSettings(BaseSettings):
    """How a client that lost its stream reconnects."""

    sse_retry_ms: int = Field(
        1000,
        ge=0,
        le=3_600_000,
        description="Milliseconds an `EventSource` waits before it reconnects after a dropped "
        "stream: sent as `retry:` once at the start of every SSE response.",
    )
