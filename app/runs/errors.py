"""Errors of the use cases, free of HTTP; ``app.api.problems`` maps each to a status.

RunsError
 ├── InvalidInput        a value the server cannot accept (``loc`` names it)  → 422
 ├── PendingToolCalls    client tool calls wait for results (``ids``)         → 409
 ├── NoActiveRun         cancel, but nothing runs                              → 409
 ├── NothingToAnswer     a run with no message to answer                       → 409
 ├── BadEventId          a Last-Event-ID that is not one of ours               → 400
 ├── EventsExpired       the run's events were pruned                          → 410
 ├── ShuttingDown        the process takes no new runs                         → 503
 ├── IdempotencyKeyReused  an Idempotency-Key first used for another request  → 422
 └── IdempotencyKeyInUse   its first request is still being served            → 409
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class RunsError(Exception):
    """Base of the use cases' own errors."""


class InvalidInput(RunsError):
    """A value the server cannot accept; ``loc`` locates it in the request."""

    def __init__(self, loc: Sequence[str | int], detail: str, **extra: Any) -> None:
        super().__init__(detail)
        self.loc = list(loc)
        self.detail = detail
        self.extra = extra


class PendingToolCalls(RunsError):
    """The conversation waits for client tool results before it can run."""

    def __init__(self, ids: Sequence[str]) -> None:
        super().__init__(
            "the conversation waits for the results of client tool calls "
            f"{', '.join(ids)}: post them as role 'tool' messages, then stream again"
        )
        self.ids = list(ids)


class NoActiveRun(RunsError):
    """There is no run to cancel."""

    def __init__(self, conversation_id: str) -> None:
        super().__init__(f"conversation {conversation_id} has no run in progress")


class NothingToAnswer(RunsError):
    """The conversation holds no message but system prompts: there is nothing to answer."""

    def __init__(self, conversation_id: str) -> None:
        super().__init__(
            f"conversation {conversation_id} has no message to answer yet: post a user message "
            "(a delta, or POST …/stream with one)"
        )


class BadEventId(RunsError):
    """A ``Last-Event-ID`` that this service did not send."""

    def __init__(self, value: str) -> None:
        super().__init__(
            f"Last-Event-ID {value[:80]!r} is not an event id of this service "
            "(they look like '<run id>:<number>')"
        )


class EventsExpired(RunsError):
    """The run finished long ago and its events were pruned; its messages remain."""

    def __init__(self, run_id: str) -> None:
        super().__init__(
            f"the events of run {run_id} are no longer kept; its messages are: GET …/messages"
        )
        self.run_id = run_id


class ShuttingDown(RunsError):
    """This process is shutting down and starts no new run."""

    retry_after = 2

    def __init__(self) -> None:
        super().__init__("the server is shutting down; retry in a moment (another replica)")


class IdempotencyKeyReused(RunsError):
    """The key was first used with another request (body, query or If-Match)."""

    def __init__(self, key: str) -> None:
        super().__init__(f"Idempotency-Key {key!r} was used for a different request; use a new key")


class IdempotencyKeyInUse(RunsError):
    """A request with this key is being served right now."""

    def __init__(self, key: str) -> None:
        super().__init__(
            f"a request with Idempotency-Key {key!r} is still being served; retry shortly"
        )
