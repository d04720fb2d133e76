"""The usage ledger's sums (``GET /usage``, a conversation's totals) and API keys (the admin
API): docs/spend.md.

May import pydantic and the other schema modules.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Literal

from pydantic import AfterValidator, AwareDatetime, BaseModel, ConfigDict, Field

from app.api.schemas.base import SERVED, Omittable

GroupBy = Literal["key", "conversation", "model", "day"]


def in_utc(value: datetime) -> datetime:
    """``value`` in UTC, as stored; a ValueError (a 422) when UTC has no such time
    (``0001-01-01T00:00:00+14:00``, ``9999-12-31T23:59:59-14:00``)."""
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValueError("the time is out of range in UTC") from None


KeyName = Annotated[str, Field(min_length=1, max_length=255)]
UtcDatetime = Annotated[AwareDatetime, AfterValidator(in_utc)]
"""A time with a UTC offset that exists in UTC (the database's timestamps)."""


class UsageTotals(BaseModel):
    """Model calls charged to the ledger: tokens by kind and their cost."""

    model_config = SERVED

    calls: int = Field(description="Model calls (one per `message_stop`).")
    input_tokens: int = Field(description="Every token of the requests (the cache kinds too).")
    output_tokens: int = Field(description="Every token of the replies (reasoning too).")
    reasoning_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cost_usd: float | None = Field(
        description="US dollars, by the price table; null when no call's model has a price."
    )
    unpriced_calls: int = Field(description="Calls of models the price table does not know.")


class UsageGroup(UsageTotals):
    """The totals of one group."""

    group: str = Field(
        description="The key's id (`key`; a static key or anonymous caller: its owner), the "
        "conversation's id, `provider/model`, or the UTC day `YYYY-MM-DD`."
    )


class UsageReport(BaseModel):
    """The ledger summed by one dimension over a time range."""

    model_config = SERVED

    group_by: GroupBy
    from_: datetime | None = Field(alias="from")
    to: datetime | None
    items: list[UsageGroup]


class KeyLimitsIn(BaseModel):
    """A key's limits; null (or left out when creating): none of that kind."""

    requests_per_minute: int | None = Field(None, ge=1, le=1_000_000)
    max_concurrent_runs: int | None = Field(None, ge=1, le=100_000)
    output_tokens_per_day: int | None = Field(None, ge=1, le=10**15)
    budget_usd_per_month: float | None = Field(None, ge=0, le=10**9)


class KeyCreate(KeyLimitsIn):
    """A new API key."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"name": "ci", "budget_usd_per_month": 5}]},
    )

    name: KeyName
    expires_at: UtcDatetime | None = None


class KeyPatch(KeyLimitsIn):
    """What to change of a key: the fields sent (null clears a limit or the expiry; a key
    always has a name)."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"requests_per_minute": 60}]}
    )

    name: Omittable[KeyName] = None
    expires_at: UtcDatetime | None = None


class KeyOut(BaseModel):
    """An API key as stored: never its token."""

    model_config = SERVED

    id: str
    name: str
    prefix: str = Field(description="The token's first characters, to recognise it by.")
    status: Literal["active", "revoked", "expired"]
    created_at: datetime
    last_used_at: datetime | None = Field(
        description="Written at most once a `PARLEY_KEY_LAST_USED_SECONDS` by each process."
    )
    expires_at: datetime | None
    revoked_at: datetime | None
    requests_per_minute: int | None
    max_concurrent_runs: int | None
    output_tokens_per_day: int | None
    budget_usd_per_month: float | None


class KeyCreated(KeyOut):
    """A new key, with its token: shown this once, never again."""

    token: str = Field(description="The bearer token. Store it now: only its hash is kept.")


class KeyList(BaseModel):
    """Every key, oldest first."""

    model_config = SERVED

    items: list[KeyOut]
