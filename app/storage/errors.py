"""The storage layer's exceptions; each carries what an HTTP handler needs. Imports only
SQLAlchemy's exceptions. Their stable codes belong to app/runs/events.py (``ErrorCode``), which
API errors share.

StorageError                      code (ErrorCode)         suggested HTTP status
 ├── ConversationNotFound         conversation_not_found  404  unknown id, malformed id, other owner
 ├── RunNotFound                  run_not_found           404  unknown run, other conversation
 ├── InvalidCursor                invalid_cursor          400  a list cursor we did not issue
 ├── StoredDataError              stored_data_error       500  a stored message no longer reads
 ├── VersionConflict              version_mismatch        412  stale expected_version
 ├── DatabaseUnavailable          database_unavailable    503  no connection to the database
 │    └── SchemaNotMigrated                                     no tables, or an older schema
 └── StorageConflict              conflict                409
      ├── LeaseHeld               conversation_running    another run holds the lease
      │    └── LeaseExpired                                its lease expired: recover, retry
      ├── LeaseLost               lease_lost              this run no longer holds the lease
      ├── ToolCallNotPending      tool_call_not_pending   no pending call with that id
      └── DuplicateToolCall       duplicate_tool_call     a second pending call with the same id

``is_transient`` tells a database that is briefly unreachable or busy from data it refuses.
"""

from __future__ import annotations

from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError


class StorageError(Exception):
    """Base class of every error app.storage raises."""


class ConversationNotFound(StorageError):
    """No conversation with this id is visible to the caller."""

    def __init__(self, conversation_id: str) -> None:
        super().__init__(f"conversation {conversation_id!r} not found")
        self.conversation_id = conversation_id


class RunNotFound(StorageError):
    """No run with this id is visible to the caller (in this conversation)."""

    def __init__(self, run_id: str) -> None:
        super().__init__(f"run {run_id!r} not found")
        self.run_id = run_id


class InvalidCursor(StorageError):
    """A pagination cursor that this service did not issue (or that was altered)."""

    def __init__(self, cursor: str) -> None:
        super().__init__(f"invalid cursor {cursor!r}")
        self.cursor = cursor


class StoredDataError(StorageError):
    """A stored message no longer reads; names the conversation and the message index."""

    def __init__(self, conversation_id: str, index: int, detail: str) -> None:
        super().__init__(
            f"conversation {conversation_id!r}: stored message {index} does not read: {detail}"
        )
        self.conversation_id = conversation_id
        self.index = index
        self.detail = detail


class VersionConflict(StorageError):
    """The caller's expected version is stale; nothing the caller asked for was changed."""

    def __init__(self, conversation_id: str, current_version: int, expected_version: int) -> None:
        super().__init__(
            f"conversation {conversation_id!r} is at version {current_version}, "
            f"not {expected_version}"
        )
        self.conversation_id = conversation_id
        self.current_version = current_version
        self.expected_version = expected_version


class DatabaseUnavailable(StorageError):
    """The database could not be reached, or the connection was lost mid-transaction: the
    transaction was not committed (or, lost at its commit, may have been). Worth retrying
    later."""

    def __init__(self, message: str = "the database does not answer; retry later") -> None:
        super().__init__(message)


class SchemaNotMigrated(DatabaseUnavailable):
    """The database has no Parley tables, or not the columns of the code's revision: nothing
    can be stored or read until the migrations run. Retrying helps once they have."""

    def __init__(self) -> None:
        super().__init__(
            "the database is not ready: its schema is not this version's (its operator runs "
            "the migrations: alembic upgrade head); retry later"
        )


# How each database says a table or column the statement names does not exist.
_UNDEFINED_SQLSTATES = frozenset({"42P01", "42703"})  # PostgreSQL: undefined table, column
_SQLITE_UNDEFINED = ("no such table", "no such column", "has no column named")


def names_missing_schema(exc: DBAPIError) -> bool:
    """Whether the database refused a statement for a table or column it does not have: a
    schema behind the code's (or none), not a statement or data to fix."""
    if getattr(exc.orig, "sqlstate", None) in _UNDEFINED_SQLSTATES:
        return True
    text = str(exc.orig)
    return isinstance(exc, OperationalError) and any(m in text for m in _SQLITE_UNDEFINED)


class StorageConflict(StorageError):
    """The conversation's state does not allow the operation right now; nothing was changed."""


class LeaseHeld(StorageConflict):
    """A run holds an unexpired lease on the conversation; ``run_id`` names it."""

    def __init__(self, conversation_id: str, run_id: str) -> None:
        super().__init__(f"conversation {conversation_id!r} is running (run {run_id!r})")
        self.conversation_id = conversation_id
        self.run_id = run_id


class LeaseExpired(LeaseHeld):
    """The lease of run ``run_id`` expired: its process died, or stopped for longer than the
    lease. Nothing was changed. Not a refusal to show a caller but a signal to the use case:
    recover the run (app/runs/recovery.py) in a transaction of its own, then try once more.
    Left unhandled it is what it derives from, a conversation still running."""


class LeaseLost(StorageConflict):
    """The run ``run_id`` no longer holds the conversation's lease (taken over or released)."""

    def __init__(self, conversation_id: str, run_id: str) -> None:
        super().__init__(f"run {run_id!r} no longer holds conversation {conversation_id!r}")
        self.conversation_id = conversation_id
        self.run_id = run_id


class ToolCallNotPending(StorageConflict):
    """A tool result targets a call that is not pending (unknown or already completed)."""

    def __init__(self, conversation_id: str, tool_call_id: str) -> None:
        super().__init__(
            f"conversation {conversation_id!r} has no pending tool call {tool_call_id!r} "
            "(unknown or already completed)"
        )
        self.conversation_id = conversation_id
        self.tool_call_id = tool_call_id


class DuplicateToolCall(StorageConflict):
    """A pending tool call would share its id with another pending call."""

    def __init__(self, conversation_id: str, tool_call_id: str) -> None:
        super().__init__(
            f"conversation {conversation_id!r} already has a pending tool call {tool_call_id!r}"
        )
        self.conversation_id = conversation_id
        self.tool_call_id = tool_call_id


def driver_said(exc: BaseException) -> str:
    """An exception as one line for the log: a SQLAlchemy DBAPIError as its driver's error
    (its own text adds the statement and its parameters: lines, and stored data), anything
    else as it is."""
    if isinstance(exc, DBAPIError) and exc.orig is not None:
        exc = exc.orig
    lines = str(exc).splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` says the database is unreachable or busy (worth retrying the same
    statements later), rather than refusing the data."""
    if isinstance(exc, DatabaseUnavailable | OperationalError | InterfaceError | OSError):
        return True
    return isinstance(exc, DBAPIError) and bool(exc.connection_invalidated)
