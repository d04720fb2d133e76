"""Routes that speak the AI SDK's UI message stream, so `useChat` (and assistant-ui) work
with ``new DefaultChatTransport({api: "<parley>/ai-sdk/chat", headers})`` and nothing else.

May import FastAPI, schemas, deps, the ai_sdk package and the runs layer.

- ``POST /ai-sdk/chat``: the transport's send (``id`` = the Parley conversation's id, which
  must exist: 404 otherwise — create it with ``POST /conversations`` and give its id to
  ``useChat({id})``). Starts a run and streams it; closing the request (the client's stop)
  cancels the run unless ``on_disconnect=continue``.
- ``GET /ai-sdk/chat/{id}/stream``: the transport's reconnect (``resume``). Never starts a
  run: 204 when nothing runs, else the running run's stream from its start.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated

from fastapi import APIRouter, Path, Query, Response

from app.api import attach
from app.api.ai_sdk.request import ChatAsk, ChatRequest, ask
from app.api.ai_sdk.response import AI_SDK_RESPONSES, chat_streamer
from app.api.bodies import ParsedBodyRoute
from app.api.deps import Caller, CallerDep
from app.api.event_stream import EventStream
from app.domain import TextMessage
from app.runs.events import OnDisconnect
from app.runs.follow import follow_live

router = APIRouter(prefix="/ai-sdk", tags=["ai-sdk"], route_class=ParsedBodyRoute)

CHAT_RESPONSES = {
    **AI_SDK_RESPONSES,
    404: {"description": "No conversation with this id."},
    409: {"description": "A run already holds the conversation, or tool results are missing."},
    503: {"description": "The server is shutting down; retry (`Retry-After`)."},
}


@router.post("/chat", responses=CHAT_RESPONSES, response_class=EventStream)
async def chat(
    body: ChatRequest,
    caller: CallerDep,
    on_disconnect: Annotated[
        OnDisconnect,
        Query(
            description="What closing the request does to the run: `cancel` (the chat's "
            "stop; the reply so far is stored, incomplete) or `continue` (it finishes; "
            "`resume` follows it)."
        ),
    ] = "cancel",
) -> Response:
    """The AI SDK's chat request: the last user message (its `file` parts stored as its
    attachments) or the tool results added with `addToolResult` are applied and the model
    runs; `regenerate-message` rewinds the last reply first. The reply streams in the UI
    message stream protocol."""
    conversations = caller.conversations()
    view = await conversations.get(body.id)
    stored = list(await conversations.messages(body.id))
    pending = view.record.pending_tool_call_ids
    wanted = await _with_files(ask(body, stored, pending, caller.services.settings), caller)
    # A plain send runs on whatever the conversation holds by then; a rewind and its run on
    # the conversation as it was read, in the start's transaction (a refused start drops none).
    delta, version = wanted.delta, None
    if wanted.keep is not None:
        delta, version = replace(delta, keep=wanted.keep), view.record.version
    run = await caller.runs().start(body.id, delta, version, on_disconnect)
    services = caller.services
    respond = chat_streamer(caller, body.id)
    events = follow_live(services, run, 0)
    return respond(run.run_id, events, lambda: services.manager.detached(run))


async def _with_files(wanted: ChatAsk, caller: Caller) -> ChatAsk:
    """The ask with its user message's file parts stored (or resolved) as attachments."""
    if not wanted.files:
        return wanted
    files = await attach.url_attachments(wanted.files, caller.services.files, caller.owner)
    (message,) = wanted.delta.messages
    assert isinstance(message, TextMessage)
    with_files = replace(message, attachments=tuple(files))
    return replace(wanted, delta=replace(wanted.delta, messages=[with_files]))


@router.get(
    "/chat/{conversation_id}/stream",
    responses={**AI_SDK_RESPONSES, 204: {"description": "Nothing runs: nothing to resume."}},
    response_class=EventStream,
)
async def resume_chat(
    conversation_id: Annotated[str, Path(description="The conversation id.")],
    caller: CallerDep,
) -> Response:
    """The AI SDK's resume: the running run's stream from its start (the transport replays
    it), or 204 when nothing runs. Never starts a run."""
    view = await caller.conversations().get(conversation_id)
    if view.run_id is None:
        return Response(status_code=204)
    reader = caller.reader()
    resume = await reader.resume(conversation_id, f"{view.run_id}:0")
    if resume is None:
        return Response(status_code=204)
    respond = chat_streamer(caller, conversation_id)
    return respond(resume.run.id, reader.follow(resume), None)
