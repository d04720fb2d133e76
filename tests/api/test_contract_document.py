"""The OpenAPI document says what is served: problems on every route, 422 as problem+json,
the bearer scheme, the request headers, role-tagged messages, and a true ``Allow`` on 405."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from openapi_spec_validator import OpenAPIV31SpecValidator, validate

from app.api.schemas.events import EVENT_DATA, EventName
from app.openapi_export import openapi_document
from app.storage.records import encode_cursor

DOCUMENT = openapi_document()
COMMITTED = Path(__file__).resolve().parents[2] / "openapi" / "openapi.json"
OPERATIONS = [
    (path, method, operation)
    for path, operations in DOCUMENT["paths"].items()
    for method, operation in operations.items()
]


def test_the_committed_document_is_valid_openapi_3_1() -> None:
    committed = json.loads(COMMITTED.read_text(encoding="utf-8"))
    assert committed["openapi"].startswith("3.1")
    validate(committed, cls=OpenAPIV31SpecValidator)
    assert '"itemSchema":' not in json.dumps(committed)  # 3.2's key: 3.1 validators refuse it


def test_every_stream_documents_each_event_on_the_wire_and_the_parsed_union() -> None:
    schemas = DOCUMENT["components"]["schemas"]
    union = schemas["StreamEvent"]
    mapping = union["discriminator"]["mapping"]
    assert union["discriminator"]["propertyName"] == "event"
    assert set(mapping) == {name.value for name in EventName}
    assert [v["$ref"] for v in union["oneOf"]] == list(mapping.values())
    for name, ref in mapping.items():
        event = schemas[ref.rsplit("/", 1)[1]]
        assert event["properties"]["event"]["const"] == name
        body = event["properties"]["data"]["$ref"].rsplit("/", 1)[1]
        assert body == EVENT_DATA[EventName(name)].__name__ and body in schemas
    streams = [
        (path, method, operation["responses"]["200"]["content"]["text/event-stream"])
        for path, method, operation in OPERATIONS
        if "text/event-stream" in operation["responses"].get("200", {}).get("content", {})
    ]
    assert {(p, m) for p, m, _ in streams} >= {
        ("/conversations/{conversation_id}/stream", "get"),
        ("/conversations/{conversation_id}/stream", "post"),
    }
    for path, method, content in streams:
        assert "schema" not in content  # a generated client would parse the stream by it
        if path.startswith("/ai-sdk/"):  # the AI SDK's chunks only (no named events)
            assert "x-parley-event" not in content
            assert content["x-itemSchema"]["title"] == "ai_sdk_chunk"
            continue
        assert content["x-parley-event"] == {"$ref": "#/components/schemas/StreamEvent"}
        frames = content["x-itemSchema"]["oneOf"]
        wire = {v["properties"]["event"]["const"] for v in frames if "oneOf" not in v}
        # the named events, and (on a route that takes `protocol`) the AI SDK's frames
        assert wire - {"message"} == set(mapping) - {"message"}, (path, method)
        assert "message" in wire


def test_no_operation_documents_fastapis_validation_error() -> None:
    assert "HTTPValidationError" not in str(DOCUMENT)
    for path, method, operation in OPERATIONS:
        for status, response in operation["responses"].items():
            if int(status) >= 400:
                assert list(response["content"]) == ["application/problem+json"], (path, method)
        if "422" in operation["responses"]:
            schema = operation["responses"]["422"]["content"]["application/problem+json"]
            assert schema["schema"]["$ref"] == "#/components/schemas/ValidationProblem"


def test_every_keyed_route_documents_the_bearer_scheme_and_401() -> None:
    assert DOCUMENT["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    keyed = [(p, m, o) for p, m, o in OPERATIONS if p.startswith("/conversations")]
    assert keyed
    for path, method, operation in keyed:
        assert operation["security"] == [{"bearer": []}, {}], (path, method)
        assert "401" in operation["responses"], (path, method)


def test_statuses_follow_what_a_route_takes() -> None:
    deltas = DOCUMENT["paths"]["/conversations/{conversation_id}/deltas"]["post"]
    assert {"400", "401", "404", "409", "412", "413", "422"} <= set(deltas["responses"])
    headers = {p["name"] for p in deltas["parameters"] if p["in"] == "header"}
    assert headers == {"if-match", "Idempotency-Key"}
    resume = DOCUMENT["paths"]["/conversations/{conversation_id}/stream"]["get"]
    assert {"204", "400", "410"} <= set(resume["responses"])
    assert (
        "application/problem+json"
        in DOCUMENT["paths"]["/readyz"]["get"]["responses"]["503"]["content"]
    )


def test_messages_are_a_union_tagged_by_role() -> None:
    items = DOCUMENT["components"]["schemas"]["DeltaBundle"]["properties"]["messages"]["items"]
    assert items["discriminator"]["propertyName"] == "role"
    assert set(items["discriminator"]["mapping"]) == {"system", "user", "assistant", "tool"}
    tool = DOCUMENT["components"]["schemas"]["ToolMessageIn"]
    assert set(tool["required"]) == {"role", "tool_call_id"}
    # A result (and no error but null) or an error (and no result but null), without `not`,
    # wrapped in `allOf` (openapi-typescript types a bare `anyOf` of `required` as `unknown`).
    assert tool["allOf"] == [
        {
            "anyOf": [
                {"required": ["result"], "properties": {"error": {"type": "null"}}},
                {"required": ["error"], "properties": {"result": {"type": "null"}}},
            ]
        }
    ]
    assert "not" not in tool and "anyOf" not in tool


def test_each_messages_format_has_its_schema() -> None:
    get = DOCUMENT["paths"]["/conversations/{conversation_id}/messages"]["get"]
    shapes = get["responses"]["200"]["content"]["application/json"]["schema"]["anyOf"]
    names = {s["$ref"].rsplit("/", 1)[1] for s in shapes}
    assert names == {
        "MessageListDocument",
        "MessagePage",
        "OpenAIMessagesOut",
        "AnthropicMessagesOut",
    }


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("PUT", "/conversations", "GET, POST"),
        ("PUT", "/conversations/abc", "DELETE, GET, PATCH"),
        ("DELETE", "/conversations/abc/stream", "GET, POST"),
        ("PUT", "/conversations/import", "POST"),
        ("OPTIONS", "/conversations/import", "POST"),
        # not the id "import" of GET / DELETE /conversations/{conversation_id}: was a 404
        ("GET", "/conversations/import", "POST"),
        ("HEAD", "/conversations/import", "POST"),
        ("DELETE", "/conversations/import", "POST"),
    ],
)
async def test_a_405_names_every_allowed_method(
    client: httpx.AsyncClient, method: str, path: str, allow: str
) -> None:
    response = await client.request(method, path)
    assert response.status_code == 405
    assert response.headers["allow"] == allow
    if method != "HEAD":  # a HEAD's answer has no body
        assert response.json()["code"] == "method_not_allowed"


@pytest.mark.parametrize(
    ("path", "allow"),
    [
        ("/", "GET"),
        ("/docs", "GET"),
        ("/redoc", "GET"),
        ("/openapi.json", "GET, HEAD"),
        ("/playground/app.js", "GET, HEAD"),
    ],
)
async def test_a_405_off_the_document_names_the_methods_of_its_route(
    client: httpx.AsyncClient, path: str, allow: str
) -> None:
    """The pages and files the document does not list keep their route's ``Allow``: an empty
    one said that nothing may be asked of them (RFC 9110: a 405 lists what is allowed)."""
    for method in ("OPTIONS", "POST"):
        response = await client.request(method, path)
        assert response.status_code == 405, (method, path)
        assert set(response.headers["allow"].split(", ")) == set(allow.split(", ")), path


def _parameter(path: str, method: str, name: str) -> dict[str, Any]:
    parameters = DOCUMENT["paths"][path][method]["parameters"]
    schema: dict[str, Any] = next(p for p in parameters if p["name"] == name)["schema"]
    return schema


def _documented(schema: dict[str, Any], value: str) -> bool:
    return len(value) >= schema.get("minLength", 0) and bool(re.fullmatch(schema["pattern"], value))


@pytest.mark.parametrize(
    ("path", "method", "name", "served", "refused"),
    [
        (
            "/conversations/{conversation_id}/clear",
            "post",
            "if-match",
            ['"3"', 'W/"3"', "3", "*"],
            ["", "null", '"12a"', "1" * 19],
        ),
        (
            "/conversations/{conversation_id}/stream",
            "get",
            "last-event-id",
            [f"{'a' * 32}:7"],
            ["", "null", f"{'a' * 32}:1e3"],
        ),
        (
            "/conversations/{conversation_id}/stream",
            "get",
            "last_event_id",
            [f"{'a' * 32}:7"],
            ["", f"{'a' * 32}:-1"],
        ),
        (
            "/conversations",
            "get",
            "cursor",
            [encode_cursor(datetime.now(UTC), "0" * 32)],
            ["", "not a cursor"],
        ),
    ],
)
def test_the_document_states_the_shape_of_the_values_a_route_parses(
    path: str, method: str, name: str, served: list[str], refused: list[str]
) -> None:
    """What the server answers with 400 (bad_if_match, bad_last_event_id, invalid_cursor) for
    its shape alone is outside the parameter's documented schema; what it accepts is inside."""
    schema = _parameter(path, method, name)
    for value in served:
        assert _documented(schema, value), value
    for value in refused:
        assert not _documented(schema, value), value


@pytest.mark.postgres
async def test_options_and_an_unlisted_method_name_exactly_the_documented_methods(
    client: httpx.AsyncClient,
) -> None:
    for path, operations in DOCUMENT["paths"].items():
        documented = ", ".join(sorted(m.upper() for m in operations))
        concrete = re.sub(r"\{[^}]+\}", "0" * 32, path)
        for method in ("OPTIONS", "PUT"):
            response = await client.request(method, concrete)
            assert response.status_code == 405, (method, concrete)
            assert response.headers["allow"] == documented, (method, concrete)
