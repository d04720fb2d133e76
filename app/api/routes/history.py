"""Routes that read and reshape a conversation's history: messages (paged), context, fork,
rewind, and import in a provider's format.

May import FastAPI, schemas, deps and the runs layer. Each route parses, calls one use case,
and maps the result.
"""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query, Request, status
from fastapi.responses import JSONResponse, Response

from app.api import convert
from app.api.ai_sdk.messages import ui_messages
from app.api.bodies import ParsedBodyRoute
from app.api.deps import CallerDep, IfMatchDep
from app.api.paths import file_content_path, public_path
from app.api.problems import Unprocessable
from app.api.schemas import (
    MAX_INDEX,
    ContextMessage,
    ContextOut,
    ConversationOut,
    MessageListDocument,
)
from app.api.schemas.history import (
    AnthropicMessagesOut,
    ForkIn,
    ImportIn,
    MessagePage,
    OpenAIMessagesOut,
    RewindIn,
)
from app.conversations.history import HistoryService
from app.conversations.service import ConversationView
from app.domain import MessageList, format_version, to_anthropic_format, to_openai_format
from app.domain.inline_files import inline_document

router = APIRouter(prefix="/conversations", tags=["history"], route_class=ParsedBodyRoute)

IdPath = Annotated[str, Path(description="The conversation id.")]
DEFAULT_PAGE = 100
MAX_PAGE = 1000


def _created(request: Request, view: ConversationView) -> JSONResponse:
    out = convert.conversation_out(view)
    location = public_path(request.scope, f"/conversations/{out.id}")
    headers = {"Location": location, **convert.etag(out.version)}
    return JSONResponse(out.model_dump(mode="json"), status_code=201, headers=headers)


@router.post("/import", status_code=status.HTTP_201_CREATED, response_model=ConversationOut)
async def import_conversation(
    request: Request,
    body: ImportIn,
    caller: CallerDep,
    format: Annotated[
        Literal["openai", "anthropic"],
        Query(description="The shape of the body: `openai` or `anthropic`."),
    ],
) -> JSONResponse:
    """Create a conversation from an OpenAI chat-completions or Anthropic messages request
    (what `GET …/messages?format=…` exports). A bad item is named by index and field."""
    # off the event loop: an import may be tens of MB (app/api/bodies.py)
    await asyncio.to_thread(convert.check_unicode, body.model_dump(exclude_unset=True), ("body",))
    if format == "openai" and body.system is not None:
        raise Unprocessable(
            "the OpenAI format has no 'system' field: send a system message",
            errors=[{"loc": ["body", "system"], "msg": "not in this format", "type": "extra"}],
        )
    document: dict[str, Any] = {"messages": body.messages, "system": body.system}
    view = await caller.history().import_document(
        format, document, convert.config_patch(body.config), body.metadata
    )
    return _created(request, view)


@router.post(
    "/{conversation_id}/fork", status_code=status.HTTP_201_CREATED, response_model=ConversationOut
)
async def fork_conversation(
    request: Request, conversation_id: IdPath, caller: CallerDep, body: ForkIn | None = None
) -> JSONResponse:
    """A new conversation with the first `keep` messages (default: all), the same config and
    system prompt, and `metadata.forked_from` = `{"id", "keep"}`."""
    keep = body.keep if body is not None else None
    return _created(request, await caller.history().fork(conversation_id, keep))


@router.post("/{conversation_id}/rewind", response_model=ConversationOut)
async def rewind_conversation(
    conversation_id: IdPath, body: RewindIn, caller: CallerDep, expected_version: IfMatchDep
) -> Response:
    """Drop the messages after the first `keep` (pending tool calls among them too). 409
    while a run holds the conversation; with `If-Match`, 412 on a stale version."""
    view = await caller.history().rewind(conversation_id, body.keep, expected_version)
    out = convert.conversation_out(view)
    return JSONResponse(out.model_dump(mode="json"), headers=convert.etag(out.version))


