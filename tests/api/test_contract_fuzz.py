"""schemathesis over the whole OpenAPI document, on real uvicorn, on SQLite and PostgreSQL.

Every operation, positive and negative data, a fixed seed and a bounded number of examples: no
5xx, no status or content type the document does not list, no body that fails its schema, no
schema-valid request refused but for the reasons below, no schema-violating request accepted,
and no operation schemathesis cannot generate for (a schema error fails the test). The
streams run on the offline model with no delay, so each ends by itself (no hang). A second
property posts arbitrary JSON to every write route: never a 5xx.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
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
    negative_data_rejection,
    positive_data_acceptance,
    response_schema_conformance,
    status_code_conformance,
)

from app.api.contract import ITEM_SCHEMA
from app.api.middleware.strict_json import find_unstorable
from app.main import IMPORT_PATHS
from app.openapi_export import openapi_document
from app.settings import Settings
from tests.api.conftest import LiveServer
from tests.conftest import PostgresServer, copy_sqlite

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
# An upload's bytes are what they are: a schema says "binary", not "the bytes of a PNG" (the
# kinds accepted, the limit of each, not empty: docs/files.md).
CONTENT_REFUSALS = {
    (415, "unsupported_file"),
    (413, "file_too_large"),
    (422, "empty_file"),
}
# What depends on the server's configuration: the providers it has keys for (`GET /providers`
# lists them) — no static document can name them; a webhook URL's host, refused when it does
# not resolve or resolves to a private address (DNS and PARLEY_WEBHOOK_ALLOW_PRIVATE).
CONFIGURATION_LOCS = [["body", "config", "provider"], ["body", "url"]]
# Pages come in the parley format only: a combination of parameters OpenAPI cannot express.
UNDOCUMENTABLE_LOCS = [["query", "format"]]
# An attachment's `file_id` must be one of the caller's stored files, and its inline `data` the
# base64 of a file of an accepted kind (docs/format.md, "Attachments"): what is stored, and what
# the bytes are, no schema can say.
ATTACHMENT_FIELDS = ("file_id", "data")
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
        or (len(loc) >= 3 and loc[-3] == "attachments" and loc[-1] in ATTACHMENT_FIELDS)
    )


def body_limit(path: str) -> int:
    """The route's body limit in bytes, as the 413 of the document states it."""
    settings = Settings()
    return settings.max_import_bytes if path in IMPORT_PATHS else settings.max_body_bytes


def over_body_limit(case: Any, response: Any) -> bool:
    """A 413 for a body over the route's documented byte limit: JSON Schema can bound a text's
    characters and a list's items, not the bytes of the whole body (100 messages of 100,000
    characters are valid and 10 MB), so such a body is refused by the limit, by design."""
    sent = response.request.body or b""
    return response.status_code == 413 and len(sent) > body_limit(case.operation.path)


def accepts_valid_data(ctx: Any, response: Any, case: Any) -> bool | None:
    """schemathesis's positive_data_acceptance (a schema-valid request is not refused), but
    for the refusals above."""
    if isinstance(case.body, dict | list) and find_unstorable(case.body):
        return None
    if over_body_limit(case, response):
        return None
    if response.status_code in (413, 415, 422):
        code = response.json().get("code")
        if (response.status_code, code) in CONTENT_REFUSALS:
            return None
    if response.status_code in (400, 412, 422):
        problem = response.json()
        if (response.status_code, problem.get("code")) in STATE_REFUSALS:
            return None
        errors = problem.get("errors", [])
        if errors and all(_refused_by_design(case, error) for error in errors):
            return None
    return positive_data_acceptance(ctx, response, case)


def rejects_invalid_data(ctx: Any, response: Any, case: Any) -> bool | None:
    """schemathesis's negative_data_rejection (a schema-violating request is refused), with a
    413 counted as a refusal: a text past its ``maxLength`` may also be past the byte limit."""
    if response.status_code == 413:
        return None
    if case.media_type == "multipart/form-data":
        # A form's parts are text on the wire (RFC 7578): a number or a boolean put in a part
        # arrives as the text it is written as, a valid value; there is no type to break.
        return None
    return negative_data_rejection(ctx, response, case)


COMMON_CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
CHECKS = {
    GenerationMode.POSITIVE: [*COMMON_CHECKS, accepts_valid_data],
    GenerationMode.NEGATIVE: [*COMMON_CHECKS, rejects_invalid_data],
}
SEED = 20261123
SKIPPED: list[str] = []


def _fuzz_operation(operation: Any, mode: GenerationMode, urls: list[str], http: Any) -> None:
    """Each case generated for ``operation`` goes to every server (one per database): the
    generating, most of the cost, is done once."""
    existing = [_existing(operation, mode, http, url) for url in urls]

    @seed(SEED)
    @settings(
        max_examples=EXAMPLES[mode],
        deadline=None,
        database=None,
        derandomize=False,
        suppress_health_check=list(HealthCheck),
        print_blob=True,
    )
    @given(case=operation.as_strategy(generation_mode=mode, **existing[0]))
    def run(case: Any) -> None:
        for url, named in zip(urls, existing, strict=True):
            if named:  # this server's own conversation
                case.path_parameters = {**case.path_parameters, **named["path_parameters"]}
            case.call_and_validate(base_url=url, session=http, checks=CHECKS[mode], timeout=30)

    try:
        run()
    except InvalidSchema as exc:  # a schema error: the document is what must change
        raise AssertionError(f"{operation.label} ({mode}): {exc}") from exc
    except Unsatisfiable as exc:
        # Nothing to make invalid: an operation that takes no input has no negative case.
        assert mode is GenerationMode.NEGATIVE and not _takes_input(operation), (
            operation.label,
            exc,
        )
        SKIPPED.append(f"{operation.label} ({mode}): {type(exc).__name__}")


