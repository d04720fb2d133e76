"""The OpenAPI contract: every route's error statuses, the problem schemas, the bearer scheme.

May import FastAPI, pydantic, the problems module and the runs layer's event vocabulary
(through app.api.schemas.events). ``document_contract(app)`` runs once at assembly and derives,
in the generated document, what each operation can answer from what it takes (a body, an
``If-Match``, a path id, the bearer key…), so a route added later is documented by the same
rules without a line of its own. A route's own ``responses`` descriptions win.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel, ConfigDict, Field

from app.api.ai_sdk.response import AI_SDK_FRAME
from app.api.middleware.hosts import PROBE_PATHS
from app.api.problems import PROBLEM_JSON
from app.api.schemas.events import EVENT_DATA, EventName
from app.runs.events import EVENT_ID_PATTERN

SSE = "text/event-stream"


_SCHEMAS = "#/components/schemas/"
STREAM_EVENT = "StreamEvent"  # the components' union of every event, parsed


def event_schema_name(name: EventName) -> str:
    """The component of one parsed event: ``run_started`` → ``RunStartedEvent``."""
    return "".join(part.capitalize() for part in name.split("_")) + "Event"


def _sse_event(name: EventName) -> dict[str, Any]:
    """One event as it is on the wire: ``data`` is JSON text whose schema is ``contentSchema``."""
    body = {"$ref": f"{_SCHEMAS}{EVENT_DATA[name].__name__}"}
    return {
        "type": "object",
        "title": name,
        "required": ["event", "data"],
        "properties": {
            "id": {"type": "string", "pattern": EVENT_ID_PATTERN},
            "event": {"const": name},
            "data": {
                "type": "string",
                "contentMediaType": "application/json",
                "contentSchema": body,
            },
        },
    }


SSE_EVENT: dict[str, Any] = {
    "description": "One Server-Sent Event (the schema of each event of the stream, as the "
    "`itemSchema` of OpenAPI 3.2 would give it): `id` is `<run id>:<seq>` (send it back as "
    "`Last-Event-ID` to resume), `event` its name, `data` JSON text whose schema "
    f"(`contentSchema`) depends on the name. Parsed, an event is a `{STREAM_EVENT}`.",
    "oneOf": [_sse_event(name) for name in EventName],
}


def _parsed_event(name: EventName) -> dict[str, Any]:
    """One event as a client holds it once its ``data`` is parsed: typed by generators."""
    return {
        "type": "object",
        "title": event_schema_name(name),
        "description": f"The `{name}` event, its `data` parsed from JSON.",
        "required": ["event", "data"],
        "properties": {
            "id": {"type": "string", "pattern": EVENT_ID_PATTERN},
            "event": {"type": "string", "const": name},
            "data": {"$ref": f"{_SCHEMAS}{EVENT_DATA[name].__name__}"},
        },
    }


def _event_components() -> dict[str, dict[str, Any]]:
    """Each parsed event, and their union tagged by ``event``."""
    refs = {name.value: f"{_SCHEMAS}{event_schema_name(name)}" for name in EventName}
    components = {event_schema_name(name): _parsed_event(name) for name in EventName}
    components[STREAM_EVENT] = {
        "description": "An event of a run's stream (`text/event-stream`) with its `data` parsed "
        "from JSON, by its name: what a client gets from each `MessageEvent` of an "
        "`EventSource` (`{event: e.type, id: e.lastEventId, data: JSON.parse(e.data)}`).",
        "oneOf": [{"$ref": ref} for ref in refs.values()],
        "discriminator": {"propertyName": "event", "mapping": refs},
    }
    return components


ITEM_SCHEMA = "x-itemSchema"  # OpenAPI 3.2's `itemSchema`, as a 3.1 extension
EVENT_UNION = "x-parley-event"


def _sse_content(path: str, operation: dict[str, Any]) -> dict[str, Any]:
    """``text/event-stream`` in OpenAPI 3.1: no ``schema`` (a generated client would parse the
    body by it), each event on the wire as ``x-itemSchema`` (3.2's ``itemSchema`` under an
    extension's name: a test hands it to schemathesis under the real one), and the union of
    the parsed events as ``x-parley-event`` (typed by generators through the components)."""
    item = _item_schema(path, operation)
    if item is AI_SDK_FRAME:  # the AI SDK's routes: its chunks only
        return {ITEM_SCHEMA: item}
    return {ITEM_SCHEMA: item, EVENT_UNION: {"$ref": f"{_SCHEMAS}{STREAM_EVENT}"}}


BEARER = "bearer"  # the scheme's name; app.api.deps declares it on every keyed route
_PROBLEM_REF = "#/components/schemas/Problem"
_VALIDATION_REF = "#/components/schemas/ValidationProblem"
_RESUME_HEADER = "last-event-id"
_IDEMPOTENCY_HEADER = "idempotency-key"
_BAD_HEADERS = {"if-match", _RESUME_HEADER, _IDEMPOTENCY_HEADER}

DESCRIPTIONS = {
    400: "Bad request: the request's `Host` is not listed in `PARLEY_ALLOWED_HOSTS` "
    "(`host_not_allowed`: refused before anything runs), the body is not JSON "
    "(`malformed_json`), or a cursor, `If-Match`, `Last-Event-ID` or `Idempotency-Key` is not "
    "one this service issued or accepts.",
    401: "A key is required (the server sets `PARLEY_API_KEYS`) and none, or an unknown one, "
    "was sent as `Authorization: Bearer <key>`.",
    403: "A browser page on an origin that is neither Parley's own nor listed in "
    "`PARLEY_CORS_ORIGINS` (`origin_not_allowed`): refused before anything runs.",
    404: "No such conversation or run — or one this caller's key may not see.",
    409: "A run holds the conversation (`conversation_running`, with `run_id`), tool results "
    "are pending, nothing runs to cancel, or an `Idempotency-Key` is in use by a request "
    "still being served.",
    410: "The run finished and its stored events were pruned: read its messages instead.",
    412: "`If-Match` names a version that is no longer current (`current_version` says which).",
    413: "The request body is larger than this route accepts: `PARLEY_MAX_IMPORT_BYTES` "
    "(default 32 MiB) for `POST /conversations` and `POST /conversations/import`, which load "
    "a whole conversation; `PARLEY_MAX_BODY_BYTES` (default 1 MiB) for every other route.",
    415: "The body is sent in a `Content-Encoding` (gzip, br…): send it as is "
    "(`unsupported_content_encoding`); or it is not sent as `Content-Type: application/json` "
    "(`unsupported_media_type`).",
    422: "The request is invalid: each bad field is located in `errors` (`loc`, `msg`, `type`).",
    429: "The key's limit (docs/spend.md): its requests this minute (`rate_limited`), its runs "
    "going (`too_many_runs`) or its output tokens of the day or dollars of the month "
    "(`budget_exceeded`); retry after `Retry-After` seconds.",
    503: "The server is shutting down or not ready, or its database does not answer "
    "(`database_unavailable`); retry after `Retry-After` seconds.",
}


class FieldError(BaseModel):
    """One invalid field of a request."""

    loc: list[str | int] = Field(
        description="Where: `body`, `query`, `header` or `path`, then keys."
    )
    msg: str
    type: str


class Problem(BaseModel):
    """An error, as `application/problem+json` (RFC 9457); extensions vary by `code`."""

    model_config = ConfigDict(extra="allow")

    type: str = Field(description="`/problems/<code>`.", examples=["/problems/not_found"])
    title: str
    status: int
    detail: str = Field(description="What went wrong, for a human.")
    code: str = Field(description="The stable error code (the same an `error` event carries).")
    instance: str | None = Field(None, description="The request's id (`X-Request-ID`).")


class ValidationProblem(Problem):
    """A 422: every invalid field, located."""

    errors: list[FieldError]


def operation_statuses(path: str, method: str, operation: dict[str, Any]) -> set[int]:
    """The error statuses an operation can answer, from what it takes."""
    params = operation.get("parameters", [])
    headers = {p["name"].lower() for p in params if p.get("in") == "header"}
    queries = {p["name"] for p in params if p.get("in") == "query"}
    has_path = any(p.get("in") == "path" for p in params)
    statuses: set[int] = {403}  # the Origin check guards every route (middleware/browser.py)
    if path not in PROBE_PATHS:
        statuses.add(400)  # a Host not allowed (middleware/hosts.py)
    if "requestBody" in operation:
        statuses |= {400, 413, 422}
    if method in ("post", "put", "patch", "delete"):
        statuses.add(415)  # a body in a Content-Encoding (middleware/strict_json.py)
    if params:
        statuses.add(422)
    if headers & _BAD_HEADERS or "cursor" in queries:
        statuses.add(400)
    if operation.get("security"):
        statuses |= {401, 503}  # every /conversations route: the key, and the database
        # the admin API is 404 while PARLEY_ADMIN_TOKEN is unset; a key's limits are 429
        statuses.add(404 if path.startswith("/admin/") else 429)
    if has_path:
        statuses.add(404)
        if method not in ("get", "patch"):  # PATCH takes no lease; GET starts no run
            statuses.add(409)
    if _IDEMPOTENCY_HEADER in headers:
        statuses.add(409)  # the key is in use by a request still being served
    if "if-match" in headers:
        statuses.add(412)
    if _RESUME_HEADER in headers:
        statuses.add(410)
    return statuses


_CONVERSATION_REF = "#/components/schemas/ConversationOut"
_ETAG = {
    "description": 'The conversation\'s version as an ETag (`"5"`): send it back as `If-Match`.',
    "required": True,
    "schema": {"type": "string", "pattern": '^"[0-9]+"$'},
}
_LOCATION = {
    "description": "The new conversation's URL path.",
    "required": True,
    "schema": {"type": "string"},
}
_RUN_ID = {
    "description": "The id of the run this stream follows.",
    "required": True,
    "schema": {"type": "string", "pattern": "^[0-9a-f]{32}$"},
}
_RETRY_AFTER = {
    "description": "Seconds to wait before retrying (`database_unavailable`, `shutting_down`, "
    "`idempotency_key_in_use`, a key's limits).",
    "required": False,
    "schema": {"type": "string", "pattern": "^[0-9]+$"},
}
_REPLAYED = {
    "description": "`true` when this is the stored result of an earlier request with the same "
    "`Idempotency-Key`.",
    "required": False,
    "schema": {"type": "string", "enum": ["true"]},
}


def _response_headers(
    status: str, entry: dict[str, Any], idempotent: bool
) -> dict[str, dict[str, Any]]:
    """The headers a response carries (app/api/convert.py's ETag, Location on a create, the
    run id of a stream, Retry-After of a 409 or 503, Idempotent-Replayed of a retry)."""
    content = entry.get("content", {})
    schema = content.get("application/json", {}).get("schema", {})
    headers: dict[str, dict[str, Any]] = {}
    if schema.get("$ref") == _CONVERSATION_REF:
        headers["ETag"] = _ETAG
    if status == "201":
        headers["Location"] = _LOCATION
    if status == "200" and SSE in content:
        headers["X-Run-Id"] = _RUN_ID
    if status in ("409", "429", "503"):
        headers["Retry-After"] = _RETRY_AFTER
    if idempotent and status.startswith("2"):
        headers["Idempotent-Replayed"] = _REPLAYED
    return headers


def _problem_content(status: int) -> dict[str, Any]:
    ref = _VALIDATION_REF if status == 422 else _PROBLEM_REF
    return {PROBLEM_JSON: {"schema": {"$ref": ref}}}


def _document_operation(path: str, method: str, operation: dict[str, Any]) -> None:
    responses: dict[str, Any] = operation.setdefault("responses", {})
    declared = {int(s) for s in responses if s.isdigit() and int(s) >= 400}
    for status in sorted(operation_statuses(path, method, operation) | declared):
        entry = responses.setdefault(str(status), {})
        if status == 422 or not entry.get("description"):
            entry["description"] = DESCRIPTIONS.get(status, "An error.")
        content = entry.get("content", {})
        content.pop("application/json", None)  # FastAPI's HTTPValidationError: never served
        entry["content"] = {**_problem_content(status), **content}
    for entry in responses.values():
        if SSE in entry.get("content", {}):
            entry["content"][SSE] = _sse_content(path, operation)
    params = operation.get("parameters", [])
    idempotent = any(
        p.get("in") == "header" and p["name"].lower() == _IDEMPOTENCY_HEADER for p in params
    )
    for code, entry in responses.items():
        headers = _response_headers(code, entry, idempotent)
        if headers:
            entry["headers"] = {**headers, **entry.get("headers", {})}
    for param in params:
        if param.get("in") in ("header", "query"):
            _never_null(param["schema"])
    if any(p.get("in") == "header" and p["name"].lower() == _RESUME_HEADER for p in params):
        responses.setdefault("204", {"description": "Resumed: the run has nothing left to send."})
    if operation.get("security"):
        # Optional: with no PARLEY_API_KEYS, requests without a key share one anonymous space.
        operation["security"] = [{BEARER: []}, {}]


def _item_schema(path: str, operation: dict[str, Any]) -> dict[str, Any]:
    """Each frame's schema: Parley's named events; the AI SDK's chunks on its routes, and as
    well on a stream route that takes ``protocol``."""
    if path.startswith("/ai-sdk/"):
        return AI_SDK_FRAME
    if any(p.get("name") == "protocol" for p in operation.get("parameters", [])):
        return {**SSE_EVENT, "oneOf": [AI_SDK_FRAME, *SSE_EVENT["oneOf"]]}
    return SSE_EVENT


def _never_null(schema: dict[str, Any]) -> None:
    """A header or query value is never null: an optional one is absent (``required: false``),
    so the ``null`` branch FastAPI writes for ``str | None`` goes (a client would send it as
    the text ``null``)."""
    variants = schema.get("anyOf", [])
    if {"type": "null"} not in variants:
        return
    rest = [v for v in variants if v != {"type": "null"}]
    del schema["anyOf"]
    if len(rest) == 1:
        schema.update(rest[0])
    else:
        schema["anyOf"] = rest


def _add_components(document: dict[str, Any]) -> None:
    components = document.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    for unused in ("HTTPValidationError", "ValidationError"):
        schemas.pop(unused, None)
    models: list[type[BaseModel]] = [FieldError, Problem, ValidationProblem]
    for model in [*models, *EVENT_DATA.values()]:
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        schemas.update(schema.pop("$defs", {}))
        schemas[model.__name__] = schema
    schemas.update(_event_components())
    components["securitySchemes"] = {
        BEARER: {
            "type": "http",
            "scheme": "bearer",
            "description": "Any token, or none, unless the server sets `PARLEY_API_KEYS`; "
            "each token sees only its own conversations.",
        }
    }


_TEXT_FIELDS = {  # schema -> property: a text the server refuses past `max_text_chars`
    "SystemMessageIn": "text",
    "UserMessageIn": "text",
    "AssistantMessageIn": "text",
    "ConversationCreate": "system_prompt",
}


def _document_limits(
    document: dict[str, Any],
    max_text_chars: int | None,
    max_bundle_messages: int | None,
    server_tools: list[str] | None,
) -> None:
    """The size limits the routes check against the settings (app/api/convert.py), as
    ``maxLength`` and ``maxItems``, so that a schema-valid request is not refused for its size;
    and the names of the server's tools, the only ones ``config.tools`` may name, once each."""
    schemas = document.get("components", {}).get("schemas", {})
    tools = schemas.get("ConfigPatch", {}).get("properties", {}).get("tools", {})
    if server_tools is not None:
        for branch in tools.get("anyOf", []):
            if branch.get("type") == "array":
                branch["items"] = {"type": "string", "enum": server_tools}
                branch["uniqueItems"] = True
    if max_text_chars is not None:
        for name, field in _TEXT_FIELDS.items():
            prop = schemas.get(name, {}).get("properties", {}).get(field)
            if prop is None:
                continue
            for branch in [prop, *prop.get("anyOf", [])]:
                if branch.get("type") == "string":
                    branch["maxLength"] = max_text_chars
    if max_bundle_messages is not None:
        _document_bundle_limit(schemas, max_bundle_messages)


def _document_bundle_limit(schemas: dict[str, Any], max_bundle_messages: int) -> None:
    """A delta's messages, and a new conversation's when given as a delta's (not the document)."""
    messages = schemas.get("DeltaBundle", {}).get("properties", {}).get("messages")
    if messages is not None:
        messages["maxItems"] = max_bundle_messages
    first = schemas.get("ConversationCreate", {}).get("properties", {}).get("messages", {})
    for branch in first.get("anyOf", []):
        if branch.get("type") == "array":
            branch["maxItems"] = max_bundle_messages


def document_contract(
    app: FastAPI,
    *,
    max_text_chars: int | None = None,
    max_bundle_messages: int | None = None,
    server_tools: list[str] | None = None,
) -> None:
    """Make ``app.openapi()`` document every operation's problems and the bearer scheme, and
    the size limits of the settings."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = get_openapi(
                title=app.title,
                version=app.version,
                description=app.description,
                routes=app.routes,
                tags=app.openapi_tags,  # the reference's sections in their order
            )
            for path, operations in document.get("paths", {}).items():
                for method, operation in operations.items():
                    _document_operation(path, method, operation)
            _add_components(document)
            _document_limits(document, max_text_chars, max_bundle_messages, server_tools)
            app.openapi_schema = document
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
