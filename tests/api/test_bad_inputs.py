"""Bad input of every kind gets a clear 4xx problem naming the field, alike on both databases.

Each case was a 500 (or a silent change) once: NUL in stored text, non-finite numbers, lone
surrogates in keys, non-ASCII bearer tokens, cursors whose date overflows, version headers
too long to be numbers, and config fields that coerced strings and booleans.
"""

from __future__ import annotations

import base64
import gzip
import json
import logging

import httpx
import pytest

from app.settings import Settings
from tests.api.conftest import app_client

pytestmark = pytest.mark.postgres

JSON = {"content-type": "application/json"}


async def _conversation(client: httpx.AsyncClient) -> str:
    created = await client.post("/conversations", json={"system_prompt": "Be brief."})
    assert created.status_code == 201
    return str(created.json()["id"])


def _problem(response: httpx.Response, status: int) -> dict[str, object]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body: dict[str, object] = response.json()
    assert body["status"] == status
    return body


def _locs(body: dict[str, object]) -> list[list[object]]:
    errors = body["errors"]
    assert isinstance(errors, list)
    return [e["loc"] for e in errors]


@pytest.mark.parametrize(
    ("raw", "loc"),
    [
        ('{"metadata": {"note": "a\\u0000b"}}', ["body", "metadata", "note"]),
        ('{"metadata": {"a\\u0000": 1}}', ["body", "metadata", "a\\u0000"]),
        ('{"system_prompt": "x\\u0000"}', ["body", "system_prompt"]),
        ('{"metadata": {"n": 1e400}}', ["body", "metadata", "n"]),
        ('{"metadata": {"n": -1e400}}', ["body", "metadata", "n"]),
        ('{"metadata": {"n": NaN}}', ["body", "metadata", "n"]),
        ('{"metadata": {"n": Infinity}}', ["body", "metadata", "n"]),
        ('{"metadata": {"\\ud800": 1}}', ["body", "metadata", "\\ud800"]),
        ('{"metadata": {"s": "\\udfff"}}', ["body", "metadata", "s"]),
        ('{"config": {"temperature": NaN}}', ["body", "config", "temperature"]),
    ],
)
async def test_unstorable_values_are_refused_naming_the_field(
    client: httpx.AsyncClient, raw: str, loc: list[object]
) -> None:
    body = _problem(await client.post("/conversations", content=raw, headers=JSON), 422)
    assert loc in _locs(body)
    assert (await client.get("/conversations")).json()["items"] == []


async def test_nul_in_a_message_of_a_delta_or_a_stream_is_refused(
    client: httpx.AsyncClient,
) -> None:
    cid = await _conversation(client)
    raw = '{"messages": [{"role": "user", "text": "hi\\u0000"}]}'
    for path in (f"/conversations/{cid}/deltas", f"/conversations/{cid}/stream"):
        body = _problem(await client.post(path, content=raw, headers=JSON), 422)
        assert ["body", "messages", 0, "text"] in _locs(body)
    assert (await client.get(f"/conversations/{cid}")).json()["message_count"] == 1


async def test_nul_in_an_import_or_a_tool_result_is_refused(client: httpx.AsyncClient) -> None:
    raw = '{"messages": [{"role": "user", "content": "\\u0000"}]}'
    response = await client.post("/conversations/import?format=openai", content=raw, headers=JSON)
    assert ["body", "messages", 0, "content"] in _locs(_problem(response, 422))
    cid = await _conversation(client)
    raw = '{"messages": [{"role": "tool", "tool_call_id": "c1", "result": {"k": "\\u0000"}}]}'
    response = await client.post(f"/conversations/{cid}/deltas", content=raw, headers=JSON)
    assert ["body", "messages", 0, "result", "k"] in _locs(_problem(response, 422))


@pytest.mark.parametrize(
    "arguments",
    [
        '{"a": "\\ud800"}',
        '{"\\udc00": 1}',
        '{"a": "\\u0000"}',
        '{"a": ' + "[" * 990 + "]" * 990 + "}",
    ],
)
async def test_unstorable_tool_arguments_in_an_import_are_refused(
    client: httpx.AsyncClient, arguments: str
) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": arguments}}
    body = {"messages": [{"role": "assistant", "content": None, "tool_calls": [call]}]}
    response = await client.post("/conversations/import?format=openai", json=body)
    loc = ["body", "messages", 0, "tool_calls", 0, "function", "arguments"]
    assert _locs(_problem(response, 422)) == [loc]
    assert (await client.get("/conversations")).json()["items"] == []


