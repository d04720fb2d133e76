"""The files' errors: storage errors, mapped to problems like the others (app/api/problems.py).

Imports app.storage.errors only.

StorageError
 ├── FileNotFound       file_not_found       404  unknown id, malformed id, other owner
 ├── FileRefused        unsupported_file     415  not an accepted kind, or contradicts its name
 ├── FileTooLarge       file_too_large       413  over its kind's limit
 ├── FileEmpty          empty_file           422  no bytes
 └── StorageConflict
      └── FileInUse     file_in_use          409  a stored message refers to it
"""

from __future__ import annotations

from app.storage.errors import StorageConflict, StorageError


class FileNotFound(StorageError):
    """No file with this id is visible to the caller."""

    def __init__(self, file_id: str) -> None:
        super().__init__(f"no file {file_id!r}")
        self.file_id = file_id


class FileRefused(StorageError):
    """The bytes are not an accepted kind, or contradict the file's name or declared type."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"{name!r} is refused: {reason}")
        self.name = name
        self.reason = reason


class FileTooLarge(StorageError):
    """The file is larger than its kind's limit."""

    def __init__(self, media_type: str, limit: int) -> None:
        super().__init__(f"a {media_type} file may hold at most {limit} bytes")
        self.media_type = media_type
        self.limit = limit


class FileEmpty(StorageError):
    """The file has no bytes."""

    def __init__(self, name: str) -> None:
        super().__init__(f"{name!r} is empty (0 bytes)")
        self.name = name


class FileInUse(StorageConflict):
    """A stored message refers to the file: it stays until none does."""

    def __init__(self, file_id: str, conversation_ids: list[str]) -> None:
        super().__init__(
            f"file {file_id!r} is attached to messages of {len(conversation_ids)} "
            "conversation(s): delete those (or their messages) first"
        )
        self.file_id = file_id
        self.conversation_ids = conversation_ids
