"""Savepoints on the driver's cursor, for the start groups (app/runs/starts.py).

Imports SQLAlchemy only; part of app/storage/driver, the fence around driver internals.
SQLAlchemy's nested transaction costs some 200 µs of Python a block (its transaction objects,
events and two ``execute`` calls); these are the savepoint statements themselves, sent as
``Direct`` sends its own (``statements``). ``SavepointChain`` runs a group's blocks one after
another with one round trip to PostgreSQL between two of them, where a savepoint per block
(``SAVEPOINT`` before it, ``RELEASE`` after) takes two.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from sqlalchemy.ext.asyncio import AsyncConnection

from app.storage.driver.direct import statements

T = TypeVar("T")

_NAME = "parley_start"
_SAVEPOINT = f"SAVEPOINT {_NAME}"
_RELEASE = f"RELEASE SAVEPOINT {_NAME}"
_ROLLBACK = f"ROLLBACK TO SAVEPOINT {_NAME}"


class SavepointChain:
    """Blocks run one after another in one transaction, each as in a savepoint of its own: a
    block that raises an ``Exception`` has its writes undone and the exception as its outcome,
    the others keep theirs. One savepoint serves them all: released and taken again between two
    blocks (one round trip on PostgreSQL), rolled back to and kept after a failed one; the last
    block's release is ``finish``'s, before the caller commits (a release PostgreSQL refuses —
    a block that swallowed a refused statement — undoes that block, as its own savepoint's
    would). A lost connection is the outcome of the blocks it takes, never raised from here:
    the caller's commit then fails, as it did with a savepoint per block, and each block can be
    tried alone."""

    def __init__(self, session: AsyncConnection) -> None:
        self.session = session
        self.outcomes: list[Any] = []
        """Each block's result, or the exception it raised, in order."""
        self._open = False  # the savepoint is taken (and holds nothing of a failed block)
        self._kept = False  # it holds the last block's writes, not yet released

    async def run(self, work: Callable[[AsyncConnection], Awaitable[T]]) -> None:
        """``work`` in the chain's savepoint; its outcome appended to ``outcomes``."""
        try:
            if self._kept:
                await self._release(_SAVEPOINT)
            if not self._open:
                await statements(self.session, _SAVEPOINT)
                self._open = True
        except Exception as exc:
            if not _lost(self.session):
                raise
            self.outcomes.append(exc)  # the connection is gone, and this block's chance with it
            return
        try:
            outcome: Any = await work(self.session)
        except Exception as exc:
            await self._undo()
            self.outcomes.append(exc)
            return
        self.outcomes.append(outcome)
        self._kept = True

    async def finish(self) -> list[Any]:
        """The last block released; every block's outcome."""
        if self._kept:
            await self._release()
        return self.outcomes

    async def _release(self, *then: str) -> None:
        """Release the last block's savepoint (and run ``then``, the next one's): if the
        database refuses, that block is undone instead and its outcome is the refusal."""
        self._kept = False
        try:
            await statements(self.session, _RELEASE, *then)
        except Exception as exc:
            self.outcomes[-1] = exc
            if _lost(self.session):  # the transaction is gone, that block's writes with it
                self._open = False
                return
            await statements(self.session, _ROLLBACK)  # the release did not happen: it is there
            return
        self._open = bool(then)

    async def _undo(self) -> None:
        if _lost(self.session):  # its transaction is gone; the next statement says so
            self._open = False
            return
        await statements(self.session, _ROLLBACK)


def _lost(session: AsyncConnection) -> bool:
    return bool(session.sync_connection and session.sync_connection.invalidated)
