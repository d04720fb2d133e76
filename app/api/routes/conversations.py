"""Routes for conversations: create/load, list and search, read, edit, delta bundles, clear,
delete.

May import FastAPI, schemas, deps and the runs layer. Each route parses, calls one use case,
and maps the result.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, HTTPException, Path, Query, Request, Response, status
from fastapi.responses import JSONResponse

from app.api import attach, convert
from app.api.bodies import ParsedBodyRoute
from app.api.deps import Caller, CallerDep, CursorQuery, IfMatchDep
from app.api.idempotency import IdempotencyKeyHeader, idempotent
from app.api.paths import public_path
from app.api.schemas import (
    ConversationCreate,
    ConversationOut,
    ConversationPage,
    ConversationPatch,
    DeltaBundle,
)
from app.api.schemas.usage import UsageTotals
from app.conversations.service import ConversationService, Edit
from app.runs.errors import InvalidInput
from app.runs.services import Services
from app.spend.service import UsageReader
from app.storage import Filters

router = APIRouter(prefix="/conversations", tags=["conversations"], route_class=ParsedBodyRoute)

IdPath = Annotated[str, Path(description="The conversation id.")]


@router.post("", status_code=status.HTTP_201_CREATED, response_model=ConversationOut)
async def create_conversation(
    request: Request,
    body: ConversationCreate,
    caller: CallerDep,
    idempotency_key: IdempotencyKeyHeader = None,
) -> Response:
    """Create a conversation, optionally with a system prompt, a config, metadata, and first
    messages: a list of messages as `POST …/deltas` takes them (`system`, `user`, `assistant`
    text; a `tool` result is a 422, as a new conversation has no pending call), or an object,
    the serialized document that `GET …/messages` returns (told apart by JSON type). The
    system prompt goes first. With `Idempotency-Key`, a retry gets the conversation the first
    request created."""
    conversations, services = caller.conversations(), caller.services
    return await idempotent(
        request,
        idempotency_key,
        caller.idempotency(),
        lambda: _create(request, body, conversations, services),
    )


async def _create(
    request: Request,
    body: ConversationCreate,
    conversations: ConversationService,
    services: Services,
) -> Response:
    convert.check_unicode(body.model_dump(exclude_unset=True), ("body",))
    if body.system_prompt is not None:
        convert.check_text(body.system_prompt, ("body", "system_prompt"), services.settings)
    document, messages = None, []
    owner = conversations.owner
    if isinstance(body.messages, list):
        messages = convert.initial_messages(body.messages, services.settings)
        messages = await attach.with_attachments(messages, body.messages, services.files, owner)
    elif body.messages is not None:
        document = body.messages.model_dump(mode="json")
        document = await attach.checked_document(document, services.files, owner)
    view = await conversations.create(
        body.system_prompt,
        convert.config_patch(body.config),
        body.metadata,
        document=document,
        messages=messages,
    )
    out = convert.conversation_out(view)
    location = public_path(request.scope, f"/conversations/{out.id}")
    headers = {"Location": location, **convert.etag(out.version)}
    return JSONResponse(out.model_dump(mode="json"), status_code=201, headers=headers)


MAX_METADATA_FILTERS = 10
MAX_QUERY_CHARS = 500
_ARCHIVED = {"false": False, "true": True, "all": None}


@router.get("", response_model=ConversationPage)
async def list_conversations(
    request: Request,
    caller: CallerDep,
    limit: Annotated[int | None, Query(ge=1, description="Page size.")] = None,
    cursor: CursorQuery = None,
    q: Annotated[
        str | None,
        Query(
            max_length=MAX_QUERY_CHARS,
            description="Full-text search over titles and the text of user and assistant "
            "messages: conversations holding every word, best match first, each with a "
            "`snippet`. Only its words count (no operators or quotes); empty: no search.",
        ),
    ] = None,
    archived: Annotated[
        Literal["false", "true", "all"],
        Query(description="`false`: conversations not archived; `true`: only archived; `all`."),
    ] = "false",
) -> ConversationPage:
    """Your conversations, newest first (with `q`, best match first), a page at a time.
    `metadata.<key>=<value>` (up to 10) keeps those whose metadata holds that key with exactly
    that string value: `?metadata.project=apollo`."""
    settings = caller.services.settings
    size = min(limit or settings.page_size, settings.max_page_size)
    filters = Filters(
        archived=_ARCHIVED[archived],
        metadata=_metadata_filters(request),
        query=q if q is not None and q.strip() else None,
    )
    views, next_cursor = await caller.conversations().list(size, cursor, filters)
    return ConversationPage(
        items=[convert.conversation_item(v) for v in views], next_cursor=next_cursor
    )


def _metadata_filters(request: Request) -> dict[str, str]:
    """The ``metadata.<key>=<value>`` query parameters, as ``{key: value}``."""
    found: dict[str, str] = {}
    for name, value in request.query_params.multi_items():
        if not name.startswith("metadata."):
            continue
        key = name.removeprefix("metadata.")
        where = ("query", name)
        if not key or key in found:
            raise InvalidInput(where, "name a metadata key once: metadata.<key>=<value>")
        if "\x00" in key or "\x00" in value:
            raise InvalidInput(where, "a metadata filter cannot hold a NUL character")
        found[key] = value
    if len(found) > MAX_METADATA_FILTERS:
        raise InvalidInput(("query",), f"at most {MAX_METADATA_FILTERS} metadata filters")
    return found


@router.api_route("/import", methods=["GET", "DELETE"], include_in_schema=False)
async def import_is_not_a_conversation() -> None:
    """`/conversations/import` is a path of its own (POST only, app/api/routes/history.py): a GET or
    DELETE there is a 405 naming POST, not a 404 for a conversation whose id is "import"."""
    raise HTTPException(status.HTTP_405_METHOD_NOT_ALLOWED)


@router.get("/{conversation_id}", response_model=ConversationOut)
async def get_conversation(conversation_id: IdPath, caller: CallerDep) -> Response:
    """A conversation's config, status, message count and version (also its `ETag`)."""
    out = convert.conversation_out(await caller.conversations().get(conversation_id))
    return await _one(caller, out)


