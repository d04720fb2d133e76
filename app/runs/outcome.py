"""How a run ended: its status from how it stopped or failed, and which failures are expected.

May import the domain, storage's errors, the spend room's and the writer's commits. Used by the
runner (app/runs/runner.py) while a run's model stream goes (``Progress``) and when it is over,
stopped or failed.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime

from app.domain import (
    ContextWindowError,
    ConversationConfigurationError,
    LLMConversation,
    MessageStop,
    ProviderError,
    Role,
    TextMessage,
    ToolRoundLimitError,
    Usage,
)
from app.runs.events import FinalStatus
from app.runs.writer import Commit, Ending
from app.spend import BudgetExceeded, Charge, Payer
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


@dataclass
class Progress:
    """What the run's task knows while it drives the stream."""

    payer: Payer
    provider: str
    model: str
    usage: dict[str, int] = field(default_factory=lambda: dict.fromkeys(Usage.KINDS, 0))
    reply_complete: bool = False
    model_finished: bool = False
    """The model sent the stop of its final reply: its text is whole."""
    inflight: Commit | None = None
    untitled: bool = False
    """The conversation had no title when the run's ending was stored."""
    charges: list[Charge] = field(default_factory=list)
    """Each model call's usage, for the ledger (app/spend), written with the ending."""
    round_over: bool = False
    """A model call asked for tools: the budget is checked once they are stored."""

    def model_stopped(self, stop: MessageStop, at: datetime) -> None:
        """A model call ended: its usage counted, and charged (``at``) with the ending."""
        self.model_finished = stop.stop_reason != "tool_use"
        for kind, count in stop.usage.as_dict().items():
            self.usage[kind] += count or 0
        call = len(self.charges) + 1
        self.charges.append(Charge(call, self.provider, self.model, stop.usage, at))
        self.round_over = stop.stop_reason == "tool_use"


def ending_of(progress: Progress, status: FinalStatus, code: str | None) -> Ending:
    """The run's ending: its status, usage, and its model calls for the ledger."""
    return Ending(status, code, dict(progress.usage), progress.payer, tuple(progress.charges))
