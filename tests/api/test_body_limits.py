"""Body limits that fit the features: the largest import the settings promise fits under the
import routes' limit, other routes keep the small one, and both answer 413 problem+json."""

from __future__ import annotations

import json

import pytest

from app.settings import Settings
from tests.api.conftest import app_client

pytestmark = pytest.mark.postgres

PROMISED_CHARS = 3_000  # docs/settings.md: max_import_messages messages of 3,000 characters


def _openai_import(count: int, chars: int) -> bytes:
    text = ("word " * chars)[:chars]
    roles = ("user", "assistant")
    messages = [{"role": roles[i % 2], "content": text} for i in range(count)]
    return json.dumps({"messages": messages}).encode()


async def test_the_largest_promised_import_fits(settings: Settings) -> None:
    defaults = Settings()
    body = _openai_import(defaults.max_import_messages, PROMISED_CHARS)
    assert defaults.max_body_bytes < len(body) <= defaults.max_import_bytes
    async with app_client(settings) as client:
        response = await client.post(
            "/conversations/import?format=openai",
            content=body,
            headers={"content-type": "application/json"},
            timeout=120,
        )
        assert response.status_code == 201, response.text[:300]
        assert response.json()["message_count"] == defaults.max_import_messages


async def test_each_route_answers_413_past_its_own_limit(settings: Settings) -> None:
    small = settings.model_copy(update={"max_body_bytes": 2048, "max_import_bytes": 8192})
    between = _openai_import(3, 1500)  # over the body limit, under the import limit
    assert 2048 < len(between) < 8192
    json_type = {"content-type": "application/json"}
    async with app_client(small) as client:
        cid = (await client.post("/conversations", json={})).json()["id"]
        imported = await client.post(
            "/conversations/import?format=openai", content=between, headers=json_type
        )
        assert imported.status_code == 201
        delta = {"messages": [{"role": "user", "text": "x" * 3000}]}
        refused = await client.post(f"/conversations/{cid}/deltas", json=delta)
        assert refused.status_code == 413
        assert refused.headers["content-type"] == "application/problem+json"
        assert refused.json()["code"] == "payload_too_large"
        too_big = await client.post(
            "/conversations/import?format=openai",
            content=_openai_import(6, 1500),
            headers=json_type,
        )
        assert too_big.status_code == 413
