"""Parley's storage: conversations and their messages in SQL (SQLite or PostgreSQL).

Imports SQLAlchemy, app.domain and app.settings; never app.api, app.runs or app.providers.
"""

import app.storage.webhook_tables  # noqa: F401  (the webhook tables join Base.metadata)
from app.storage import spend_tables as _spend_tables  # noqa: F401  (its tables join Base)
from app.storage.conversations import (
    ConversationRepository,
    Filters,
    Found,
    RunAppend,
    merge_document,
)
from app.storage.database import Database
from app.storage.driver import SavepointChain
from app.storage.errors import (
    ConversationNotFound,
    DatabaseUnavailable,
    DuplicateToolCall,
    InvalidCursor,
    LeaseExpired,
    LeaseHeld,
    LeaseLost,
    RunNotFound,
    SchemaNotMigrated,
    StorageConflict,
    StorageError,
    StoredDataError,
    ToolCallNotPending,
    VersionConflict,
    driver_said,
    is_transient,
)
from app.storage.files import tables as _file_tables  # noqa: F401  (in Base.metadata)
from app.storage.records import ConversationRecord, ToolOutcome, utcnow
from app.storage.runs import EventRow, RunEnding, RunRecord, RunRepository, new_run_id

__all__ = [
    "ConversationNotFound",
    "ConversationRecord",
    "ConversationRepository",
    "Database",
    "DatabaseUnavailable",
    "DuplicateToolCall",
    "EventRow",
    "Filters",
    "Found",
    "InvalidCursor",
    "LeaseExpired",
    "LeaseHeld",
    "LeaseLost",
    "RunAppend",
    "RunEnding",
    "RunNotFound",
    "RunRecord",
    "RunRepository",
    "SavepointChain",
    "SchemaNotMigrated",
    "StorageConflict",
    "StorageError",
    "StoredDataError",
    "ToolCallNotPending",
    "ToolOutcome",
    "VersionConflict",
    "driver_said",
    "is_transient",
    "merge_document",
    "new_run_id",
    "utcnow",
]
