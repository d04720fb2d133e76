"""What a contract reviewer found the document leaving out: the 409 of an `Idempotency-Key` in
use on every route that takes one, the problem schema of `/readyz`'s 503, the response headers
a client reads (ETag, Location, X-Run-Id, Retry-After), the `GET …/messages` shapes in an
order a generated client can tell apart, and the size limits of texts and bundles."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import jsonschema_rs
import pytest

from app.openapi_export import openapi_document
from app.settings import Settings
from tests.api.conftest import app_client

DOCUMENT = openapi_document()
SCHEMAS = DOCUMENT["components"]["schemas"]


def _operations() -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (path, method, operation)
        for path, operations in DOCUMENT["paths"].items()
        for method, operation in operations.items()
    ]


def test_every_route_with_an_idempotency_key_documents_the_409_of_a_key_in_use() -> None:
    keyed = [
        (path, method, operation)
        for path, method, operation in _operations()
        if any(p["name"].lower() == "idempotency-key" for p in operation.get("parameters", []))
    ]
    assert {(path, method) for path, method, _ in keyed} >= {("/conversations", "post")}
    for path, method, operation in keyed:
        conflict = operation["responses"].get("409")
        assert conflict is not None, (path, method)
        assert "Retry-After" in conflict["headers"], (path, method)


def test_readyz_documents_its_503_as_a_problem() -> None:
    content = DOCUMENT["paths"]["/readyz"]["get"]["responses"]["503"]["content"]
    assert content == {
        "application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}
    }


def _validator(ref: str) -> Any:
    root = json.dumps({"$defs": SCHEMAS, "$ref": ref}).replace("#/components/schemas/", "#/$defs/")
    return jsonschema_rs.Draft202012Validator(json.loads(root))


@pytest.mark.parametrize(
    ("body", "shape"),
    [
        (
            {"messages": [], "version": "1.0", "start": 1, "total": 1, "next_after": None},
            "MessagePage",
        ),
        (
            {"system": "Be brief.", "messages": [{"role": "user", "content": "hi"}]},
            "AnthropicMessagesOut",
        ),
        (
            {"messages": [{"type": "TextMessage", "role": "user", "text": "hi"}], "version": "1.0"},
            "MessageListDocument",
        ),
        ({"messages": [{"role": "user", "content": "hi"}]}, "OpenAIMessagesOut"),
    ],
)
def test_the_first_messages_shape_a_body_fits_is_its_own(body: dict[str, Any], shape: str) -> None:
    """A generated client (openapi-python-client) parses an `anyOf` body as the first shape that
    fits: a page is also a MessageListDocument, an Anthropic body also an OpenAIMessagesOut."""
    get = DOCUMENT["paths"]["/conversations/{conversation_id}/messages"]["get"]
    shapes = get["responses"]["200"]["content"]["application/json"]["schema"]["anyOf"]
    first = next(s["$ref"] for s in shapes if _validator(s["$ref"]).is_valid(body))
    assert first.rsplit("/", 1)[1] == shape


def _check_headers(response: httpx.Response, path: str, method: str) -> None:
    documented = DOCUMENT["paths"][path][method]["responses"][str(response.status_code)]
    headers = documented.get("headers", {})
    for name, header in headers.items():
        value = response.headers.get(name)
        if header["required"]:
            assert value is not None, (path, method, name)
        if value is not None and "pattern" in header["schema"]:
            assert re.search(header["schema"]["pattern"], value), (path, method, name, value)


@pytest.mark.postgres
async def test_the_documented_response_headers_are_served(client: httpx.AsyncClient) -> None:
    made = await client.post("/conversations", json={}, headers={"Idempotency-Key": "review-1"})
    assert made.status_code == 201
    assert {"ETag", "Location"} <= set(
        DOCUMENT["paths"]["/conversations"]["post"]["responses"]["201"]["headers"]
    )
    _check_headers(made, "/conversations", "post")
    again = await client.post("/conversations", json={}, headers={"Idempotency-Key": "review-1"})
    assert again.headers["idempotent-replayed"] == "true"
    _check_headers(again, "/conversations", "post")
    cid = made.json()["id"]
    item = "/conversations/{conversation_id}"
    _check_headers(await client.get(f"/conversations/{cid}"), item, "get")
    delta = {"messages": [{"role": "user", "text": "hello there"}]}
    _check_headers(
        await client.post(f"/conversations/{cid}/deltas", json=delta), f"{item}/deltas", "post"
    )
    _check_headers(await client.post(f"/conversations/{cid}/fork", json={}), f"{item}/fork", "post")
    _check_headers(
        await client.post(f"/conversations/{cid}/rewind", json={"keep": 1}),
        f"{item}/rewind",
        "post",
    )
    streamed = await client.post(f"/conversations/{cid}/stream", json=delta)
    assert streamed.status_code == 200
    _check_headers(streamed, f"{item}/stream", "post")
    assert "X-Run-Id" in DOCUMENT["paths"][f"{item}/stream"]["post"]["responses"]["200"]["headers"]
    _check_headers(await client.post(f"/conversations/{cid}/clear"), f"{item}/clear", "post")


@pytest.mark.postgres
async def test_the_document_states_the_size_limits_the_routes_check(settings: Settings) -> None:
    """`max_text_chars` and `max_bundle_messages` are `maxLength` and `maxItems` in the
    document the server serves: the longest text and the largest bundle it states are
    accepted, one more is refused."""
    small = settings.model_copy(update={"max_text_chars": 10, "max_bundle_messages": 2})
    async with app_client(small) as client:
        document = (await client.get("/openapi.json")).json()
        schemas = document["components"]["schemas"]
        for name in ("SystemMessageIn", "UserMessageIn", "AssistantMessageIn"):
            assert schemas[name]["properties"]["text"]["maxLength"] == 10, name
        prompt = schemas["ConversationCreate"]["properties"]["system_prompt"]["anyOf"][0]
        assert prompt["maxLength"] == 10
        assert schemas["DeltaBundle"]["properties"]["messages"]["maxItems"] == 2

        made = await client.post("/conversations", json={"system_prompt": "s" * 10})
        assert made.status_code == 201
        too_long = await client.post("/conversations", json={"system_prompt": "s" * 11})
        assert too_long.status_code == 422
        deltas = f"/conversations/{made.json()['id']}/deltas"
        user = {"role": "user", "text": "u" * 10}
        assert (await client.post(deltas, json={"messages": [user, user]})).status_code == 200
        assert (await client.post(deltas, json={"messages": [user] * 3})).status_code == 422
        longer = {"role": "user", "text": "u" * 11}
        assert (await client.post(deltas, json={"messages": [longer]})).status_code == 422
    assert DOCUMENT["components"]["schemas"]["UserMessageIn"]["properties"]["text"]["maxLength"]


def test_the_idempotency_key_has_no_example_every_tool_would_reuse() -> None:
    """A documented example key is what Swagger's "Try it out" and schemathesis send: every
    request would share it, the second getting the first's result or a 422."""
    for path, method, operation in _operations():
        for param in operation.get("parameters", []):
            if param["name"].lower() == "idempotency-key":
                assert "example" not in param and "examples" not in param, (path, method)
                schema = param["schema"]
                assert "example" not in schema and "examples" not in schema, (path, method)


