"""The S3 store against moto's server (a real S3 wire protocol on a loopback port), with the
metadata on both databases: bytes in the bucket, once; nothing left by a refusal or a delete."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import boto3
import httpx
import pytest

from app.settings import Settings
from app.storage import Database
from app.storage.files import FileRefused, FileStore, FileTooLarge
from tests.api.conftest import app_client
from tests.files import samples
from tests.processes import free_port

CREDENTIALS = {
    "file_s3_access_key_id": "testing",
    "file_s3_secret_access_key": "testing",
    "file_s3_region": "us-east-1",
}


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    """moto's S3 server in a process of its own, on a free loopback port."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx.get(f"{url}/moto-api/", timeout=1)
            break
        except httpx.TransportError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise RuntimeError("moto's server did not start") from None
            time.sleep(0.1)
    try:
        yield url
    finally:
        process.terminate()
        process.wait(10)


def s3_client(endpoint: str) -> Any:
    return boto3.session.Session().client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


@pytest.fixture
def bucket(s3_endpoint: str) -> str:
    name = f"parley-{uuid.uuid4().hex[:12]}"
    s3_client(s3_endpoint).create_bucket(Bucket=name)
    return name


@pytest.fixture
def s3_settings(database_url: str, s3_endpoint: str, bucket: str) -> Settings:
    return Settings(
        database_url=database_url,
        file_store=f"s3://{bucket}/uploads",
        file_s3_endpoint_url=s3_endpoint,
        file_max_image_bytes=4096,
        **CREDENTIALS,
    )


@pytest.fixture
async def store(s3_settings: Settings) -> AsyncIterator[FileStore]:
    database = Database(s3_settings.database_url)
    try:
        yield FileStore(database, s3_settings)
    finally:
        await database.dispose()


def objects(endpoint: str, bucket: str) -> dict[str, int]:
    listed = s3_client(endpoint).list_objects_v2(Bucket=bucket)
    return {o["Key"]: o["Size"] for o in listed.get("Contents", [])}


def open_uploads(endpoint: str, bucket: str) -> list[Any]:
    return list(s3_client(endpoint).list_multipart_uploads(Bucket=bucket).get("Uploads", []))


async def test_bytes_go_to_the_bucket_once_and_come_back(
    store: FileStore, s3_endpoint: str, bucket: str
) -> None:
    data = samples.pdf(9 * (1 << 20) + 5)  # past one 8 MiB part: a multipart upload
    first = await store.put("alice", data, "big.pdf")
    second = await store.put("alice", data, "copy.pdf")
    assert first.sha256 == second.sha256 and first.id != second.id
    stored = objects(s3_endpoint, bucket)
    assert list(stored.values()) == [len(data)]
    assert all(key.startswith("uploads/") for key in stored)
    assert await store.read("alice", second.id) == data
    await store.delete("alice", first.id)
    assert len(objects(s3_endpoint, bucket)) == 1
    await store.delete("alice", second.id)
    assert objects(s3_endpoint, bucket) == {}


@pytest.mark.parametrize(
    ("data", "name", "error"),
    [
        (samples.pdf(9 * (1 << 20)) + samples.ZIP_END, "a.pdf", FileRefused),  # seen at the end
        (samples.jpeg(padding=9000), "a.jpg", FileTooLarge),
    ],
)
async def test_a_refused_upload_leaves_no_object(
    store: FileStore,
    s3_endpoint: str,
    bucket: str,
    data: bytes,
    name: str,
    error: type[Exception],
) -> None:
    with pytest.raises(error):
        await store.put("alice", data, name)
    assert objects(s3_endpoint, bucket) == {}
    assert open_uploads(s3_endpoint, bucket) == []
    assert await store.list("alice", 10) == ([], None)


async def test_the_api_serves_files_from_the_bucket(
    s3_settings: Settings, s3_endpoint: str, bucket: str
) -> None:
    async with app_client(s3_settings) as client:
        headers = {"Authorization": "Bearer alice"}
        response = await client.post(
            "/files", files={"file": ("cat.webp", samples.webp())}, headers=headers
        )
        assert response.status_code == 201, response.text
        file_id = response.json()["id"]
        content = await client.get(f"/files/{file_id}/content", headers=headers)
        assert content.content == samples.webp()
        assert len(objects(s3_endpoint, bucket)) == 1
        assert (await client.delete(f"/files/{file_id}", headers=headers)).status_code == 204
    assert objects(s3_endpoint, bucket) == {}
