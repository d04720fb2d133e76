"""History repair: any stored history made into one every provider accepts, before a model call.

Imports only the standard library and the domain. ``repair_history`` is pure: it returns new
values and never changes what is stored. The run loop applies it to every request it sends, and
``GET …/context`` shows its result, so what is shown is what is sent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from app.domain.messages import Message, ReasoningMessage, Role, TextMessage, ToolCallMessage

INTERRUPTED = "interrupted: the tool call never got its result"
"""The error a call without its result is sent with."""


@dataclass(frozen=True)
class RepairedMessage:
    """A message to send and the positions, in the history given, of those it was made from."""

    message: Message
    sources: tuple[int, ...]


def repair_history(messages: Sequence[Message], provider: str | None = None) -> list[Message]:
    """The history as every provider accepts it (see ``repair_with_sources`` for the rules)."""
    return [r.message for r in repair_with_sources(messages, provider)]


def repair_with_sources(
    messages: Sequence[Message], provider: str | None = None
) -> list[RepairedMessage]:
    """The repaired history for a request to ``provider``, each message with where it came from.

    - A tool call with no result (pending) is sent with an error saying it was interrupted.
    - A second call with an id already used is a result without its own call: dropped.
    - An incomplete reply with no text is dropped; one with text is sent as a plain reply.
    - Consecutive user texts are merged, as are consecutive assistant texts (and assistant
      text followed by a tool call that starts a reply becomes that call's text), so the
      roles alternate wherever a provider needs them to. System prompts stay where they are.
    - Reasoning goes only to the provider that made it (any provider's when ``provider`` is
      None), complete and with its payload, and only in a turn that goes on after it (a text
      or a tool call of the assistant follows): it is never merged, changed or moved, so it
      stays just before the call it preceded.
    """
    out: list[RepairedMessage] = []
    seen_ids: set[str] = set()
    for i, message in enumerate(messages):
        if isinstance(message, ReasoningMessage):
            if message.replayable and provider in (None, message.provider):
                out.append(RepairedMessage(message, (i,)))
            continue
        if isinstance(message, ToolCallMessage):
            if message.tool_call_id in seen_ids:
                continue
            seen_ids.add(message.tool_call_id)
            if message.pending:
                message = message.completed(error=INTERRUPTED)
        elif isinstance(message, TextMessage) and message.incomplete:
            if not message.text.strip():
                continue
            message = replace(message, incomplete=False)
        _append(out, RepairedMessage(message, (i,)))
    return _without_orphan_reasoning(out)


def interrupt_passed_calls(messages: Sequence[Message]) -> list[Message]:
    """``messages`` with each pending call that the conversation has moved past (a message
    other than a tool call comes after it) completed with the ``INTERRUPTED`` error: nobody
    will post its result, and a conversation left waiting for it could never run again. A
    pending call at the end stays pending."""
    out = list(messages)
    moved_on = False
    for i in range(len(out) - 1, -1, -1):
        message = out[i]
        if not isinstance(message, ToolCallMessage):
            moved_on = True
        elif message.pending and moved_on:
            out[i] = message.completed(error=INTERRUPTED)
    return out


def _without_orphan_reasoning(out: list[RepairedMessage]) -> list[RepairedMessage]:
    """``out`` less each reasoning that no assistant text or tool call follows in its turn (a
    reply cut off after its thinking): no provider takes a turn that ends in reasoning."""
    kept: list[RepairedMessage] = []
    follows = False  # an assistant text or call comes next, past any reasoning
    for item in reversed(out):
        message = item.message
        if isinstance(message, ReasoningMessage):
            if follows:
                kept.append(item)
            continue
        follows = isinstance(message, ToolCallMessage) or (
            isinstance(message, TextMessage) and message.role is Role.ASSISTANT
        )
        kept.append(item)
    kept.reverse()
    return kept


def _append(out: list[RepairedMessage], item: RepairedMessage) -> None:
    """Append ``item``, merged into the previous message when the two are one turn."""
    previous = out[-1] if out else None
    merged = _merged(previous.message, item.message) if previous is not None else None
    if previous is None or merged is None:
        out.append(item)
        return
    out[-1] = RepairedMessage(merged, previous.sources + item.sources)


def _merged(first: Message, second: Message) -> Message | None:
    """One message for two that a provider needs as one turn, or None to keep them apart."""
    if not isinstance(first, TextMessage) or first.role is Role.SYSTEM:
        return None
    if isinstance(second, TextMessage) and second.role is first.role:
        return TextMessage(_join(first.text, second.text), first.role)
    if first.role is Role.ASSISTANT and isinstance(second, ToolCallMessage):
        # After a text, a call always starts a reply; the text becomes that reply's text.
        return replace(second, message=_join(first.text, second.message))
    return None


def _join(first: str, second: str) -> str:
    """The two texts as one, blank ones left out."""
    return "\n\n".join(t for t in (first, second) if t.strip())