SERVED_MODELS = [
    "ConversationOut",
    "ConversationPage",
    "CancelOut",
    "UsageOut",
    "RunOut",
    "RunPage",
    "MessagePage",
]


@pytest.mark.parametrize("name", SERVED_MODELS)
def test_every_field_a_response_always_carries_is_required(name: str) -> None:
    """`run_id`, `next_cursor`, `usage`… are always in the body (null when empty): a generated
    client types them as `str | None`, not `str | None | Unset`."""
    schema = SCHEMAS[name]
    assert sorted(schema["required"]) == sorted(schema["properties"]), name


@pytest.mark.postgres
async def test_served_bodies_carry_every_required_field(client: httpx.AsyncClient) -> None:
    made = (await client.post("/conversations", json={"system_prompt": "s"})).json()
    cid = made["id"]
    user = {"role": "user", "text": "hello there"}
    assert (await client.post(f"/conversations/{cid}/stream", json={"messages": [user]})).is_success
    served = {
        "ConversationOut": made,
        "ConversationPage": (await client.get("/conversations?limit=1")).json(),
        "RunPage": (await client.get(f"/conversations/{cid}/runs")).json(),
        "MessagePage": (await client.get(f"/conversations/{cid}/messages?limit=1")).json(),
    }
    run_id = served["RunPage"]["items"][0]["id"]
    served["RunOut"] = (await client.get(f"/conversations/{cid}/runs/{run_id}")).json()
    for name, body in served.items():
        assert _validator(f"#/components/schemas/{name}").is_valid(body), (name, body)


@pytest.mark.postgres
async def test_config_tools_are_documented_as_the_server_tools_once_each(
    client: httpx.AsyncClient,
) -> None:
    """`config.tools` names server tools: any other name, or one named twice, is a 422."""
    document = (await client.get("/openapi.json")).json()
    tools = document["components"]["schemas"]["ConfigPatch"]["properties"]["tools"]["anyOf"][0]
    names = tools["items"]["enum"]
    assert names == ["add_numbers", "current_time"] and tools["uniqueItems"] is True
    for name in names:
        made = await client.post("/conversations", json={"config": {"tools": [name]}})
        assert made.status_code == 201, made.text
    for refused in (["no_such_tool"], [names[0], names[0]]):
        made = await client.post("/conversations", json={"config": {"tools": refused}})
        assert made.status_code == 422, refused


LOADED_BY_FORMAT = [
    ("/conversations", "ConversationCreate", {"messages": {"version": "2.0", "messages": []}}),
    ("/conversations", "ConversationCreate", {"messages": {"version": "1.0", "messages": [[1]]}}),
    ("/conversations/import?format=anthropic", "ImportIn", {"messages": ["hi"]}),
    ("/conversations/import?format=anthropic", "ImportIn", {"messages": [], "system": 5}),
    ("/conversations/import?format=anthropic", "ImportIn", {"messages": [], "system": ["x"]}),
]


@pytest.mark.postgres
@pytest.mark.parametrize(("path", "schema", "body"), LOADED_BY_FORMAT)
async def test_what_the_loaders_refuse_for_its_shape_the_document_refuses_too(
    client: httpx.AsyncClient, path: str, schema: str, body: dict[str, Any]
) -> None:
    """The serialized format's `version` is "1.0" and its messages objects; an import's
    messages are objects and its `system` a string or blocks: schemathesis found schema-valid
    bodies (`"version": "x"`, `"messages": [[1]]`) refused."""
    assert not _validator(f"#/components/schemas/{schema}").is_valid(body)
    assert (await client.post(path, json=body)).status_code == 422
