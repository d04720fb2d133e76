"""Parley's storage: conversations and their messages in SQL (SQLite or PostgreSQL).

Imports SQLAlchemy, app.domain and app.settings; never app.api, app.runs or app.providers.
"""

import app.storage.webhook_tables  # noqa: F401  (the webhook tables join Base.metadata)
from app.storage.conversations import ConversationRepository, RunAppend
from app.storage.database import Database
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
    "InvalidCursor",
    "LeaseExpired",
    "LeaseHeld",
    "LeaseLost",
    "RunAppend",
    "RunEnding",
    "RunNotFound",
    "RunRecord",
    "RunRepository",
    "SchemaNotMigrated",
    "StorageConflict",
    "StorageError",
    "StoredDataError",
    "ToolCallNotPending",
    "ToolOutcome",
    "VersionConflict",
    "driver_said",
    "is_transient",
    "new_run_id",
    "utcnow",
]
