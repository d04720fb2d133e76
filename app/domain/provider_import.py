"""Provider-format import: an OpenAI chat or Anthropic messages request made into messages.

Imports only the standard library and the domain. The inverse of ``app.domain.formats``: what
``to_openai_format`` / ``to_anthropic_format`` write, these read back to messages that write the
same document again. A call with no result after it is read as pending — unless the
conversation went on past it (a message follows), which makes it interrupted
(``repair.interrupt_passed_calls``). A bad item raises ProviderFormatError naming it by index
and field (``loc``). JSON texts inside the document (OpenAI's ``arguments``, a result's
content) are held to what the API stores: no NUL, no lone surrogate, no non-finite number (as
``app/api/middleware/strict_json.py`` refuses them in a body), and no nesting deeper than
``MAX_JSON_DEPTH`` (``unstorable_json``). Given an ``InlineFiles``, a user's images and PDFs
(Anthropic ``image``/``document`` blocks with a base64 source; OpenAI ``image_url`` and ``file``
parts with a ``data:`` URL) become attachments of the message, their bytes kept there to be
stored; without one they are refused.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from app.domain.attachments import Attachment
from app.domain.errors import ProviderFormatError
from app.domain.formats import ANTHROPIC, THINKING_BLOCKS
from app.domain.inline_files import InlineFiles
from app.domain.messages import (
    AgentMessage,
    Message,
    ReasoningMessage,
    Role,
    TextMessage,
    ToolCallMessage,
)
from app.domain.repair import interrupt_passed_calls
from app.domain.unicode import MAX_JSON_DEPTH, unstorable_json

Loc = tuple[str | int, ...]
_ERROR_PREFIX = "Error: "


def _fail(loc: Loc, problem: str) -> ProviderFormatError:
    return ProviderFormatError(loc, problem)


def _field(item: Mapping[str, Any], name: str, loc: Loc, kinds: tuple[type, ...]) -> Any:
    value = item.get(name)
    if not isinstance(value, kinds) or isinstance(value, bool):
        expected = " or ".join("null" if k is type(None) else _KIND[k] for k in kinds)
        raise _fail((*loc, name), f"must be {expected}")
    return value


_KIND: dict[type, str] = {str: "a string", list: "an array", dict: "an object"}


def _items(value: Any, loc: Loc) -> list[Mapping[str, Any]]:
    if not isinstance(value, list):
        raise _fail(loc, "must be an array")
    for i, item in enumerate(value):
        if not isinstance(item, Mapping):
            raise _fail((*loc, i), "must be an object")
    return value


def _outcome(call: ToolCallMessage, content: str, is_error: bool | None) -> ToolCallMessage:
    """The call completed with what a tool message or tool_result block says.

    ``is_error`` is the block's flag (Anthropic); None (OpenAI, which has no flag) reads a
    content of the form "Error: …", as ``ToolCallMessage.result_text`` writes it, as an error.
    """
    if is_error is None:
        is_error = content.startswith(_ERROR_PREFIX)
    if is_error:
        return call.completed(error=content.removeprefix(_ERROR_PREFIX))
    try:
        value = json.loads(content)
    except (ValueError, RecursionError):
        return call.completed(result=content)
    if unstorable_json(value) is not None:  # the text itself can be stored, its value not
        return call.completed(result=content)
    # Keep the text itself unless writing the value back gives the very same text.
    same = not isinstance(value, str) and json.dumps(value, ensure_ascii=False) == content
    return call.completed(result=value if same else content)


class _Calls:
    """The tool calls read so far, by id, so that a result finds its call; and the longest
    text a message may have (``max_text``), checked where the text is read, so that a text too
    long is named by its place in the request."""

    def __init__(
        self, out: list[Message], max_text: int | None = None, files: InlineFiles | None = None
    ) -> None:
        self.out = out
        self.files = files
        self.where: dict[str, int] = {}
        self.turn_open = False
        self.max_text = max_text

    def text(self, value: str, loc: Loc) -> str:
        if self.max_text is not None and len(value) > self.max_text:
            raise _fail(loc, f"{len(value)} characters of text; at most {self.max_text}")
        return value

    def add(self, call: ToolCallMessage, loc: Loc) -> None:
        """Append a call; ``turn_open`` says it belongs to the reply of the call before it."""
        if call.tool_call_id in self.where:
            raise _fail((*loc, "id"), f"tool call id {call.tool_call_id!r} is used twice")
        after_call = bool(self.out) and isinstance(self.out[-1], ToolCallMessage)
        if after_call and not self.turn_open and not call.message:
            # A new reply after the last one's results: an empty text keeps the two apart
            # (adjacent calls without text are one reply, see docs/format.md).
            self.out.append(TextMessage("", Role.ASSISTANT))
        self.where[call.tool_call_id] = len(self.out)
        self.out.append(call)
        self.turn_open = True

    def close_turn(self) -> None:
        self.turn_open = False

    def answer(self, call_id: str, content: str, is_error: bool | None, loc: Loc) -> None:
        index = self.where.get(call_id)
        call = self.out[index] if index is not None else None
        if not isinstance(call, ToolCallMessage):
            raise _fail(loc, f"no tool call with id {call_id!r} comes before this result")
        if not call.pending:
            raise _fail(loc, f"tool call {call_id!r} already has its result")
        assert index is not None
        self.out[index] = _outcome(call, content, is_error)


# --- OpenAI chat completions -------------------------------------------------------------------


def from_openai_format(
    messages: Any, max_text_chars: int | None = None, files: InlineFiles | None = None
) -> list[Message]:
    """Messages from a chat-completions ``messages`` array (``system``/``developer``, ``user``,
    ``assistant`` with ``tool_calls``, ``tool``); a text longer than ``max_text_chars`` is a bad
    item. A user's inline images and PDFs go into ``files`` (refused without it)."""
    out: list[Message] = []
    calls = _Calls(out, max_text_chars, files)
    for i, item in enumerate(_items(messages, ("messages",))):
        loc: Loc = ("messages", i)
        role = item.get("role")
        calls.close_turn()
        text_at = (*loc, "content")
        if role in ("system", "developer"):
            out.append(AgentMessage(calls.text(_openai_text(item, loc), text_at)))
        elif role == "user":
            text, attached = _openai_user(item, loc, calls.files)
            out.append(TextMessage(calls.text(text, text_at), Role.USER, attachments=attached))
        elif role == "assistant" and item.get("tool_calls"):
            _openai_calls(item, loc, calls)
        elif role == "assistant":
            text = calls.text(_openai_text(item, loc), text_at)
            out.append(TextMessage(text, Role.ASSISTANT))
        elif role == "tool":
            call_id = _field(item, "tool_call_id", loc, (str,))
            calls.answer(call_id, _openai_text(item, loc), None, (*loc, "tool_call_id"))
        else:
            raise _fail((*loc, "role"), f"unknown role {role!r}")
    return interrupt_passed_calls(out)


