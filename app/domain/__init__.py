"""Parley's domain: messages, MessageList, LLMConversation, LLMPromptBuilder, the model interface.

Imports only the standard library: it runs in a plain Python process and is usable as a library.
"""

from app.domain.adapter import (
    ContentBlockDelta,
    ContentBlockStart,
    ContentBlockStop,
    ImageDone,
    MessageStop,
    ModelAdapter,
    ModelResponse,
    Reasoning,
    ReasoningDone,
    RequestOptions,
    StreamChunk,
    ToolSpec,
    ToolUse,
    Usage,
    collect_response,
)
from app.domain.attachments import (
    Attachment,
    AttachmentReader,
    AttachmentStore,
    Image,
    MemoryAttachments,
    RunAttachments,
)
from app.domain.builder import LLMPromptBuilder
from app.domain.config import ConversationConfig
from app.domain.context import ContextWindow, approximate_tokens, context_within
from app.domain.conversation import LLMConversation, MessageAppended, RunEvent, ToolResult
from app.domain.errors import (
    ContextWindowError,
    ConversationConfigurationError,
    ConversationError,
    ConversationFileError,
    DeltaApplicationError,
    MessageListDeserializationError,
    MessageListSerializationError,
    ProviderError,
    ProviderFormatError,
    ToolRoundLimitError,
)
from app.domain.formats import to_anthropic_format, to_openai_format
from app.domain.message_list import (
    ATTACHMENTS_FORMAT_VERSION,
    FORMAT_VERSION,
    REASONING_FORMAT_VERSION,
    MessageList,
    format_version,
)
from app.domain.messages import (
    AgentMessage,
    Message,
    ReasoningMessage,
    Role,
    TextMessage,
    ToolCallMessage,
)
from app.domain.provider_import import from_anthropic_format, from_openai_format
from app.domain.repair import (
    RepairedMessage,
    interrupt_passed_calls,
    repair_history,
    repair_with_sources,
)
from app.domain.selection import DefaultModelSelectionStrategy, ModelSelectionStrategy
from app.domain.tools import Tool, to_jsonable

__all__ = [
    "ATTACHMENTS_FORMAT_VERSION",
    "FORMAT_VERSION",
    "REASONING_FORMAT_VERSION",
    "AgentMessage",
    "Attachment",
    "AttachmentReader",
    "AttachmentStore",
    "ContentBlockDelta",
    "ContentBlockStart",
    "ContentBlockStop",
    "ContextWindow",
    "ContextWindowError",
    "ConversationConfig",
    "ConversationConfigurationError",
    "ConversationError",
    "ConversationFileError",
    "DefaultModelSelectionStrategy",
    "DeltaApplicationError",
    "Image",
    "ImageDone",
    "LLMConversation",
    "LLMPromptBuilder",
    "MemoryAttachments",
    "Message",
    "MessageAppended",
    "MessageList",
    "MessageListDeserializationError",
    "MessageListSerializationError",
    "MessageStop",
    "ModelAdapter",
    "ModelResponse",
    "ModelSelectionStrategy",
    "ProviderError",
    "ProviderFormatError",
    "Reasoning",
    "ReasoningDone",
    "ReasoningMessage",
    "RepairedMessage",
    "RequestOptions",
    "Role",
    "RunAttachments",
    "RunEvent",
    "StreamChunk",
    "TextMessage",
    "Tool",
    "ToolCallMessage",
    "ToolResult",
    "ToolRoundLimitError",
    "ToolSpec",
    "ToolUse",
    "Usage",
    "approximate_tokens",
    "collect_response",
    "context_within",
    "format_version",
    "from_anthropic_format",
    "from_openai_format",
    "interrupt_passed_calls",
    "repair_history",
    "repair_with_sources",
    "to_anthropic_format",
    "to_jsonable",
    "to_openai_format",
]
