"""The OpenAPI document says what is served: problems on every route, 422 as problem+json,
the bearer scheme, the request headers, role-tagged messages, and a true ``Allow`` on 405."""

from __future__ import annotations

import httpx
import pytest

from app.openapi_export import openapi_document

DOCUMENT = openapi_document()
OPERATIONS = [
    (path, method, operation)
    for path, operations in DOCUMENT["paths"].items()
    for method, operation in operations.items()
]


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
    assert tool["anyOf"] == [{"required": ["result"]}, {"required": ["error"]}]


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
        ("PATCH", "/conversations/abc", "DELETE, GET"),
        ("DELETE", "/conversations/abc/stream", "GET, POST"),
        ("PUT", "/conversations/import", "DELETE, GET, POST"),
    ],
)
async def test_a_405_names_every_allowed_method(
    client: httpx.AsyncClient, method: str, path: str, allow: str
) -> None:
    response = await client.request(method, path)
    assert response.status_code == 405
    assert response.headers["allow"] == allow
    assert response.json()["code"] == "method_not_allowed"
