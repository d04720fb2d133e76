"""An automatic title reaches the owner's webhooks as `conversation.titled`, signed, written in
the title's own transaction (both databases)."""

from __future__ import annotations

from typing import Any

from app.settings import Settings
from tests.api.conftest import app_client, wait_for
from tests.webhooks.conftest import FAST, register
from tests.webhooks.receiver import Receiver


async def test_an_automatic_title_is_announced_to_the_webhooks(database_url: str) -> None:
    settings = Settings(
        database_url=database_url,
        sse_ping_seconds=0,
        auto_title=True,
        **FAST,  # type: ignore[arg-type]
    )
    with Receiver() as receiver:
        async with app_client(settings) as client:
            hook = await register(client, receiver.url, ["conversation.titled"])
            conv_id = (await client.post("/conversations", json={})).json()["id"]
            body = {"messages": [{"role": "user", "text": "Why is the sky blue at noon?"}]}
            response = await client.post(f"/conversations/{conv_id}/stream", json=body)
            assert response.status_code == 200

            async def titled() -> Any:
                return (await client.get(f"/conversations/{conv_id}")).json()["title"]

            title = await wait_for(titled, within=10)
            assert title

            async def delivered() -> bool:
                return bool(receiver.accepted())

            assert await wait_for(delivered, within=10)
            (event,) = receiver.verified(hook["secret"])
    assert event["type"] == "conversation.titled"
    assert event["data"]["conversation_id"] == conv_id
    assert title not in str(event)  # ids, never the text