async def _one(caller: Caller, out: ConversationOut) -> Response:
    """One conversation as `GET` and `PATCH` answer it: with its usage totals and `ETag`."""
    totals = await UsageReader(caller.services.database).conversation(out.id)
    out.usage = UsageTotals.model_validate(totals)
    return JSONResponse(out.model_dump(mode="json"), headers=convert.etag(out.version))


_MERGE_PATCH = {
    "requestBody": {
        "content": {
            "application/merge-patch+json": {
                "schema": {"$ref": "#/components/schemas/ConversationPatch"}
            }
        }
    }
}


@router.patch("/{conversation_id}", response_model=ConversationOut, openapi_extra=_MERGE_PATCH)
async def patch_conversation(
    conversation_id: IdPath,
    body: ConversationPatch,
    caller: CallerDep,
    expected_version: IfMatchDep,
) -> Response:
    """Change the title, metadata or archived flag (a JSON Merge Patch, sent as
    `application/merge-patch+json` or `application/json`); one version up. Allowed while a
    run is running: none of these touch the messages. With `If-Match`, a stale version gets
    412 and changes nothing."""
    convert.check_unicode(body.model_dump(exclude_unset=True), ("body",))
    sent = body.model_fields_set
    edit = Edit(
        title=(body.title or "").strip() or None,  # a blank title is no title
        set_title="title" in sent,
        archived=(body.archived or False) if "archived" in sent else None,
        metadata=body.metadata,
        clear_metadata="metadata" in sent and body.metadata is None,
    )
    view = await caller.conversations().edit(conversation_id, edit, expected_version)
    return await _one(caller, convert.conversation_out(view))


@router.delete("/{conversation_id}", status_code=status.HTTP_204_NO_CONTENT)
async def delete_conversation(conversation_id: IdPath, caller: CallerDep) -> Response:
    """Delete a conversation and its messages (409 while a run holds it)."""
    await caller.conversations().delete(conversation_id)
    return Response(status_code=204)


@router.post("/{conversation_id}/deltas", response_model=ConversationOut)
async def post_delta(
    request: Request,
    conversation_id: IdPath,
    body: DeltaBundle,
    caller: CallerDep,
    expected_version: IfMatchDep,
    idempotency_key: IdempotencyKeyHeader = None,
) -> Response:
    """Apply a delta bundle — new messages (`system`, `user`, `assistant`; `tool` results
    for pending client tool calls) and a config merge patch — all or nothing. With
    `If-Match`, a stale version gets 412 and changes nothing; with `Idempotency-Key`, a
    retry gets the first result and appends nothing."""

    async def apply() -> Response:
        delta = await attach.delta(body, caller)
        view = await caller.conversations().apply_delta(conversation_id, delta, expected_version)
        out = convert.conversation_out(view)
        return JSONResponse(out.model_dump(mode="json"), headers=convert.etag(out.version))

    return await idempotent(request, idempotency_key, caller.idempotency(), apply)


@router.post("/{conversation_id}/clear", response_model=ConversationOut)
async def clear_conversation(
    conversation_id: IdPath, caller: CallerDep, expected_version: IfMatchDep
) -> Response:
    """Remove every message except the system prompt."""
    cleared = await caller.conversations().clear(conversation_id, expected_version)
    out = convert.conversation_out(cleared)
    return JSONResponse(out.model_dump(mode="json"), headers=convert.etag(out.version))
