"""Request and response schemas of the HTTP API (pydantic); never domain or storage types.

May import pydantic, and the runs layer's event vocabulary (the stream's event bodies and the
run statuses are declared once, in app/runs/payloads.py, and documented from there). One module
a topic: config patches, messages, conversations, runs, the stream's event bodies, history;
re-exported here. The examples become the OpenAPI document's.
"""

from app.api.schemas.base import (
    MAX_INDEX,
    SERVED,
    TOOL_NAME,
)
from app.api.schemas.config import (
    ClientToolIn,
    ConfigPatch,
    ReasoningPatch,
)
from app.api.schemas.conversations import (
    ContextMessage,
    ContextOut,
    ConversationCreate,
    ConversationListItem,
    ConversationOut,
    ConversationPage,
    ConversationPatch,
    Status,
)
from app.api.schemas.events import (
    ContentBlockDeltaData,
    ContentBlockStartData,
    ContentBlockStopData,
    DoneData,
    ErrorEventData,
    MessageData,
    MessageStopData,
    PendingToolCall,
    RequiresActionData,
    RunStartedData,
    StreamUsage,
    ToolUseData,
)
from app.api.schemas.history import (
    AnthropicMessagesOut,
    ForkIn,
    ImportIn,
    MessagePage,
    OpenAIMessagesOut,
    RewindIn,
)
from app.api.schemas.messages import (
    AssistantMessageIn,
    AttachmentIn,
    DeltaBundle,
    InitialMessageIn,
    MessageIn,
    MessageListDocument,
    SystemMessageIn,
    TextMessageIn,
    ToolMessageIn,
    UserMessageIn,
)
from app.api.schemas.runs import (
    CACHE_READ_TOKENS,
    CACHE_WRITE_TOKENS,
    INPUT_TOKENS,
    OUTPUT_TOKENS,
    REASONING_TOKENS,
    CancelOut,
    RunOut,
    RunPage,
    RunStatusOut,
    UsageOut,
)

__all__ = [
    "CACHE_READ_TOKENS",
    "CACHE_WRITE_TOKENS",
    "INPUT_TOKENS",
    "MAX_INDEX",
    "OUTPUT_TOKENS",
    "REASONING_TOKENS",
    "SERVED",
    "TOOL_NAME",
    "AnthropicMessagesOut",
    "AssistantMessageIn",
    "AttachmentIn",
    "CancelOut",
    "ClientToolIn",
    "ConfigPatch",
    "ContentBlockDeltaData",
    "ContentBlockStartData",
    "ContentBlockStopData",
    "ContextMessage",
    "ContextOut",
    "ConversationCreate",
    "ConversationListItem",
    "ConversationOut",
    "ConversationPage",
    "ConversationPatch",
    "DeltaBundle",
    "DoneData",
    "ErrorEventData",
    "ForkIn",
    "ImportIn",
    "InitialMessageIn",
    "MessageData",
    "MessageIn",
    "MessageListDocument",
    "MessagePage",
    "MessageStopData",
    "OpenAIMessagesOut",
    "PendingToolCall",
    "ReasoningPatch",
    "RequiresActionData",
    "RewindIn",
    "RunOut",
    "RunPage",
    "RunStartedData",
    "RunStatusOut",
    "Status",
    "StreamUsage",
    "SystemMessageIn",
    "TextMessageIn",
    "ToolMessageIn",
    "ToolUseData",
    "UsageOut",
    "UserMessageIn",
]
