"""Routes for webhooks: register, list, read, change and delete endpoints; list and replay their
deliveries. Owner-scoped like conversations: each key sees only its own endpoints.

May import FastAPI, schemas, deps, problems and the webhooks room. Each route parses, calls one
use case (app/webhooks/service.py) and maps the result.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request, Response, status
from fastapi.responses import JSONResponse

from app.api.deps import Caller, CallerDep, CursorQuery
from app.api.paths import public_path
from app.api.problems import NotFound, Unprocessable
from app.api.schemas.webhooks import (
    DeliveryOut,
    DeliveryPage,
    WebhookCreate,
    WebhookCreated,
    WebhookOut,
    WebhookPage,
    WebhookUpdate,
)
from app.runs.codes import ErrorCode
from app.storage.webhooks import DeliveryNotFound, DeliveryRecord, EndpointRecord, WebhookNotFound
from app.webhooks.guard import UrlRefused
from app.webhooks.service import WebhookService

router = APIRouter(prefix="/webhooks", tags=["webhooks"])

IdPath = Annotated[str, Path(description="The webhook endpoint's id.")]
DeliveryPath = Annotated[str, Path(description="The delivery's id.")]
LimitQuery = Annotated[int | None, Query(ge=1, description="Page size.")]
_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"description": "No such webhook endpoint (or delivery) for this key."}
}
_REFUSED: dict[int | str, dict[str, Any]] = {
    422: {
        "description": "The request is invalid, or its URL's host resolves to a loopback, "
        "private, link-local or multicast address (`webhook_url_refused`)."
    }
}


def _service(caller: Caller) -> WebhookService:
    services = caller.services
    return WebhookService(services.database, services.settings, caller.owner)


@contextmanager
def _problems() -> Iterator[None]:
    """The webhook room's errors as problems."""
    try:
        yield
    except WebhookNotFound as exc:
        raise NotFound(str(exc), slug=ErrorCode.WEBHOOK_NOT_FOUND) from None
    except DeliveryNotFound as exc:
        raise NotFound(str(exc), slug=ErrorCode.DELIVERY_NOT_FOUND) from None
    except UrlRefused as exc:
        errors = [{"loc": ["body", "url"], "msg": str(exc), "type": "value_error"}]
        raise Unprocessable(str(exc), slug=ErrorCode.WEBHOOK_URL_REFUSED, errors=errors) from None


def _out(record: EndpointRecord) -> WebhookOut:
    return WebhookOut(
        id=record.id,
        url=record.url,
        events=list(record.events),
        enabled=record.enabled,
        created_at=record.created_at,
        updated_at=record.updated_at,
    )


def _delivery(record: DeliveryRecord) -> DeliveryOut:
    return DeliveryOut(
        id=record.id,
        webhook_id=record.message_id,
        event=record.event,
        conversation_id=record.conversation_id,
        run_id=record.run_id,
        status=record.status,
        attempts=record.attempts,
        last_status_code=record.last_status_code,
        last_error=record.last_error,
        next_attempt_at=record.next_attempt_at,
        created_at=record.created_at,
        delivered_at=record.delivered_at,
    )


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=WebhookCreated,
    responses=_REFUSED,
)
async def create_webhook(request: Request, body: WebhookCreate, caller: CallerDep) -> Response:
    """Register an endpoint for the events named. The answer holds its signing secret
    (`whsec_…`), shown only this once."""
    with _problems():
        record = await _service(caller).create(body.url, [e.value for e in body.events])
    out = WebhookCreated(**_out(record).model_dump(), secret=record.secret)
    location = public_path(request.scope, f"/webhooks/{record.id}")
    return JSONResponse(
        out.model_dump(mode="json"), status_code=201, headers={"Location": location}
    )


@router.get("", response_model=WebhookPage)
async def list_webhooks(
    caller: CallerDep, limit: LimitQuery = None, cursor: CursorQuery = None
) -> WebhookPage:
    """Your webhook endpoints, newest first, a page at a time (no secrets)."""
    settings = caller.services.settings
    size = min(limit or settings.page_size, settings.max_page_size)
    records, next_cursor = await _service(caller).list(size, cursor)
    return WebhookPage(items=[_out(r) for r in records], next_cursor=next_cursor)


@router.get("/{webhook_id}", response_model=WebhookOut, responses=_NOT_FOUND)
async def get_webhook(webhook_id: IdPath, caller: CallerDep) -> WebhookOut:
    """One endpoint (no secret)."""
    with _problems():
        return _out(await _service(caller).get(webhook_id))


@router.patch("/{webhook_id}", response_model=WebhookOut, responses={**_NOT_FOUND, **_REFUSED})
async def update_webhook(webhook_id: IdPath, body: WebhookUpdate, caller: CallerDep) -> WebhookOut:
    """Change an endpoint's `url`, `events` or `enabled` (a field left out stays; none can be
    null: a `null` is a 422 and changes nothing)."""
    changes: dict[str, Any] = body.model_dump(exclude_none=True, mode="json")
    with _problems():
        return _out(await _service(caller).update(webhook_id, changes))


@router.delete("/{webhook_id}", status_code=status.HTTP_204_NO_CONTENT, responses=_NOT_FOUND)
async def delete_webhook(webhook_id: IdPath, caller: CallerDep) -> Response:
    """Delete an endpoint and its deliveries, sent or not."""
    with _problems():
        await _service(caller).delete(webhook_id)
    return Response(status_code=204)


@router.get("/{webhook_id}/deliveries", response_model=DeliveryPage, responses=_NOT_FOUND)
async def list_deliveries(
    webhook_id: IdPath, caller: CallerDep, limit: LimitQuery = None, cursor: CursorQuery = None
) -> DeliveryPage:
    """The endpoint's deliveries, newest first: each event, its status (`pending`,
    `delivered`, `failed`), attempts, last response code or error, and next attempt."""
    settings = caller.services.settings
    size = min(limit or settings.page_size, settings.max_page_size)
    with _problems():
        records, next_cursor = await _service(caller).deliveries(webhook_id, size, cursor)
    return DeliveryPage(items=[_delivery(r) for r in records], next_cursor=next_cursor)


@router.post(
    "/{webhook_id}/deliveries/{delivery_id}/replay",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=DeliveryOut,
    responses=_NOT_FOUND,
)
async def replay_delivery(
    webhook_id: IdPath, delivery_id: DeliveryPath, caller: CallerDep
) -> DeliveryOut:
    """Send a delivery again, now, with the same `webhook-id` (retried as a new one is)."""
    with _problems():
        return _delivery(await _service(caller).replay(webhook_id, delivery_id))
