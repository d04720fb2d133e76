"""API keys in the database: made, listed, changed and revoked; found by their token's hash.

Imports SQLAlchemy and app.storage. A token is shown once, when its key is made; the table
keeps its SHA-256 and a short prefix to recognise it by. A key's owner — whose conversations
it sees — is derived from its token exactly as a static key's (``PARLEY_API_KEYS``) is, so each
key has an owner of its own, stable for its life, and keys do not share owners.
"""

from __future__ import annotations

import hashlib
import secrets
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from sqlalchemy import func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from app.spend.errors import KeyNotFound
from app.storage import utcnow
from app.storage.spend_tables import KEYS

_K = KEYS.c
TOKEN_PREFIX = "prl_"
VISIBLE = 12
"""How many of a token's first characters the table keeps, to recognise it by."""


@dataclass(frozen=True, slots=True)
class Limits:
    """A key's limits; ``None``: no limit of that kind."""

    requests_per_minute: int | None = None
    max_concurrent_runs: int | None = None
    output_tokens_per_day: int | None = None
    budget_usd_per_month: float | None = None

    @property
    def budgeted(self) -> bool:
        return self.output_tokens_per_day is not None or self.budget_usd_per_month is not None


LIMIT_NAMES = tuple(f.name for f in fields(Limits))


@dataclass(frozen=True, slots=True)
class KeyRecord:
    """A key as stored (never its token)."""

    id: str
    name: str
    prefix: str
    owner: str
    created_at: datetime
    last_used_at: datetime | None
    expires_at: datetime | None
    revoked_at: datetime | None
    limits: Limits

    def refused(self, now: datetime) -> bool:
        """Revoked, or past its expiry."""
        return self.revoked_at is not None or (
            self.expires_at is not None and self.expires_at <= now
        )


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).hexdigest()


def owner_of_token(token: str) -> str:
    """The owner a bearer token names (static and database keys alike)."""
    return "key:" + token_hash(token)[:32]


def _record(row: Mapping[Any, Any]) -> KeyRecord:
    return KeyRecord(
        id=row["id"],
        name=row["name"],
        prefix=row["prefix"],
        owner=row["owner"],
        created_at=row["created_at"],
        last_used_at=row["last_used_at"],
        expires_at=row["expires_at"],
        revoked_at=row["revoked_at"],
        limits=Limits(**{name: row[name] for name in LIMIT_NAMES}),
    )


async def create_key(
    session: AsyncConnection, name: str, limits: Limits, expires_at: datetime | None = None
) -> tuple[KeyRecord, str]:
    """A new key and its token (to show once)."""
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    values: dict[str, Any] = {
        "id": uuid.uuid4().hex,
        "token_hash": token_hash(token),
        "prefix": token[:VISIBLE],
        "name": name,
        "owner": owner_of_token(token),
        "created_at": utcnow(),
        "last_used_at": None,
        "expires_at": expires_at,
        "revoked_at": None,
        **{name: getattr(limits, name) for name in LIMIT_NAMES},
    }
    await session.execute(insert(KEYS).values(values))
    return _record(values), token


async def list_keys(session: AsyncConnection) -> list[KeyRecord]:
    rows = await session.execute(select(KEYS).order_by(_K.created_at, _K.id))
    return [_record(row) for row in rows.mappings()]


async def get_key(session: AsyncConnection, key_id: str) -> KeyRecord:
    row = (await session.execute(select(KEYS).where(_K.id == key_id))).mappings().one_or_none()
    if row is None:
        raise KeyNotFound(key_id)
    return _record(row)


async def find_key(session: AsyncConnection, token: str) -> KeyRecord | None:
    """The key whose token this is (revoked and expired ones too), or None."""
    statement = select(KEYS).where(_K.token_hash == token_hash(token))
    row = (await session.execute(statement)).mappings().one_or_none()
    return None if row is None else _record(row)


async def any_keys(session: AsyncConnection) -> bool:
    """Whether a key was ever made (a revoked one too: revoking the last key does not open
    the service to anyone)."""
    return bool(await session.scalar(select(func.count()).select_from(KEYS).limit(1)))


async def change_key(
    session: AsyncConnection, key_id: str, changes: Mapping[str, Any]
) -> KeyRecord:
    """Set ``changes`` (the name, ``expires_at``, limits); the key as it is now."""
    allowed = {"name", "expires_at", *LIMIT_NAMES}
    values = {k: v for k, v in changes.items() if k in allowed}
    if values:
        result = await session.execute(update(KEYS).where(_K.id == key_id).values(values))
        if result.rowcount == 0:
            raise KeyNotFound(key_id)
    return await get_key(session, key_id)


async def revoke_key(session: AsyncConnection, key_id: str) -> KeyRecord:
    """Revoke the key (the first revocation's time is kept)."""
    await session.execute(
        update(KEYS).where(_K.id == key_id, _K.revoked_at.is_(None)).values(revoked_at=utcnow())
    )
    return await get_key(session, key_id)


async def touch_key(session: AsyncConnection, key_id: str, now: datetime) -> None:
    """Record that the key was used ``now`` (one row, no read)."""
    await session.execute(update(KEYS).where(_K.id == key_id).values(last_used_at=now))