def _openai_text(item: Mapping[str, Any], loc: Loc) -> str:
    """``content`` as text: a string, null, or an array of text parts."""
    content = item.get("content")
    if content is None or isinstance(content, str):
        return content or ""
    parts = _items(content, (*loc, "content"))
    texts = []
    for j, part in enumerate(parts):
        if part.get("type") != "text":
            raise _fail((*loc, "content", j, "type"), "only text parts can be imported")
        texts.append(_field(part, "text", (*loc, "content", j), (str,)))
    return "".join(texts)


def _openai_user(
    item: Mapping[str, Any], loc: Loc, files: InlineFiles | None
) -> tuple[str, tuple[Attachment, ...]]:
    """A user's ``content``: its text, and its ``image_url``/``file`` parts as attachments."""
    content = item.get("content")
    if files is None or not isinstance(content, list):
        return _openai_text(item, loc), ()
    texts: list[str] = []
    attached: list[Attachment] = []
    for j, part in enumerate(_items(content, (*loc, "content"))):
        here = (*loc, "content", j)
        kind = part.get("type")
        if kind == "text":
            texts.append(_field(part, "text", here, (str,)))
        elif kind == "image_url":
            url = _field(part, "image_url", here, (dict,)).get("url")
            name = f"image-{len(attached) + 1}"
            attached.append(files.data_url(url, name, (*here, "image_url", "url")))
        elif kind == "file":
            file = _field(part, "file", here, (dict,))
            name = file.get("filename") if isinstance(file.get("filename"), str) else "file"
            attached.append(files.data_url(file.get("file_data"), name, (*here, "file")))
        else:
            raise _fail((*here, "type"), "a user part must be text, image_url or file")
    return "".join(texts), tuple(attached)