async def test_a_tool_result_with_both_result_and_error_is_refused(
    client: httpx.AsyncClient,
) -> None:
    call = {"type": "ToolCallMessage", "tool_name": "f", "tool_call_id": "c1", "pending": True}
    failed = {**call, "pending": False, "result": 1, "error": "down"}
    response = await client.post(
        "/conversations", json={"messages": {"messages": [failed], "version": "1.0"}}
    )
    assert _locs(_problem(response, 422)) == [["body", "messages", "messages", 0, "result"]]
    assert (await client.get("/conversations")).json()["items"] == []
    created = await client.post(
        "/conversations", json={"messages": {"messages": [call], "version": "1.0"}}
    )
    cid = created.json()["id"]
    both = {"role": "tool", "tool_call_id": "c1", "result": 1, "error": "down"}
    for path in (f"/conversations/{cid}/deltas", f"/conversations/{cid}/stream"):
        response = await client.post(path, json={"messages": [both]})
        assert _locs(_problem(response, 422)) == [["body", "messages", 0, "tool"]]
    assert (await client.get(f"/conversations/{cid}")).json()["pending_tool_call_ids"] == ["c1"]
    error_only = {**both, "result": None}
    response = await client.post(f"/conversations/{cid}/deltas", json={"messages": [error_only]})
    assert response.status_code == 200, response.text
    stored = (await client.get(f"/conversations/{cid}/messages")).json()["messages"]
    assert (stored[0]["result"], stored[0]["error"]) == (None, "down")


@pytest.mark.parametrize(
    "config",
    [
        {"temperature": "1"},
        {"temperature": True},
        {"max_tool_rounds": False},
        {"max_tool_rounds": "3"},
        {"max_output_tokens": 10.0},
        {"context_max_tokens": "100"},
    ],
)
async def test_config_fields_do_not_coerce(
    client: httpx.AsyncClient, config: dict[str, object]
) -> None:
    (field,) = config
    body = _problem(await client.post("/conversations", json={"config": config}), 422)
    assert ["body", "config", field] in _locs(body)


async def test_integers_a_database_cannot_hold_are_refused(client: httpx.AsyncClient) -> None:
    cid = await _conversation(client)
    huge = 2**63
    for response in (
        await client.post(f"/conversations/{cid}/rewind", json={"keep": huge}),
        await client.post(f"/conversations/{cid}/fork", json={"keep": huge}),
        await client.post(f"/conversations/{cid}/rewind", json={"keep": "1"}),
        await client.get(f"/conversations/{cid}/messages", params={"after": huge}),
    ):
        _problem(response, 422)


@pytest.mark.parametrize("value", ["9" * 5000, "1" * 19, '"12a"', "W/x"])
async def test_an_if_match_that_is_no_version_is_a_400(
    client: httpx.AsyncClient, value: str
) -> None:
    cid = await _conversation(client)
    response = await client.post(f"/conversations/{cid}/clear", headers={"If-Match": value})
    assert _problem(response, 400)["code"] == "bad_if_match"


@pytest.mark.parametrize("seq", ["9" * 5000, "-1", "1e3"])
async def test_a_last_event_id_that_is_no_position_is_a_400(
    client: httpx.AsyncClient, seq: str
) -> None:
    cid = await _conversation(client)
    response = await client.get(
        f"/conversations/{cid}/stream", headers={"Last-Event-ID": f"{'a' * 32}:{seq}"}
    )
    _problem(response, 400)


@pytest.mark.parametrize(
    "date", ["9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+14:00", "99999-01-01"]
)
async def test_a_cursor_whose_date_overflows_is_a_400(client: httpx.AsyncClient, date: str) -> None:
    raw = json.dumps([date, "0" * 32]).encode()
    cursor = base64.urlsafe_b64encode(raw).decode().rstrip("=")
    response = await client.get("/conversations", params={"cursor": cursor})
    assert _problem(response, 400)["code"] == "invalid_cursor"


async def test_bodies_that_are_not_json_are_a_400(client: httpx.AsyncClient) -> None:
    for raw in ("{", "[" * 100_000, '{"a": 1} x', "\xff"):
        response = await client.post("/conversations", content=raw.encode(), headers=JSON)
        _problem(response, 400)


