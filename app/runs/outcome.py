"""How a run ended: its status from how it stopped or failed, and which failures are expected.

May import the domain, storage's errors and the spend room's. Used by the runner
(app/runs/runner.py) when a run's model stream is over, stopped or failed.
"""

from __future__ import annotations

import dataclasses

from app.domain import (
    ContextWindowError,
    ConversationConfigurationError,
    LLMConversation,
    ProviderError,
    Role,
    TextMessage,
    ToolRoundLimitError,
)
from app.runs.events import FinalStatus
from app.spend import BudgetExceeded
from app.storage import ConversationNotFound, LeaseLost

STOPPED_STATUS: dict[str, FinalStatus] = {
    "cancel": "aborted",
    "disconnect": "aborted",
    "lease_lost": "aborted",
}
"""A stopped run's status by why it stopped (a shutdown interrupts it)."""


def complete_last_reply(conversation: LLMConversation) -> bool:
    """A run stopped between the model's final stop and storing its reply keeps the text as
    incomplete; it is whole: mark it so. False when there is no such reply."""
    messages = conversation.messages
    last = messages[-1] if len(messages) else None
    if not (isinstance(last, TextMessage) and last.role is Role.ASSISTANT and last.incomplete):
        return False
    messages.replace(len(messages) - 1, dataclasses.replace(last, incomplete=False))
    return True


def lost(exc: Exception) -> bool:
    """The run no longer holds its conversation: another process took it, or ended the run
    (its process stood still past the lease) and the conversation was deleted since."""
    return isinstance(exc, LeaseLost | ConversationNotFound)


def natural_status(conversation: LLMConversation) -> FinalStatus:
    return "requires_action" if conversation.messages.pending_tool_calls() else "completed"


def expected(exc: Exception) -> bool:
    """Failures that are the provider's or the conversation's, not a bug of ours."""
    expected = ProviderError, ToolRoundLimitError, ContextWindowError, BudgetExceeded
    return isinstance(exc, (*expected, ConversationConfigurationError))
