"""Blobs as objects in an S3-compatible store (``PARLEY_FILE_STORE=s3://bucket/prefix``).

Imports boto3 and the settings. boto3 is AWS's own client, kept in step with S3's API; its
calls block, so each runs in a worker thread (``asyncio.to_thread``), one part at a time. A
client is thread-safe and made once, on first use. A blob is written as one object: a single
PUT when it fits a part, a multipart upload of 8 MiB parts otherwise (aborted on any failure,
so a refused upload leaves nothing behind).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import boto3
from botocore.config import Config

from app.settings import Settings

PART_BYTES = 8 << 20  # S3 takes parts of at least 5 MiB, but the last
log = logging.getLogger(__name__)


class S3Blobs:
    """Objects ``<prefix>/<blob id>`` in the bucket ``file_store`` names."""

    def __init__(self, settings: Settings) -> None:
        location = settings.file_s3_location()
        if location is None:
            raise ValueError("file_store is not an s3:// location")
        self.bucket, self.prefix = location
        self._settings = settings
        self._client: Any = None
        self._lock = asyncio.Lock()

    def key(self, blob_id: str) -> str:
        return f"{self.prefix}/{blob_id}" if self.prefix else blob_id

    def _make_client(self) -> Any:
        s = self._settings
        key_id, secret = s.file_s3_access_key_id, s.file_s3_secret_access_key
        return boto3.session.Session().client(
            "s3",
            endpoint_url=s.file_s3_endpoint_url or None,
            region_name=s.file_s3_region or None,
            aws_access_key_id=key_id.get_secret_value() if key_id else None,
            aws_secret_access_key=secret.get_secret_value() if secret else None,
            config=Config(retries={"max_attempts": 3, "mode": "standard"}),
        )

    async def client(self) -> Any:
        async with self._lock:
            if self._client is None:
                self._client = await asyncio.to_thread(self._make_client)
        return self._client

    async def write(self, blob_id: str, chunks: AsyncIterator[bytes]) -> None:
        """Store the chunks as the blob's object; nothing stays if they raise midway."""
        client, key = await self.client(), self.key(blob_id)
        pending: list[bytes] = []
        buffered = 0
        upload_id: str | None = None
        parts: list[dict[str, Any]] = []
        try:
            async for chunk in chunks:
                pending.append(chunk)
                buffered += len(chunk)
                if buffered >= PART_BYTES:
                    if upload_id is None:
                        upload_id = await self._start(client, key)
                    parts.append(await self._part(client, key, upload_id, parts, pending))
                    pending, buffered = [], 0
            if upload_id is None:
                body = b"".join(pending)
                await asyncio.to_thread(client.put_object, Bucket=self.bucket, Key=key, Body=body)
                return
            if pending:
                parts.append(await self._part(client, key, upload_id, parts, pending))
            await asyncio.to_thread(
                client.complete_multipart_upload,
                Bucket=self.bucket,
                Key=key,
                UploadId=upload_id,
                MultipartUpload={"Parts": parts},
            )
        except BaseException:
            if upload_id is not None:
                await asyncio.shield(self._abort(client, key, upload_id))
            raise

    async def _start(self, client: Any, key: str) -> str:
        answer = await asyncio.to_thread(
            client.create_multipart_upload, Bucket=self.bucket, Key=key
        )
        return str(answer["UploadId"])

    async def _part(
        self, client: Any, key: str, upload_id: str, parts: list[dict[str, Any]], data: list[bytes]
    ) -> dict[str, Any]:
        number = len(parts) + 1
        answer = await asyncio.to_thread(
            client.upload_part,
            Bucket=self.bucket,
            Key=key,
            UploadId=upload_id,
            PartNumber=number,
            Body=b"".join(data),
        )
        return {"PartNumber": number, "ETag": answer["ETag"]}

    async def _abort(self, client: Any, key: str, upload_id: str) -> None:
        try:
            await asyncio.to_thread(
                client.abort_multipart_upload, Bucket=self.bucket, Key=key, UploadId=upload_id
            )
        except Exception:  # the upload expires by the bucket's rules; nothing refers to it
            log.warning("could not abort the multipart upload of %s", key, exc_info=True)

    async def read(self, blob_id: str, chunk_bytes: int) -> AsyncIterator[bytes]:
        """The blob's bytes, ``chunk_bytes`` at a time."""
        client = await self.client()
        answer = await asyncio.to_thread(
            client.get_object, Bucket=self.bucket, Key=self.key(blob_id)
        )
        body = answer["Body"]
        try:
            while chunk := await asyncio.to_thread(body.read, chunk_bytes):
                yield chunk
        finally:
            body.close()

    async def delete(self, blob_id: str) -> None:
        """Remove the blob's object; a failure is logged (the object is then an orphan)."""
        client = await self.client()
        try:
            await asyncio.to_thread(client.delete_object, Bucket=self.bucket, Key=self.key(blob_id))
        except Exception:
            log.warning("could not delete the object %s", self.key(blob_id), exc_info=True)
