"""Settings of uploaded files (app/storage/files; docs/files.md): size limits and the store.

Imports pydantic only. A mixin of ``Settings`` (app/settings/__init__.py).
"""

from __future__ import annotations

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings

MIB = 1 << 20


class FileSettings(BaseSettings):
    """Where uploaded files' bytes live and how large each kind may be."""

    file_store: str = Field(
        "sql",
        description="Where files' bytes are stored: `sql` (in the database, in 1 MiB chunks) or "
        "`s3://bucket/prefix` (an S3-compatible object store; the metadata stays in SQL).",
    )
    file_max_image_bytes: int = Field(
        10 * MIB, ge=1, description="Largest image upload (PNG, JPEG, GIF, WebP); 413 beyond."
    )
    file_max_document_bytes: int = Field(
        32 * MIB,
        ge=1,
        description="Largest document upload (PDF, text, Markdown, CSV); 413 beyond.",
    )
    file_orphan_grace_seconds: float = Field(
        3600,
        gt=0,
        le=315_360_000,
        description="A file Parley made from a message (a data URL, an import, a model's "
        "image) is deleted once no conversation refers to it and it is older than this "
        "(checked every `prune_interval_seconds`). Uploaded files stay until deleted.",
    )
    file_s3_endpoint_url: str | None = Field(
        None,
        description="The S3-compatible endpoint (`http://minio:9000`); empty: AWS's, by region.",
    )
    file_s3_region: str | None = Field(None, description="The bucket's region (`eu-west-1`).")
    file_s3_access_key_id: SecretStr | None = Field(
        None, description="Access key id; empty: boto3's own chain (environment, profile, role)."
    )
    file_s3_secret_access_key: SecretStr | None = Field(
        None, description="Secret access key, with `file_s3_access_key_id`."
    )

    @field_validator("file_store", mode="after")
    @classmethod
    def _known_store(cls, value: str) -> str:
        store = value.strip()
        if store == "sql":
            return store
        bucket = store.removeprefix("s3://").partition("/")[0]
        if not store.startswith("s3://") or not bucket:
            raise ValueError("must be `sql` or `s3://bucket/prefix`")
        return store.rstrip("/")

    @field_validator("file_s3_endpoint_url", "file_s3_region", mode="after")
    @classmethod
    def _blank_is_none(cls, value: str | None) -> str | None:
        # `PARLEY_FILE_S3_REGION=` (.env.example's line uncommented) means unset
        return (value or "").strip() or None

    @field_validator("file_s3_access_key_id", "file_s3_secret_access_key", mode="after")
    @classmethod
    def _blank_secret_is_none(cls, value: SecretStr | None) -> SecretStr | None:
        return value if value is not None and value.get_secret_value().strip() else None

    def file_upload_limit(self) -> int:
        """The largest request body of ``POST /files``: the larger kind's limit, and room for
        the multipart framing and the ``purpose`` field."""
        return max(self.file_max_image_bytes, self.file_max_document_bytes) + MIB

    def file_s3_location(self) -> tuple[str, str] | None:
        """The bucket and key prefix of an ``s3://`` store; None for ``sql``."""
        if not self.file_store.startswith("s3://"):
            return None
        bucket, _, prefix = self.file_store.removeprefix("s3://").partition("/")
        return bucket, prefix.strip("/")
