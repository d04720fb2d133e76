"""Parley's storage: conversations and their messages in SQL (SQLite or PostgreSQL).

Imports SQLAlchemy, app.domain and app.settings; never app.api, app.runs or app.providers.
"""

from app.storage.database import Database
from app.storage.errors import (
    ConversationNotFound,
    DuplicateToolCall,
    InvalidCursor,
    LeaseHeld,
    LeaseLost,
    StorageConflict,
    StorageError,
    StoredDataError,
    ToolCallNotPending,
    VersionConflict,
)
from app.storage.records import ConversationRecord, ToolOutcome
from app.storage.repository import ConversationRepository

__all__ = [
    "ConversationNotFound",
    "ConversationRecord",
    "ConversationRepository",
    "Database",
    "DuplicateToolCall",
    "InvalidCursor",
    "LeaseHeld",
    "LeaseLost",
    "StorageConflict",
    "StorageError",
    "StoredDataError",
    "ToolCallNotPending",
    "ToolOutcome",
    "VersionConflict",
]
