"""One owner's files as the domain's ``AttachmentStore``: what a run reads its messages'
attachments from and stores the images a model makes in (docs/providers.md, "Attachments").

May import the domain and storage (``FileStore``).
"""

from __future__ import annotations

from app.domain import Attachment
from app.storage.files import FileRecord, FileStore

GENERATED = "generated"
"""The ``purpose`` of a file a model made."""


def attachment_of(record: FileRecord) -> Attachment:
    """The reference a message holds to a stored file."""
    return Attachment(
        record.id, record.media_type, record.name, record.size, record.width, record.height
    )


class OwnerFiles:
    """``FileStore`` seen by one owner: ``read`` and ``put`` as the domain asks for them."""

    def __init__(self, store: FileStore, owner: str) -> None:
        self.store = store
        self.owner = owner

    async def read(self, file_id: str) -> bytes:
        """The file's bytes (FileNotFound when it is gone: the model then reads a note)."""
        return await self.store.read(self.owner, file_id)

    async def put(self, data: bytes, media_type: str, name: str) -> Attachment:
        """Store an image a model made; its reference."""
        record = await self.store.put(
            self.owner, data, name, media_type, purpose=GENERATED, from_message=True
        )
        return attachment_of(record)