@router.get(
    "/{conversation_id}/messages",
    # Most specific first: a client generated from the document takes the first shape that
    # parses (a page is also a MessageListDocument, an Anthropic body an OpenAIMessagesOut).
    response_model=MessagePage | AnthropicMessagesOut | MessageListDocument | OpenAIMessagesOut,
    responses={
        200: {
            "description": "By `format`: the serialized MessageList (`MessageListDocument`), "
            "a page of it with `after`/`limit` (`MessagePage`), `OpenAIMessagesOut`, "
            "`AnthropicMessagesOut`, or the AI SDK's `UIMessage[]` (`ai-sdk`)."
        }
    },
)
async def get_messages(
    conversation_id: IdPath,
    caller: CallerDep,
    format: Annotated[
        Literal["parley", "openai", "anthropic", "ai-sdk"],
        Query(
            description="`parley` (the serialized format), `openai`, `anthropic` or `ai-sdk` "
            "(the AI SDK's `UIMessage[]`, with stable ids: `useChat`'s initial messages; "
            "attachments as `file` parts whose `url` is the file's content route)."
        ),
    ] = "parley",
    after: Annotated[
        int | None, Query(ge=0, le=MAX_INDEX, description="Page: the messages after this index.")
    ] = None,
    limit: Annotated[
        int | None,
        Query(ge=1, le=MAX_PAGE, description=f"Page: at most this many (default {DEFAULT_PAGE})."),
    ] = None,
    attachments: Annotated[
        Literal["reference", "inline"],
        Query(
            description="`parley` format: attachments by file id (`reference`), or with their "
            "bytes as base64 `data` beside it (`inline`: a portable document). The provider "
            "formats always inline them."
        ),
    ] = "reference",
) -> Any:
    """The conversation's messages: the serialized document ("save") that `POST
    /conversations` loads back (version "1.1" when it holds reasoning, with each
    `ReasoningMessage`'s opaque `payload`), or `?format=openai` (reasoning left out) /
    `?format=anthropic` (Anthropic's reasoning as `thinking` blocks). With `after` or
    `limit`, one page of the serialized document and `next_after` to continue from."""
    if after is not None or limit is not None:
        if format != "parley":
            raise Unprocessable(
                "pages are served in the parley format only",
                errors=[{"loc": ["query", "format"], "msg": "must be parley", "type": "value"}],
            )
        return await _page(caller.history(), conversation_id, after, limit or DEFAULT_PAGE)
    messages = list(await caller.conversations().messages(conversation_id))
    inline = format in ("openai", "anthropic") or attachments == "inline"
    files = await caller.history().file_bytes(messages) if inline else {}
    if format == "openai":
        return JSONResponse({"messages": to_openai_format(messages, files=files)})
    if format == "anthropic":
        return JSONResponse(to_anthropic_format(messages, files=files))
    if format == "ai-sdk":
        url = partial(file_content_path, caller.root_path)
        return JSONResponse(ui_messages(conversation_id, messages, url))
    return JSONResponse(inline_document(MessageList(messages).to_dict(), files))


async def _page(
    history: HistoryService, conversation_id: str, after: int | None, limit: int
) -> JSONResponse:
    page = await history.page(conversation_id, after, limit)
    body = MessagePage(
        messages=[m.to_serializable_dict() for m in page.messages],
        version=format_version(page.messages),
        start=page.start,
        total=page.total,
        next_after=page.next_after,
    )
    return JSONResponse(body.model_dump(mode="json"))


@router.get("/{conversation_id}/context", response_model=ContextOut)
async def get_context(
    conversation_id: IdPath,
    caller: CallerDep,
    max_tokens: Annotated[
        int | None, Query(ge=1, description="Token budget (default: the config's).")
    ] = None,
) -> ContextOut:
    """The messages a run would send within `max_tokens`: the system prompt always, then the
    most recent messages that fit (history over the budget is dropped in steps, down to
    `PARLEY_CONTEXT_TRIM_TO` of it), repaired as every model call repairs them (an unanswered
    tool call gets an "interrupted" error, same-role turns are merged, …), with token counts."""
    context = await caller.history().context(conversation_id, max_tokens)
    return ContextOut(
        max_tokens=context.budget,
        total_tokens=sum(context.token_counts),
        exact=context.exact,
        dropped=context.dropped,
        messages=[
            ContextMessage(
                index=r.sources[0],
                indices=list(r.sources),
                repaired=changed,
                tokens=tokens,
                message=r.message.to_serializable_dict(),
            )
            for r, changed, tokens in zip(
                context.messages, context.changed, context.token_counts, strict=True
            )
        ],
    )