def _openai_calls(item: Mapping[str, Any], loc: Loc, calls: _Calls) -> None:
    text = calls.text(_openai_text(item, loc), (*loc, "content"))
    for j, entry in enumerate(_items(item["tool_calls"], (*loc, "tool_calls"))):
        here = (*loc, "tool_calls", j)
        function = _field(entry, "function", here, (dict,))
        name = _field(function, "name", (*here, "function"), (str,))
        raw = function.get("arguments") or "{}"
        arguments = _json_object(raw, (*here, "function", "arguments"))
        call_id = _field(entry, "id", here, (str,))
        call = _tool_call(
            name, call_id, arguments, here, text if j == 0 else "", name_at="function"
        )
        calls.add(call, here)


def _json_object(raw: Any, loc: Loc) -> dict[str, Any]:
    """The object a JSON text holds, refused (naming ``loc``) when the API could not store it."""
    try:
        value = json.loads(raw) if isinstance(raw, str) else None
    except RecursionError:
        raise _fail(loc, f"the JSON text nests deeper than {MAX_JSON_DEPTH} levels") from None
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise _fail(loc, "must be a JSON object in a string")
    if (why := unstorable_json(value)) is not None:
        raise _fail(loc, f"the JSON text {why}")
    return value


def _tool_call(
    name: str,
    call_id: str,
    arguments: dict[str, Any],
    loc: Loc,
    text: str,
    name_at: str | None = None,
) -> ToolCallMessage:
    """A call read as pending: its result, if any, comes later. ``name_at``: the object within
    ``loc`` that holds the name (OpenAI's ``function``), if not ``loc`` itself."""
    if not name.strip():
        raise _fail((*loc, *([name_at] if name_at else []), "name"), "must not be empty")
    if not call_id.strip():
        raise _fail((*loc, "id"), "must not be empty")
    return ToolCallMessage(name, call_id, arguments, message=text, pending=True)


# --- Anthropic messages ------------------------------------------------------------------------


def from_anthropic_format(
    system: Any, messages: Any, max_text_chars: int | None = None, files: InlineFiles | None = None
) -> list[Message]:
    """Messages from a messages-API ``system`` (a string or text blocks) and ``messages``
    (``text``, ``tool_use`` and ``tool_result`` blocks); the system prompt comes first. A text
    longer than ``max_text_chars`` is a bad item. A user's ``image`` and ``document`` blocks
    (base64) go into ``files``, attached to the text that follows them (refused without it)."""
    out: list[Message] = []
    calls = _Calls(out, max_text_chars, files)
    prompt = calls.text(_anthropic_system(system), ("system",))
    if prompt.strip():
        out.append(AgentMessage(prompt))
    for i, turn in enumerate(_items(messages, ("messages",))):
        loc: Loc = ("messages", i)
        role = turn.get("role")
        if role not in ("user", "assistant"):
            raise _fail((*loc, "role"), f"must be 'user' or 'assistant', not {role!r}")
        content = turn.get("content")
        if isinstance(content, str):
            out.append(TextMessage(calls.text(content, (*loc, "content")), Role(role)))
            continue
        blocks = _items(content, (*loc, "content"))
        calls.close_turn()
        if role == "user":
            _user_blocks(blocks, (*loc, "content"), calls)
        else:
            _assistant_blocks(blocks, (*loc, "content"), calls)
    return interrupt_passed_calls(out)


def _anthropic_system(system: Any) -> str:
    if system is None or isinstance(system, str):
        return system or ""
    blocks = _items(system, ("system",))
    return "\n\n".join(_field(b, "text", ("system", j), (str,)) for j, b in enumerate(blocks))


