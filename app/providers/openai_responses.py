"""The ``openai`` adapter over the Responses API (``POST /responses``), used statelessly.

May import the domain, the provider helpers and the ``openai`` SDK. Three translations: our
messages to a Responses request (``responses_input``, ``_request``), the event stream to our
StreamChunks (``openai_responses_stream.ResponseReader``, over the shared SSE parser), the SDK's
exceptions to ProviderError (``errors.openai_error``). Nothing is stored at OpenAI
(``store: false``): Parley is the record, and each reasoning item comes back with its encrypted
content (``include: ["reasoning.encrypted_content"]``), to be handed back exactly as received,
in its place, on the next request.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from app.domain import (
    AgentMessage,
    Message,
    ReasoningMessage,
    RequestOptions,
    Role,
    TextMessage,
    ToolCallMessage,
    ToolSpec,
)
from app.domain.attachment_blocks import Files, notes, responses_parts
from app.domain.formats import tool_call_turns
from app.providers.openai_chat import OpenAIClientAdapter
from app.providers.openai_responses_stream import ResponseReader

ENCRYPTED_REASONING = "reasoning.encrypted_content"

# OpenAI models that do not reason: they refuse `include: reasoning.encrypted_content` ("Encrypted
# content is not supported with this model.") and `reasoning`. Any other name may reason.
_NOT_REASONING = re.compile(r"^(ft:)?(gpt-4|gpt-3\.5|chatgpt-|gpt-5(\.\d+)?-chat)")
# OpenAI models that reason: they refuse `temperature` unless reasoning is off (`effort: none`).
_REASONING = re.compile(r"^(ft:)?(o1|o3|o4|gpt-5|codex-)")


def reasons(model: str) -> bool:
    """Whether ``model`` may be a reasoning model (every name but OpenAI's known chat models)."""
    return not _NOT_REASONING.match(model.strip().lower())


def is_reasoning_model(model: str) -> bool:
    """Whether ``model`` is known to be an OpenAI reasoning model (o-series, gpt-5 family)."""
    return reasons(model) and bool(_REASONING.match(model.strip().lower()))


class OpenAIResponsesAdapter(OpenAIClientAdapter):
    """A ModelAdapter over OpenAI's Responses API (``PARLEY_OPENAI_API=responses``).

    Stateless: ``store: false``; the reasoning items it receives (``ReasoningMessage`` payloads)
    go back as they came, just before the message or function call that followed them.
    """

    _endpoint = "/responses"

    def _request(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        options: RequestOptions,
        files: Files | None = None,
    ) -> dict[str, Any]:
        """The request's JSON body; raises before any request."""
        if self._ends_with_assistant(messages) and self.config.trailing_assistant == "reject":
            raise self._refuse_trailing_assistant("the Responses API")
        model = options.model or self.default_model
        instructions, items = responses_input(messages, files)
        request: dict[str, Any] = {
            "model": model,
            "input": items,
            "stream": True,
            "store": False,
        }
        if instructions is not None:
            request["instructions"] = instructions
        if reasons(model):
            request["include"] = [ENCRYPTED_REASONING]
            request |= reasoning_options(options)
        if tools:
            request["tools"] = [responses_tool(t) for t in tools]
        if options.image_generation is not None:
            request.setdefault("tools", []).append({"type": "image_generation"})
            if options.image_generation == "required":
                request["tool_choice"] = {"type": "image_generation"}
        if options.temperature is not None and takes_temperature(model, options):
            request["temperature"] = options.temperature
        if options.max_output_tokens is not None:
            request["max_output_tokens"] = options.max_output_tokens
        return request | self._cache_options(options)

    def _translator(self) -> ResponseReader:
        return ResponseReader()


def reasoning_options(options: RequestOptions) -> dict[str, Any]:
    """``{"reasoning": {effort, summary}}`` from the conversation's ``reasoning``, or nothing.

    ``effort`` goes as it is; ``summary: auto`` asks for a summary (``none``: none is asked);
    ``budget_tokens`` has no Responses equivalent and is not sent.
    """
    wanted = options.reasoning
    if wanted is None:
        return {}
    reasoning: dict[str, Any] = {}
    if wanted.effort is not None:
        reasoning["effort"] = wanted.effort
    if wanted.summary == "auto" and not wanted.off:
        reasoning["summary"] = "auto"
    return {"reasoning": reasoning} if reasoning else {}


def takes_temperature(model: str, options: RequestOptions) -> bool:
    """Whether ``temperature`` may be sent: always to a model that does not reason; else not
    when reasoning is asked for, nor to a known reasoning model unless its reasoning is off
    (they refuse it with a 400)."""
    reasoning = options.reasoning
    if not reasons(model):
        return True
    if reasoning is not None and reasoning.on:
        return False
    return not is_reasoning_model(model) or (reasoning is not None and reasoning.off)


def responses_tool(tool: ToolSpec) -> dict[str, Any]:
    """A tool as the Responses API declares a function tool."""
    return {
        "type": "function",
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.parameters,
    }


def is_reasoning_item(payload: dict[str, Any] | None) -> bool:
    """Whether a ReasoningMessage's payload is a Responses reasoning item (and not, say, the
    marker of a chat-completions server's ``reasoning_content``)."""
    return payload is not None and payload.get("type") == "reasoning"


def responses_input(
    messages: Sequence[Message], files: Files | None = None
) -> tuple[str | None, list[dict[str, Any]]]:
    """``(instructions, input items)`` for ``messages``.

    The system prompts before the first other message are the ``instructions`` (joined by a
    blank line); a later one is a ``system`` message where it stands. User text is a user
    message, assistant text an assistant message of ``output_text``; the calls of one reply are
    ``function_call`` items (its text, if any, an assistant message before them) followed by
    their ``function_call_output`` items. A reasoning item goes back exactly as received, where
    it stands. Pending calls and reasoning that is not a Responses item are left out.
    """
    instructions: list[str] = []
    items: list[dict[str, Any]] = []
    for item in tool_call_turns(messages, include_pending=False):
        if isinstance(item, list):
            items.extend(_call_turn(item, files or {}))
        elif isinstance(item, ReasoningMessage):
            if is_reasoning_item(item.payload):
                items.append(item.payload)  # type: ignore[arg-type]  # checked above
        elif isinstance(item, AgentMessage) or (
            isinstance(item, TextMessage) and item.role is Role.SYSTEM
        ):
            if items:
                items.append({"type": "message", "role": "system", "content": item.text})
            else:
                instructions.append(item.text)
        elif isinstance(item, TextMessage):
            items.append(_message_item(item, files or {}))
    return ("\n\n".join(instructions) if instructions else None), items


def _message_item(message: TextMessage, files: Files) -> dict[str, Any]:
    """A text message; a user's attachments as ``input_image``/``input_file`` parts after its
    text, an assistant's (images it made) as notes."""
    if not message.attachments:
        return _text_item(message.role, message.text)
    if message.role is not Role.USER:
        return _text_item(message.role, f"{message.text}\n{notes(message.attachments)}".strip())
    text = [{"type": "input_text", "text": message.text}] if message.text else []
    content = text + responses_parts(message.attachments, files)
    return {"type": "message", "role": "user", "content": content}


def _text_item(role: Role, text: str) -> dict[str, Any]:
    if role is Role.ASSISTANT:
        content = [{"type": "output_text", "text": text}]
        return {"type": "message", "role": "assistant", "content": content}
    return {"type": "message", "role": role.value, "content": text}


def _call_turn(calls: list[ToolCallMessage], files: Files) -> list[dict[str, Any]]:
    """One reply's calls: its text, the ``function_call`` items, then their outputs."""
    items: list[dict[str, Any]] = []
    if calls[0].message:
        items.append(_text_item(Role.ASSISTANT, calls[0].message))
    items.extend(
        {
            "type": "function_call",
            "call_id": call.tool_call_id,
            "name": call.tool_name,
            "arguments": json.dumps(call.arguments, ensure_ascii=False),
        }
        for call in calls
    )
    items.extend(
        {
            "type": "function_call_output",
            "call_id": call.tool_call_id,
            "output": _output(call, files),
        }
        for call in calls
    )
    return items


def _output(call: ToolCallMessage, files: Files) -> str | list[dict[str, Any]]:
    """A call's output: its result text, with its attachments as input parts when it has some."""
    if not call.attachments:
        return call.result_text()
    text = [{"type": "input_text", "text": call.result_text()}]
    return text + responses_parts(call.attachments, files)
