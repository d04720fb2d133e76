"""Uploaded files: their metadata and references in SQL, their bytes in SQL or S3
(docs/files.md). ``FileStore`` is the way in; ``refs`` records which conversations refer to
which files, in the conversation repository's own transaction.

Imports SQLAlchemy, boto3 (the S3 store), app.domain.media and app.settings.
"""

from app.storage.files.errors import FileEmpty, FileInUse, FileNotFound, FileRefused, FileTooLarge
from app.storage.files.records import CHUNK_BYTES, FileRecord, file_key, new_file_id
from app.storage.files.refs import add_refs, count_refs, referring_conversations, set_refs
from app.storage.files.store import FileStore
from app.storage.files.sweep import FileSweeper, sweep
from app.storage.files.tables import FILE_BLOBS, FILE_CHUNKS, FILE_REFS, FILES

__all__ = [
    "CHUNK_BYTES",
    "FILES",
    "FILE_BLOBS",
    "FILE_CHUNKS",
    "FILE_REFS",
    "FileEmpty",
    "FileInUse",
    "FileNotFound",
    "FileRecord",
    "FileRefused",
    "FileStore",
    "FileSweeper",
    "FileTooLarge",
    "add_refs",
    "count_refs",
    "file_key",
    "new_file_id",
    "referring_conversations",
    "set_refs",
    "sweep",
]
