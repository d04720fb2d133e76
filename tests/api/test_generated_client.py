"""A client generated from openapi/openapi.json (openapi-python-client, offline) creates,
posts, streams and handles a 404, a 409 and a 422 against real uvicorn without crashing.

The client is generated into a temporary directory at each run rather than committed: the test
then always exercises the document as it is now, and nothing generated needs reviewing.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.api.conftest import LiveServer

pytestmark = pytest.mark.postgres

DOCUMENT = Path(__file__).resolve().parents[2] / "openapi" / "openapi.json"
GENERATOR = Path(sys.executable).parent / "openapi-python-client"


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("client")
    env = {**os.environ, "PATH": f"{GENERATOR.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    subprocess.run(
        [GENERATOR, "generate", "--path", DOCUMENT, "--meta", "none", "--output-path", root / "pc"],
        check=True,
        capture_output=True,
        env=env,
        timeout=120,
    )
    sys.path.insert(0, str(root))
    try:
        yield importlib.import_module("pc")
    finally:
        sys.path.remove(str(root))
        for name in [m for m in sys.modules if m.split(".")[0] == "pc"]:
            del sys.modules[name]


def _api(name: str) -> Any:
    return importlib.import_module(f"pc.api.{name}")


def _exercise(pc: Any, url: str) -> None:
    models = importlib.import_module("pc.models")
    create = _api("conversations.create_conversation_conversations_post")
    get = _api("conversations.get_conversation_conversations_conversation_id_get")
    delta = _api("conversations.post_delta_conversations_conversation_id_deltas_post")
    stream = _api("runs.post_and_stream_conversations_conversation_id_stream_post")
    cancel = _api("runs.cancel_run_conversations_conversation_id_cancel_post")

    with pc.AuthenticatedClient(base_url=url, token="generated-client") as client:
        made = create.sync_detailed(
            client=client, body=models.ConversationCreate(system_prompt="Be brief.")
        )
        assert made.status_code == 201 and isinstance(made.parsed, models.ConversationOut)
        cid = made.parsed.id
        user = models.UserMessageIn(role="user", text="hello from a generated client")
        posted = delta.sync_detailed(cid, client=client, body=models.DeltaBundle(messages=[user]))
        assert posted.status_code == 200 and posted.parsed.message_count == 2
        again = models.DeltaBundle(messages=[models.UserMessageIn(role="user", text="and again")])
        streamed = stream.sync_detailed(cid, client=client, body=again)
        assert streamed.status_code == 200
        assert b"event: done" in streamed.content and b"again" in streamed.content

        missing = get.sync_detailed("0" * 32, client=client)
        assert missing.status_code == 404 and isinstance(missing.parsed, models.Problem)
        assert missing.parsed.code == "conversation_not_found"
        idle = cancel.sync_detailed(cid, client=client)
        assert idle.status_code == 409 and idle.parsed.code == "no_active_run"
        create.sync_detailed(client=client, body=models.ConversationCreate(), idempotency_key="k1")
        reused = create.sync_detailed(
            client=client, body=models.ConversationCreate(system_prompt="x"), idempotency_key="k1"
        )
        assert reused.status_code == 422 and isinstance(reused.parsed, models.ValidationProblem)
        assert reused.parsed.errors[0].loc == ["header", "Idempotency-Key"]


async def test_a_generated_client_works_against_the_service(
    generated: Any, live_server: Callable[..., LiveServer]
) -> None:
    server = live_server()
    await asyncio.to_thread(_exercise, generated, server.url)
