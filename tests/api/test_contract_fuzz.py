"""schemathesis over the whole OpenAPI document, on real uvicorn, on SQLite and PostgreSQL.

Every operation, positive and negative data, a fixed seed and a bounded number of examples: no
5xx, no status or content type the document does not list, no body that fails its schema. The
streams run on the offline model with no delay, so each ends by itself (no hang). A second
property posts arbitrary JSON to every write route: never a 5xx.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.errors import InvalidSchema
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    positive_data_acceptance,
    response_schema_conformance,
    status_code_conformance,
)

from app.api.middleware.strict_json import find_unstorable
from app.openapi_export import openapi_document
from tests.api.conftest import LiveServer

pytestmark = pytest.mark.postgres

EXAMPLES = {GenerationMode.POSITIVE: 25, GenerationMode.NEGATIVE: 15}
# Refusals of schema-valid data that are by design: a body holding a value no database stores
# alike (NUL, a lone surrogate: app/api/middleware/strict_json.py); and those that depend on what is
# stored, which no schema can say: a stale If-Match, a cursor this service did not issue, an
# Idempotency-Key the generator used before, a `keep` past the conversation's end.
STATE_REFUSALS = {
    (400, "invalid_cursor"),
    (412, "version_mismatch"),
    (422, "idempotency_key_reused"),
}
STATE_LOCS = [["body", "keep"]]
# What depends on the server's configuration: the providers it has keys for (`GET /providers`
# lists them) — no static document can name them.
CONFIGURATION_LOCS = [["body", "config", "provider"]]
# Pages come in the parley format only: a combination of parameters OpenAPI cannot express.
UNDOCUMENTABLE_LOCS = [["query", "format"]]
# The messages a whole conversation is loaded from are free-form JSON in the document (the
# serialized format, a provider's request shape), checked by the domain's readers.
FREE_FORM = {
    ("POST", "/conversations"): [["body", "messages"]],
    ("POST", "/conversations/import"): [["body", "messages"], ["body", "system"]],
}


# Integer fields are strict (10.0 is refused, docs/api-contract.md); JSON Schema's "integer"
# cannot tell 10.0 from 10.
STRICT_INTEGER = "int_type"


# Rules across the items of a list, which JSON Schema cannot state: one result per tool call
# in a bundle, and tool names (server and client tools together) that do not repeat.
ACROSS_ITEMS = ("has two results in this bundle", "tool names repeat")


def _refused_by_design(case: Any, error: dict[str, Any]) -> bool:
    loc = error.get("loc", [])
    free = FREE_FORM.get((case.operation.method.upper(), case.operation.path), [])
    return (
        loc in STATE_LOCS + CONFIGURATION_LOCS + UNDOCUMENTABLE_LOCS
        or any(rule in error.get("msg", "") for rule in ACROSS_ITEMS)
        or error.get("type") == STRICT_INTEGER
        or loc[:2] in free
    )


def accepts_valid_data(ctx: Any, response: Any, case: Any) -> bool | None:
    """schemathesis's positive_data_acceptance (a schema-valid request is not refused), but
    for the refusals above."""
    if isinstance(case.body, dict | list) and find_unstorable(case.body):
        return None
    if response.status_code in (400, 412, 422):
        problem = response.json()
        if (response.status_code, problem.get("code")) in STATE_REFUSALS:
            return None
        errors = problem.get("errors", [])
        if errors and all(_refused_by_design(case, error) for error in errors):
            return None
    return positive_data_acceptance(ctx, response, case)


CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    accepts_valid_data,
]
SEED = 20261123
SKIPPED: list[str] = []


def _fuzz_operation(operation: Any, mode: GenerationMode, url: str, http: Any) -> None:
    @seed(SEED)
    @settings(
        max_examples=EXAMPLES[mode],
        deadline=None,
        database=None,
        derandomize=False,
        suppress_health_check=list(HealthCheck),
        print_blob=True,
    )
    @given(
        case=operation.as_strategy(generation_mode=mode, **_existing(operation, mode, http, url))
    )
    def run(case: Any) -> None:
        case.call_and_validate(base_url=url, session=http, checks=CHECKS, timeout=30)

    try:
        run()
    except (Unsatisfiable, InvalidSchema) as exc:
        # Nothing to make invalid (an operation that takes no input has no negative case), or
        # a schema schemathesis cannot mutate: generation's limits, not the server's answers.
        assert mode is GenerationMode.NEGATIVE, (operation.label, exc)
        SKIPPED.append(f"{operation.label} ({mode}): {type(exc).__name__}")


def _existing(operation: Any, mode: GenerationMode, http: Any, url: str) -> dict[str, Any]:
    """Positive cases of a conversation's routes name a conversation that exists (a new one
    with a user message for each operation), so they reach more than the 404."""
    if mode is not GenerationMode.POSITIVE or "{conversation_id}" not in operation.path:
        return {}
    body = {
        "messages": {
            "version": "1.0",
            "messages": [{"type": "TextMessage", "role": "user", "text": "hi there"}],
        }
    }
    created = http.post(f"{url}/conversations", json=body, timeout=30)
    assert created.status_code == 201, created.text
    return {"path_parameters": {"conversation_id": created.json()["id"]}}


def _fuzz_everything(url: str) -> None:
    import requests

    schema = schemathesis.openapi.from_dict(openapi_document())
    with requests.Session() as http:
        for result in schema.get_all_operations():
            operation = result.ok()
            for mode in EXAMPLES:
                _fuzz_operation(operation, mode, url, http)


async def test_schemathesis_finds_nothing(live_server: Callable[..., LiveServer]) -> None:
    server = live_server(offline_delay_ms=0)
    SKIPPED.clear()
    await asyncio.to_thread(_fuzz_everything, server.url)
    print("not fuzzed with negative data:", *SKIPPED, sep="\n  ")


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)
JSON_TYPE = {"content-type": "application/json"}
WRITE_ROUTES = [
    ("POST", "/conversations"),
    ("POST", "/conversations/import?format=openai"),
    ("POST", "/conversations/import?format=anthropic"),
    ("POST", "/conversations/{id}/deltas"),
    ("POST", "/conversations/{id}/stream"),
    ("POST", "/conversations/{id}/fork"),
    ("POST", "/conversations/{id}/rewind"),
]


def _post_arbitrary_json(url: str, conversation_id: str) -> None:
    @seed(SEED)
    @settings(
        max_examples=150, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )
    @given(route=st.sampled_from(WRITE_ROUTES), body=JSON)
    def run(route: tuple[str, str], body: Any) -> None:
        method, path = route
        # Python's encoder, which writes NaN and Infinity as JSON readers in the wild accept.
        content = json.dumps(body).encode("utf-8", "surrogatepass")
        response = http.request(
            method, path.format(id=conversation_id), content=content, headers=JSON_TYPE
        )
        assert response.status_code < 500, (route, body, response.text)

    with httpx.Client(base_url=url, timeout=30) as http:
        run()


async def test_arbitrary_json_never_gets_a_5xx(live_server: Callable[..., LiveServer]) -> None:
    server = live_server(offline_delay_ms=0)
    async with httpx.AsyncClient(base_url=server.url) as client:
        created = await client.post("/conversations", json={})
    await asyncio.to_thread(_post_arbitrary_json, server.url, created.json()["id"])
