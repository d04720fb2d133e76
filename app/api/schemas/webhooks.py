"""Webhook endpoints and their deliveries, in and out.

May import pydantic and the webhooks room's event names (declared once, app/webhooks/events.py).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.api.schemas.base import SERVED, Omittable
from app.webhooks import WebhookEventType

WebhookUrl = Annotated[
    str,
    Field(
        min_length=8,
        max_length=2048,
        pattern=r"^https?://[^\s]+$",
        description="Where events are POSTed: http(s). A host that resolves to a loopback, "
        "private, link-local or multicast address is refused (422) unless "
        "`PARLEY_WEBHOOK_ALLOW_PRIVATE` allows it.",
        examples=["https://example.com/parley-hooks"],
    ),
]
Events = Annotated[
    list[WebhookEventType],
    Field(min_length=1, max_length=len(WebhookEventType), description="The events to send."),
]


class WebhookCreate(BaseModel):
    """A webhook endpoint to register."""

    model_config = ConfigDict(extra="forbid")

    url: WebhookUrl
    events: Events


class WebhookUpdate(BaseModel):
    """Changes to an endpoint (a JSON Merge Patch: fields left out stay; none can be null)."""

    model_config = ConfigDict(extra="forbid")

    url: Omittable[WebhookUrl] = None
    events: Omittable[Events] = None
    enabled: Omittable[bool] = Field(None, description="false: no events are sent to it.")


class WebhookOut(BaseModel):
    """A registered endpoint (its secret is shown once, when it is registered)."""

    model_config = SERVED

    id: str
    url: str
    events: list[WebhookEventType]
    enabled: bool
    created_at: datetime
    updated_at: datetime


class WebhookCreated(WebhookOut):
    """A new endpoint, with the secret that signs its deliveries (shown only this once)."""

    secret: str = Field(
        description="`whsec_` and the base64 key: verify each delivery's `webhook-signature` "
        "with a Standard Webhooks library (`Webhook(secret).verify(body, headers)`).",
        examples=["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"],
    )


class WebhookPage(BaseModel):
    """One page of endpoints, newest first."""

    model_config = SERVED

    items: list[WebhookOut]
    next_cursor: str | None = Field(None, description="Pass as ?cursor= for the next page.")


class DeliveryOut(BaseModel):
    """One event for one endpoint, and how its sending went."""

    model_config = SERVED

    id: str
    webhook_id: str = Field(description="The `webhook-id` header every attempt carries.")
    event: WebhookEventType
    conversation_id: str | None
    run_id: str | None
    status: Literal["pending", "delivered", "failed"]
    attempts: int
    last_status_code: int | None = Field(description="The HTTP status of the last attempt.")
    last_error: str | None = Field(description="Why the last attempt failed.")
    next_attempt_at: datetime | None = Field(description="When it is tried next (pending).")
    created_at: datetime
    delivered_at: datetime | None


class DeliveryPage(BaseModel):
    """One page of an endpoint's deliveries, newest first."""

    model_config = SERVED

    items: list[DeliveryOut]
    next_cursor: str | None = Field(None, description="Pass as ?cursor= for the next page.")