def _takes_input(operation: Any) -> bool:
    """Whether anything the operation takes could be made invalid: a body, or a parameter
    with more to break than being a string (a path or header string is any text)."""
    definition = operation.definition.raw
    loose = {"title", "description", "type"}
    return bool(definition.get("requestBody")) or any(
        set(parameter.get("schema", {})) - loose or parameter["schema"].get("type") != "string"
        for parameter in definition.get("parameters", [])
    )


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


def _with_item_schemas(document: dict[str, Any]) -> dict[str, Any]:
    """The document with each stream's events under OpenAPI 3.2's ``itemSchema`` (the served
    3.1 document has them as ``x-itemSchema``), so that schemathesis checks every event of a
    stream, and each event's ``data`` against its ``contentSchema``."""
    for operations in document["paths"].values():
        for operation in operations.values():
            for response in operation["responses"].values():
                stream = response.get("content", {}).get("text/event-stream")
                if stream is not None:
                    stream["itemSchema"] = stream[ITEM_SCHEMA]
    return document


def _fuzz_everything(urls: list[str]) -> None:
    import requests

    schema = schemathesis.openapi.from_dict(_with_item_schemas(openapi_document()))
    with requests.Session() as http:
        for result in schema.get_all_operations():
            operation = result.ok()
            for mode in EXAMPLES:
                _fuzz_operation(operation, mode, urls, http)


@pytest.fixture
def database_urls(
    sqlite_template: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> list[str]:
    """A migrated database of this test's own on SQLite, and on PostgreSQL when one answers
    (which CI requires: ``postgres_server``)."""
    urls = [copy_sqlite(sqlite_template, tmp_path)]
    try:
        server: PostgresServer = request.getfixturevalue("postgres_server")
    except pytest.skip.Exception:
        return urls
    asyncio.run(server.empty())
    return [*urls, server.url_for(server.migrated)]


async def test_schemathesis_finds_nothing(database_urls: list[str]) -> None:
    """On both databases at once: every case is sent to a server on each."""
    with contextlib.ExitStack() as servers:
        urls = [
            servers.enter_context(
                LiveServer(Settings(database_url=url, sse_ping_seconds=0, offline_delay_ms=0))
            ).url
            for url in database_urls
        ]
        SKIPPED.clear()
        await asyncio.to_thread(_fuzz_everything, urls)
    print("on", len(urls), "databases; not fuzzed with negative data:", *SKIPPED, sep="\n  ")


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
    ("POST", "/ai-sdk/chat"),
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


# The CLI's own phases in negative mode (examples, and coverage: boundary values and each
# keyword broken in turn), over the document as served: any schema error (an operation it
# cannot generate for) fails the run, and so does a 5xx or a schema-violating request accepted.
# Its fuzzing phase would repeat the negative mode of test_schemathesis_finds_nothing (random
# schema-violating requests to every operation, under more checks) at twice the cost.
# A 413 counts as a refusal (a text past its maxLength may be past the byte limit too).
# An upload's form parts are text on the wire (RFC 7578): a type broken there is no broken
# request (rejects_invalid_data): POST /files may take it (201).
CLI_CONFIG = """
[checks.negative_data_rejection]
expected-statuses = [400, 401, 403, 404, 405, 406, 409, 413, 415, 422, 428, 429]

[[operations]]
include-path = "/files"
include-method = "POST"
checks.negative_data_rejection.expected-statuses = [
    201, 400, 401, 403, 404, 405, 406, 409, 413, 415, 422, 428, 429
]
"""


def _cli_negative(url: str, workdir: Path) -> subprocess.CompletedProcess[str]:
    schema = workdir / "openapi.json"
    schema.write_text(json.dumps(openapi_document()), encoding="utf-8")
    config = workdir / "schemathesis.toml"
    config.write_text(CLI_CONFIG, encoding="utf-8")
    command = [str(Path(sys.executable).parent / "schemathesis"), "--config-file", str(config)]
    command += ["run", str(schema), "--url", url, "--mode", "negative", "--seed", str(SEED)]
    command += ["--phases", "examples,coverage", "--workers", "1"]
    command += ["--checks", "not_a_server_error,negative_data_rejection"]
    # A loaded machine (this suite under coverage) may take longer than the CLI's 10 s default
    # to answer one request: a slow answer is no finding here.
    command += ["--request-timeout", "120"]
    return subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=workdir)


def _findings(output: str) -> str:
    """The CLI's summary first (what failed, where), then the output's end."""
    summary = output.rfind("SUMMARY")
    return (output[summary:][:3000] if summary >= 0 else "") + "\n...\n" + output[-6000:]


async def test_schemathesis_cli_in_negative_mode_finds_nothing(
    live_server: Callable[..., LiveServer], tmp_path: Path
) -> None:
    server = live_server(offline_delay_ms=0)
    done = await asyncio.to_thread(_cli_negative, server.url, tmp_path)
    assert done.returncode == 0, _findings(done.stdout + done.stderr)
