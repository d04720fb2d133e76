"""The bodies of the stream's events, as the OpenAPI document describes them: the runs layer's
own types (app/runs/payloads.py declares and builds them), re-exported for the document.

May import the runs layer's event vocabulary.
"""

from __future__ import annotations

from app.runs.payloads import (
    EVENT_DATA,
    ContentBlockDeltaData,
    ContentBlockStartData,
    ContentBlockStopData,
    DoneData,
    ErrorEventData,
    EventData,
    EventName,
    MessageData,
    MessageStopData,
    PendingToolCall,
    RequiresActionData,
    RunStartedData,
    StreamUsage,
    ToolUseData,
)

__all__ = [
    "EVENT_DATA",
    "ContentBlockDeltaData",
    "ContentBlockStartData",
    "ContentBlockStopData",
    "DoneData",
    "ErrorEventData",
    "EventData",
    "EventName",
    "MessageData",
    "MessageStopData",
    "PendingToolCall",
    "RequiresActionData",
    "RunStartedData",
    "StreamUsage",
    "ToolUseData",
]
