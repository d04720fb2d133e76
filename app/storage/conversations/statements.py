"""The statements of ConversationRepository, built once with bound parameters.

Imports SQLAlchemy and app.storage. SQLAlchemy reuses the compiled form of a statement built
once (building one per call costs more than SQLite takes to run it). Each scoped pair is (the
system's, one owner's); the statements of a run's start and ending go to the driver's cursor
(``Direct``, app/storage/driver).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

from sqlalchemy import and_, bindparam, exists, insert, select, update

from app.storage.driver import Direct
from app.storage.tables import CONVERSATIONS, MESSAGES

C = CONVERSATIONS.c
M = MESSAGES.c
NO_LEASE: dict[str, Any] = {"lease_run_id": None, "lease_expires_at": None}
HAS_PENDING = "has_pending"
# A conversation's row with whether it has pending tool calls: most have none, and then
# reading it needs no second query for their ids.
ROW = select(
    CONVERSATIONS,
    exists().where(M.conversation_id == C.id, M.pending_call_id.is_not(None)).label(HAS_PENDING),
)

KEY: Any = bindparam("key")
_SCOPES = (C.id == KEY, and_(C.id == KEY, C.owner == bindparam("of_owner")))
Scoped = tuple[Any, Any]


def _scoped(build: Callable[[Any], Any]) -> Scoped:
    return build(_SCOPES[0]), build(_SCOPES[1])


GET = _scoped(lambda scope: ROW.where(scope))
LOCK = _scoped(lambda scope: Direct(ROW.where(scope).with_for_update(of=CONVERSATIONS)))
COUNT = _scoped(lambda scope: select(C.message_count).where(scope))
RELEASE = _scoped(
    lambda scope: (
        update(CONVERSATIONS).where(scope, C.lease_run_id == bindparam("run")).values(NO_LEASE)
    )
)
RENEW = _scoped(
    lambda scope: (
        update(CONVERSATIONS)
        .where(scope, C.lease_run_id == bindparam("run"))
        .values(lease_expires_at=bindparam("expires"))
    )
)
LOAD = Direct(
    select(M.idx, M.data)
    .where(M.conversation_id == KEY, M.idx >= bindparam("start"), M.idx < bindparam("end"))
    .order_by(M.idx)
)
INSERT_CONVERSATION = Direct(insert(CONVERSATIONS))
INSERT_MESSAGES = Direct(insert(MESSAGES))
LOCK_MANY = ROW.where(C.id.in_(bindparam("keys", expanding=True))).with_for_update(of=CONVERSATIONS)
HOLDERS = (
    select(C.id, C.owner, C.lease_run_id)
    .where(C.id.in_(bindparam("keys", expanding=True)))
    .with_for_update()
)


@cache
def change(columns: tuple[str, ...], returning: bool) -> Direct:
    """The UPDATE of a conversation (by ``key``) setting ``columns`` to ``new_<column>``."""
    statement = (
        update(CONVERSATIONS)
        .where(C.id == KEY)
        .values({column: bindparam(f"new_{column}") for column in columns})
    )
    return Direct(statement.returning(*CONVERSATIONS.c) if returning else statement)


def new(values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` as the parameters of ``change``."""
    return {f"new_{column}": value for column, value in values.items()}
