"""Webhooks: the events a run's ending (or a conversation's new title) sends to the endpoints
its owner registered, from an outbox in SQL, signed per the Standard Webhooks specification.

May import storage, the domain, settings and observability; the runs layer (which writes the
outbox rows in a run's ending transaction) and the api (the ``/webhooks`` routes) import it.
"""

from app.webhooks.events import (
    EVENT_TYPES,
    RunEnded,
    WebhookEventType,
    enqueue,
    enqueue_run_endings,
    run_ending,
)

__all__ = [
    "EVENT_TYPES",
    "RunEnded",
    "WebhookEventType",
    "enqueue",
    "enqueue_run_endings",
    "run_ending",
]