@pytest.mark.parametrize(
    "raw", [b'{"system_prompt": "\xff\xfe"}', b"[" * 5000 + b"]" * 5000, b'{"a": "\xc3"}']
)
async def test_json_not_in_utf8_or_nested_too_deep_is_malformed_json(
    client: httpx.AsyncClient, raw: bytes
) -> None:
    response = await client.post("/conversations", content=raw, headers=JSON)
    assert _problem(response, 400)["code"] == "malformed_json"
    assert len((await client.get("/conversations")).json()["items"]) == 0


async def test_a_body_in_a_content_encoding_is_a_415(client: httpx.AsyncClient) -> None:
    cid = await _conversation(client)
    body = gzip.compress(b'{"messages": [{"role": "user", "text": "hi"}]}')
    headers = {**JSON, "Content-Encoding": "gzip"}
    response = await client.post(f"/conversations/{cid}/deltas", content=body, headers=headers)
    assert _problem(response, 415)["code"] == "unsupported_content_encoding"
    assert response.headers["accept-encoding"] == "identity"
    assert (await client.get(f"/conversations/{cid}")).json()["version"] == 1


@pytest.mark.parametrize(
    "content_type", [None, "application/x-www-form-urlencoded", "text/plain", "application/xml"]
)
async def test_a_body_not_sent_as_json_is_a_415_that_says_how(
    client: httpx.AsyncClient, content_type: str | None
) -> None:
    """``curl -d`` sends a form's content type; the framework would not read such a body and
    answered 422 "Input should be a valid dictionary". Nothing is stored."""
    cid = await _conversation(client)
    body = b'{"messages": [{"role": "user", "text": "hi"}]}'
    headers = {"content-type": content_type} if content_type else {}
    for path in (f"/conversations/{cid}/deltas", f"/conversations/{cid}/stream", "/conversations"):
        response = await client.post(path, content=body, headers=headers)
        problem = _problem(response, 415)
        assert problem["code"] == "unsupported_media_type"
        assert "Content-Type: application/json" in str(problem["detail"])
    assert (await client.get(f"/conversations/{cid}")).json()["version"] == 1
    assert len((await client.get("/conversations")).json()["items"]) == 1


async def test_a_json_body_of_a_json_suffix_type_is_read_and_no_body_needs_no_type(
    client: httpx.AsyncClient,
) -> None:
    cid = await _conversation(client)
    body = b'{"messages": [{"role": "user", "text": "hi"}]}'
    headers = {"content-type": "application/vnd.parley+json; charset=utf-8"}
    response = await client.post(f"/conversations/{cid}/deltas", content=body, headers=headers)
    assert response.status_code == 200, response.text
    # an empty body with a form's type (``curl -X POST -d ''``) is no body: the route answers
    no_body = {"content-type": "application/x-www-form-urlencoded"}
    response = await client.post(f"/conversations/{cid}/cancel", content=b"", headers=no_body)
    assert _problem(response, 409)["code"] == "no_active_run"


async def test_a_non_ascii_bearer_token_is_a_401_or_its_own_space(settings: Settings) -> None:
    token = "Bearer t\xe9\xff".encode("latin-1")
    async with app_client(settings) as client:
        response = await client.get("/conversations", headers=[(b"authorization", token)])
        assert response.status_code == 200
    keyed = settings.model_copy(update={"api_keys": Settings(api_keys="k1").api_keys})
    async with app_client(keyed) as client:
        response = await client.get("/conversations", headers=[(b"authorization", token)])
        _problem(response, 401)
        utf8 = "Bearer clé".encode()
        _problem(await client.get("/conversations", headers=[(b"authorization", utf8)]), 401)


async def test_keys_appear_in_no_repr_log_or_problem(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    secret, wrong = "sk-parley-SECRET-1", "sk-wrong-SECRET-2"
    keyed = settings.model_copy(update={"api_keys": Settings(api_keys=secret).api_keys})
    assert secret not in repr(keyed) and secret not in str(keyed.model_dump())
    caplog.set_level(logging.DEBUG)
    async with app_client(keyed) as client:
        refused = await client.get("/conversations", headers={"Authorization": f"Bearer {wrong}"})
        _problem(refused, 401)
        allowed = await client.get("/conversations", headers={"Authorization": f"Bearer {secret}"})
        assert allowed.status_code == 200
    for text in (refused.text, str(refused.headers), caplog.text):
        assert secret not in text and wrong not in text
    assert "/conversations" in caplog.text  # the requests were logged, without their keys
