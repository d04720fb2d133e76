"""Translations between API schemas and the use cases' plain values, with the size limits.

May import the domain, schemas, settings and the runs layer's value types.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.api.schemas import (
    ConfigPatch,
    ConversationListItem,
    ConversationOut,
    DeltaBundle,
    RunOut,
    SystemMessageIn,
    TextMessageIn,
    ToolMessageIn,
    UsageOut,
)
from app.conversations.service import ConversationView
from app.domain import AgentMessage, Message, Role, TextMessage, ToolResult
from app.runs.delta import Delta
from app.runs.errors import InvalidInput
from app.settings import Settings
from app.storage import RunRecord


def config_patch(patch: ConfigPatch | None) -> dict[str, Any]:
    """The keys the client sent, ``null`` included (it resets a key)."""
    if patch is None:
        return {}
    return patch.model_dump(mode="json", exclude_unset=True)


def check_unicode(value: Any, loc: tuple[str | int, ...]) -> None:
    """Refuse strings that are not valid Unicode (lone surrogates such as ``"\\ud800"``)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidInput(loc, "the text holds a lone surrogate: not valid Unicode") from None
    elif isinstance(value, dict):
        for key, item in value.items():
            check_unicode(key, (*loc, key))
            check_unicode(item, (*loc, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            check_unicode(item, (*loc, i))


def check_text(text: str, loc: tuple[str | int, ...], settings: Settings) -> str:
    if len(text) > settings.max_text_chars:
        raise InvalidInput(
            loc, f"text is {len(text)} characters; at most {settings.max_text_chars} allowed"
        )
    return text


def _check_count(items: Sequence[object], settings: Settings) -> None:
    if len(items) > settings.max_bundle_messages:
        raise InvalidInput(
            ("body", "messages"),
            f"{len(items)} messages; at most {settings.max_bundle_messages} per bundle",
        )


def initial_messages(items: Sequence[TextMessageIn], settings: Settings) -> list[Message]:
    """A new conversation's first messages, given as a delta's: the same limits and conversion."""
    _check_count(items, settings)
    return [_message(item, i, settings) for i, item in enumerate(items)]


def delta(bundle: DeltaBundle, settings: Settings) -> Delta:
    """The domain delta of a bundle; a bad item is named by its index and field. (Its text is
    valid Unicode: every JSON body's is, app/api/middleware/strict_json.py.)"""
    _check_count(bundle.messages, settings)
    messages: list[Message] = []
    results: list[ToolResult] = []
    seen: set[str] = set()
    for i, item in enumerate(bundle.messages):
        if isinstance(item, ToolMessageIn):
            if item.tool_call_id in seen:
                raise InvalidInput(
                    ("body", "messages", i, "tool_call_id"),
                    f"tool call {item.tool_call_id!r} has two results in this bundle",
                )
            seen.add(item.tool_call_id)
            results.append(ToolResult(item.tool_call_id, item.result, item.error))
        else:
            messages.append(_message(item, i, settings))
    return Delta(messages, results, config_patch(bundle.config))


def _message(item: TextMessageIn, i: int, settings: Settings) -> Message:
    text = check_text(item.text, ("body", "messages", i, "text"), settings).strip()
    if isinstance(item, SystemMessageIn):
        return AgentMessage(text)
    return TextMessage(text, Role(item.role))


def conversation_out(view: ConversationView) -> ConversationOut:
    r = view.record
    return ConversationOut(
        id=r.id,
        created_at=r.created_at,
        updated_at=r.updated_at,
        status=view.status,
        config=r.config,
        metadata=r.metadata,
        message_count=r.message_count,
        version=r.version,
        run_id=view.run_id,
        pending_tool_call_ids=list(r.pending_tool_call_ids),
        title=r.title,
        archived=r.archived,
    )


def conversation_item(view: ConversationView) -> ConversationListItem:
    """A conversation as a listing shows it (with its snippet in a search)."""
    return ConversationListItem(**dict(conversation_out(view)), snippet=view.snippet)


def etag(version: int) -> dict[str, str]:
    return {"ETag": f'"{version}"'}


def run_out(run: RunRecord) -> RunOut:
    return RunOut(
        id=run.id,
        conversation_id=run.conversation_id,
        status=run.status,
        on_disconnect=run.on_disconnect,
        cancel_requested=run.cancel_requested,
        error_code=run.error_code,
        usage=UsageOut(**run.usage) if run.usage is not None else None,
        created_at=run.created_at,
        finished_at=run.finished_at,
    )
