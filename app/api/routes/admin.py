"""The admin API: API keys in the database (``/admin/keys``), guarded by
``PARLEY_ADMIN_TOKEN`` — unset, every route here answers 404 (docs/spend.md).

May import FastAPI, schemas, deps and app/spend. A change made here is seen by this process at
once and by every other within ``PARLEY_KEY_CACHE_SECONDS`` (under a second).
"""

from __future__ import annotations

import hmac
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Path, Request, Response, Security, status
from fastapi.security import HTTPAuthorizationCredentials

from app.api.deps import bearer, bearer_token, get_services
from app.api.problems import NotFound, Unauthorized
from app.api.schemas.usage import KeyCreate, KeyCreated, KeyList, KeyOut, KeyPatch
from app.runs.services import Services
from app.spend import KeyRecord, Limits
from app.spend.keys import LIMIT_NAMES
from app.spend.service import KeyAdmin
from app.storage import utcnow

router = APIRouter(prefix="/admin/keys", tags=["admin"])

KeyIdPath = Annotated[str, Path(description="The key's id.", pattern="^[0-9a-f]{32}$")]


def is_admin(services: Services, token: str | None) -> bool:
    """Whether ``token`` is the admin token (never when none is set)."""
    expected = services.settings.admin_token.get_secret_value()
    if not expected or token is None:
        return False
    return hmac.compare_digest(token.encode("utf-8", "surrogateescape"), expected.encode())


async def get_admin(
    request: Request,
    _scheme: Annotated[HTTPAuthorizationCredentials | None, Security(bearer)],
    authorization: Annotated[str | None, Header(include_in_schema=False)] = None,
) -> Services:
    """The services, for a caller holding the admin token."""
    services = await get_services(request)
    if not services.settings.admin_token.get_secret_value():
        raise NotFound("the admin API is off: set PARLEY_ADMIN_TOKEN to use it")
    if not is_admin(services, bearer_token(authorization)):
        raise Unauthorized("the admin token is required: 'Authorization: Bearer <admin token>'")
    return services


AdminDep = Annotated[Services, Depends(get_admin)]


def key_out(key: KeyRecord, now: datetime | None = None) -> dict[str, Any]:
    now = now or utcnow()
    state = "revoked" if key.revoked_at else "expired" if key.refused(now) else "active"
    limits = {name: getattr(key.limits, name) for name in LIMIT_NAMES}
    return KeyOut(
        id=key.id,
        name=key.name,
        prefix=key.prefix,
        status=state,
        created_at=key.created_at,
        last_used_at=key.last_used_at,
        expires_at=key.expires_at,
        revoked_at=key.revoked_at,
        **limits,
    ).model_dump(mode="json")


def _admin(services: Services) -> KeyAdmin:
    return KeyAdmin(services.database, services.keys)


@router.post("", status_code=status.HTTP_201_CREATED, response_model=KeyCreated)
async def create(body: KeyCreate, services: AdminDep, response: Response) -> dict[str, Any]:
    """Make a key with its limits; its token is in this response only (the table keeps its
    hash and a prefix)."""
    limits = Limits(**{name: getattr(body, name) for name in LIMIT_NAMES})
    key, token = await _admin(services).create(body.name, limits, body.expires_at)
    response.headers["Location"] = f"/admin/keys/{key.id}"
    return {**key_out(key), "token": token}


@router.get("", response_model=KeyList)
async def list_all(services: AdminDep) -> dict[str, Any]:
    """Every key (revoked and expired ones too), oldest first."""
    keys = await _admin(services).list()
    now = utcnow()
    return {"items": [key_out(k, now) for k in keys]}


@router.get("/{key_id}", response_model=KeyOut)
async def read(key_id: KeyIdPath, services: AdminDep) -> dict[str, Any]:
    """One key."""
    return key_out(await _admin(services).get(key_id))


@router.patch("/{key_id}", response_model=KeyOut)
async def change(key_id: KeyIdPath, body: KeyPatch, services: AdminDep) -> dict[str, Any]:
    """Change a key's name, expiry or limits: the fields sent (null clears a limit or the
    expiry; a null name is a 422)."""
    changes = {name: getattr(body, name) for name in body.model_fields_set}
    return key_out(await _admin(services).change(key_id, changes))


@router.delete("/{key_id}", status_code=status.HTTP_204_NO_CONTENT)
async def revoke(key_id: KeyIdPath, services: AdminDep) -> Response:
    """Revoke a key: refused (401) on every replica within a second. Its row stays (its name
    in the usage, and the service stays closed to callers without a key)."""
    await _admin(services).revoke(key_id)
    return Response(status_code=204)