def _user_blocks(blocks: Sequence[Mapping[str, Any]], loc: Loc, calls: _Calls) -> None:
    attached: list[Attachment] = []  # files wait for the text they go with
    for j, block in enumerate(blocks):
        kind = block.get("type")
        if kind in ("image", "document") and calls.files is not None:
            attached.append(_anthropic_file(block, (*loc, j), calls.files, len(attached)))
            continue
        if kind != "text" and attached:
            calls.out.append(TextMessage("", Role.USER, attachments=tuple(attached)))
            attached = []
        if kind == "text":
            text = calls.text(_field(block, "text", (*loc, j), (str,)), (*loc, j, "text"))
            calls.out.append(TextMessage(text, Role.USER, attachments=tuple(attached)))
            attached = []
        elif kind == "tool_result":
            call_id = _field(block, "tool_use_id", (*loc, j), (str,))
            content = _result_text(block.get("content"), (*loc, j, "content"))
            is_error = block.get("is_error") is True
            calls.answer(call_id, content, is_error, (*loc, j, "tool_use_id"))
        else:
            raise _fail(
                (*loc, j, "type"), f"a user block must be text or tool_result, not {kind!r}"
            )
    if attached:
        calls.out.append(TextMessage("", Role.USER, attachments=tuple(attached)))


def _anthropic_file(block: Mapping[str, Any], loc: Loc, files: InlineFiles, n: int) -> Attachment:
    source = _field(block, "source", loc, (dict,))
    if source.get("type") != "base64":
        raise _fail((*loc, "source", "type"), "only base64 sources can be imported")
    title = block.get("title")
    name = title if isinstance(title, str) and title else f"{block['type']}-{n + 1}"
    return files.base64(source.get("data"), source.get("media_type"), name, (*loc, "source"))


def _result_text(content: Any, loc: Loc) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    blocks = _items(content, loc)
    texts = []
    for j, block in enumerate(blocks):
        if block.get("type") != "text":
            raise _fail((*loc, j, "type"), "only text blocks can be imported")
        texts.append(_field(block, "text", (*loc, j), (str,)))
    return "".join(texts)


def _assistant_blocks(blocks: Sequence[Mapping[str, Any]], loc: Loc, calls: _Calls) -> None:
    """Thinking, text and tool_use blocks: a text just before a call is that call's reply text;
    thinking is kept as Anthropic's reasoning, exactly as it is."""
    text: str | None = None
    for j, block in enumerate(blocks):
        kind = block.get("type")
        if kind in THINKING_BLOCKS:
            if text is not None:
                calls.out.append(TextMessage(text, Role.ASSISTANT))
                text = None
            calls.out.append(_reasoning(block, (*loc, j), calls))
        elif kind == "text":
            if text is not None:
                calls.out.append(TextMessage(text, Role.ASSISTANT))
            text = calls.text(_field(block, "text", (*loc, j), (str,)), (*loc, j, "text"))
        elif kind == "tool_use":
            here = (*loc, j)
            arguments = block.get("input", {})
            if not isinstance(arguments, dict):
                raise _fail((*here, "input"), "must be an object")
            name = _field(block, "name", here, (str,))
            call_id = _field(block, "id", here, (str,))
            calls.add(_tool_call(name, call_id, arguments, here, text or ""), here)
            text = None
        else:
            raise _fail(
                (*loc, j, "type"),
                "an assistant block must be text, tool_use, thinking or redacted_thinking, "
                f"not {kind!r}",
            )
    if text is not None:
        calls.out.append(TextMessage(text, Role.ASSISTANT))


def _reasoning(block: Mapping[str, Any], loc: Loc, calls: _Calls) -> ReasoningMessage:
    """A ``thinking`` (text and signature) or ``redacted_thinking`` (data) block as reasoning;
    the payload is the block as it is, less the thinking text the message holds."""
    if block.get("type") == "thinking":
        text = calls.text(_field(block, "thinking", loc, (str,)), (*loc, "thinking"))
        _field(block, "signature", loc, (str,))
    else:
        text = ""
        _field(block, "data", loc, (str,))
    if (why := unstorable_json(dict(block))) is not None:
        raise _fail(loc, f"the block {why}")
    payload = {k: v for k, v in block.items() if k != "thinking"}
    return ReasoningMessage(text, ANTHROPIC, payload)
