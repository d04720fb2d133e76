"""Stable error codes, and the one mapping from an exception to its code.

May import the domain, storage and the runs layer's errors. ``ErrorCode`` spells every code;
``code_for`` is what both an ``error`` event (app/runs/events.py) and a problem+json response
(app/api/problems.py: ``type`` ``/problems/<code>`` and ``code``) say for the same exception.
"""

from __future__ import annotations

from enum import StrEnum

from app.domain import (
    ContextWindowError,
    ConversationConfigurationError,
    ConversationError,
    ProviderError,
    ToolRoundLimitError,
)
from app.runs.errors import (
    BadEventId,
    EventsExpired,
    IdempotencyKeyInUse,
    IdempotencyKeyReused,
    InvalidInput,
    NoActiveRun,
    NothingToAnswer,
    PendingToolCalls,
    ShuttingDown,
)
from app.storage import (
    ConversationNotFound,
    DatabaseUnavailable,
    DuplicateToolCall,
    InvalidCursor,
    LeaseHeld,
    LeaseLost,
    RunNotFound,
    StorageConflict,
    StoredDataError,
    ToolCallNotPending,
    VersionConflict,
)
from app.storage.files import FileEmpty, FileInUse, FileNotFound, FileRefused, FileTooLarge


class ErrorCode(StrEnum):
    """Every stable error code, of ``error`` events and of problem+json alike."""

    # the model's provider (app/providers/errors.py raises these as ProviderError codes)
    RATE_LIMITED = "rate_limited"
    AUTHENTICATION = "authentication"
    UPSTREAM_UNAVAILABLE = "upstream_unavailable"
    TIMEOUT = "timeout"
    CONTEXT_TOO_LONG = "context_too_long"
    INVALID_REQUEST = "invalid_request"
    BAD_RESPONSE = "bad_response"
    # the run
    MAX_TOOL_ROUNDS = "max_tool_rounds"
    CONFIGURATION = "configuration"
    LEASE_LOST = "lease_lost"
    SHUTTING_DOWN = "shutting_down"
    NOT_READY = "not_ready"
    DATABASE_UNAVAILABLE = "database_unavailable"
    PROCESS_LOST = "process_lost"
    INTERNAL = "internal"
    # requests (problem+json)
    BAD_REQUEST = "bad_request"
    MALFORMED_JSON = "malformed_json"
    BAD_IF_MATCH = "bad_if_match"
    BAD_LAST_EVENT_ID = "bad_last_event_id"
    INVALID_CURSOR = "invalid_cursor"
    UNAUTHORIZED = "unauthorized"
    HOST_NOT_ALLOWED = "host_not_allowed"
    ORIGIN_NOT_ALLOWED = "origin_not_allowed"
    CORS_NOT_ALLOWED = "cors_not_allowed"
    NOT_FOUND = "not_found"
    CONVERSATION_NOT_FOUND = "conversation_not_found"
    RUN_NOT_FOUND = "run_not_found"
    RUN_EVENTS_EXPIRED = "run_events_expired"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    CONFLICT = "conflict"
    CONVERSATION_RUNNING = "conversation_running"
    TOOL_CALL_NOT_PENDING = "tool_call_not_pending"
    DUPLICATE_TOOL_CALL = "duplicate_tool_call"
    TOOL_RESULTS_REQUIRED = "tool_results_required"
    NO_ACTIVE_RUN = "no_active_run"
    NOTHING_TO_ANSWER = "nothing_to_answer"
    VERSION_MISMATCH = "version_mismatch"
    PAYLOAD_TOO_LARGE = "payload_too_large"
    UNSUPPORTED_CONTENT_ENCODING = "unsupported_content_encoding"
    UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"
    VALIDATION_ERROR = "validation_error"
    INVALID_CONVERSATION = "invalid_conversation"
    STORED_DATA_ERROR = "stored_data_error"
    IDEMPOTENCY_KEY_REUSED = "idempotency_key_reused"
    IDEMPOTENCY_KEY_IN_USE = "idempotency_key_in_use"
    # files (docs/files.md)
    FILE_NOT_FOUND = "file_not_found"
    UNSUPPORTED_FILE = "unsupported_file"
    FILE_TOO_LARGE = "file_too_large"
    EMPTY_FILE = "empty_file"
    FILE_IN_USE = "file_in_use"


# Each exception's code; one not listed is looked up by its base classes, nearest first (so
# LeaseHeld is not taken for the StorageConflict it is). A ProviderError names its own code.
ERROR_CODES: dict[type[BaseException], ErrorCode] = {
    # storage
    ConversationNotFound: ErrorCode.CONVERSATION_NOT_FOUND,
    RunNotFound: ErrorCode.RUN_NOT_FOUND,
    InvalidCursor: ErrorCode.INVALID_CURSOR,
    VersionConflict: ErrorCode.VERSION_MISMATCH,
    LeaseHeld: ErrorCode.CONVERSATION_RUNNING,
    LeaseLost: ErrorCode.LEASE_LOST,
    ToolCallNotPending: ErrorCode.TOOL_CALL_NOT_PENDING,
    DuplicateToolCall: ErrorCode.DUPLICATE_TOOL_CALL,
    StorageConflict: ErrorCode.CONFLICT,
    StoredDataError: ErrorCode.STORED_DATA_ERROR,
    DatabaseUnavailable: ErrorCode.DATABASE_UNAVAILABLE,
    FileNotFound: ErrorCode.FILE_NOT_FOUND,
    FileRefused: ErrorCode.UNSUPPORTED_FILE,
    FileTooLarge: ErrorCode.FILE_TOO_LARGE,
    FileEmpty: ErrorCode.EMPTY_FILE,
    FileInUse: ErrorCode.FILE_IN_USE,
    # the use cases
    InvalidInput: ErrorCode.VALIDATION_ERROR,
    PendingToolCalls: ErrorCode.TOOL_RESULTS_REQUIRED,
    NoActiveRun: ErrorCode.NO_ACTIVE_RUN,
    NothingToAnswer: ErrorCode.NOTHING_TO_ANSWER,
    BadEventId: ErrorCode.BAD_LAST_EVENT_ID,
    EventsExpired: ErrorCode.RUN_EVENTS_EXPIRED,
    ShuttingDown: ErrorCode.SHUTTING_DOWN,
    IdempotencyKeyReused: ErrorCode.IDEMPOTENCY_KEY_REUSED,
    IdempotencyKeyInUse: ErrorCode.IDEMPOTENCY_KEY_IN_USE,
    # the domain: a run's failures, and a conversation that cannot be what was asked
    ToolRoundLimitError: ErrorCode.MAX_TOOL_ROUNDS,
    ContextWindowError: ErrorCode.CONTEXT_TOO_LONG,
    ConversationConfigurationError: ErrorCode.CONFIGURATION,
    ConversationError: ErrorCode.INVALID_CONVERSATION,
}


def code_for(exc: BaseException) -> str:
    """The stable code of ``exc``: ``internal`` for an exception no one foresaw."""
    if isinstance(exc, ProviderError):
        return exc.code
    for cls in type(exc).__mro__:
        code = ERROR_CODES.get(cls)
        if code is not None:
            return code
    return ErrorCode.INTERNAL
