"""Webhook settings: delivery timing and the SSRF guard (a mixin of ``Settings``).

Imports pydantic-settings only.
"""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings


class WebhookSettings(BaseSettings):
    """How webhooks are delivered (docs/webhooks.md)."""

    webhook_allow_private: bool = Field(
        False,
        description="Allow webhook URLs whose host resolves to a loopback, private, link-local, "
        "multicast or reserved address (checked at registration and before each attempt). "
        "Off: such a URL is refused with 422, and such a delivery fails.",
    )
    webhook_timeout_seconds: float = Field(
        10.0, gt=0, le=300, description="Time limit of one delivery attempt (connect to answer)."
    )
    webhook_retry_seconds: float = Field(
        86_400.0,
        gt=0,
        le=2_592_000,
        description="How long a delivery is retried before it is marked `failed` (24 h).",
    )
    webhook_backoff_seconds: float = Field(
        5.0,
        gt=0,
        le=3600,
        description="Wait before the first retry; doubled after each failed attempt (with "
        "jitter), up to `PARLEY_WEBHOOK_BACKOFF_MAX_SECONDS`.",
    )
    webhook_backoff_max_seconds: float = Field(
        3600.0, gt=0, le=86_400, description="The longest wait between two attempts."
    )
    webhook_poll_seconds: float = Field(
        0.5,
        gt=0,
        le=60,
        description="How often each process looks for due deliveries (PostgreSQL also wakes "
        "it at once by NOTIFY when one is written).",
    )
    webhook_claim_seconds: float = Field(
        60.0,
        gt=0,
        le=3600,
        description="How long a process holds the deliveries it is sending; a process that "
        "dies mid-send leaves them to another after this.",
    )
    webhook_retention_seconds: float = Field(
        604_800.0,
        gt=0,
        le=315_360_000,
        description="How long delivered and failed deliveries stay listed (7 days); older "
        "ones are deleted.",
    )
