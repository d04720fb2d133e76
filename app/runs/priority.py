"""First outputs first: while runs wait for their model's first output, the rest waits a little.

May import the standard library only. When a hundred runs start at once, what each client waits
for is its first token; the event writer's flushes (the deltas of running runs, the endings of
finished ones) and the rest of the replies already under way are work those clients do not wait
for, done on the same event loop. So:

- from the moment a start is asked for until its run's model first answers (or it fails before
  that), the writer holds its flushes back, by ``HOLD_MOST`` seconds at most: they are then
  larger and fewer, and run after the starts rather than between them. Events are sent to
  readers before they are stored, so no reader waits for it; a run's ``done`` (sent once its
  ending is stored) may;
- a run whose model has answered (its first token sent) reads no more of its reply until the
  starts asked before that moment have had their first output too, by ``HOLD_MOST`` at most: the
  rest of its reply waits in the socket, and the loop serves the starts first. Starts asked
  later do not hold it back, so under a steady flow of starts a reply pauses once, briefly.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

HOLD_MOST = 0.25
"""How long a flush, or a reply after its first token, is held back at most."""


class FirstOutputs:
    """The starts of this process whose model has not answered yet."""

    def __init__(self) -> None:
        self.on_clear: Callable[[], None] | None = None
        """Called when the last waiting start is answered (the writer flushes what it held)."""
        self._asked = 0  # starts asked for so far: each start's ticket is its number
        self._owed: set[int] = set()  # the tickets of the starts still waiting
        self._behind: list[tuple[int, asyncio.Future[None]]] = []  # (ticket seen, waiter)

    @property
    def waiting(self) -> int:
        """How many starts wait for their model's first output."""
        return len(self._owed)

    def asked(self) -> Callable[..., None]:
        """A start was asked for: call what this returns when its model answers, or the start
        or its run ends before it did (calls after the first change nothing)."""
        self._asked += 1
        ticket = self._asked
        self._owed.add(ticket)

        def answer(*_: object) -> None:
            if ticket in self._owed:
                self._owed.discard(ticket)
                self._release()
                if not self._owed and self.on_clear is not None:
                    self.on_clear()

        return answer

    def held_until(self, since: float | None) -> float:
        """Until when a flush of what waits since ``since`` is held back (the loop's clock):
        0 when nothing waits for a model."""
        if not self._owed or since is None:
            return 0.0
        return since + HOLD_MOST

    async def earlier_starts(self) -> None:
        """Return once the starts asked before now have had their first output (or
        ``HOLD_MOST`` has passed): a reply under way lets them go first."""
        if not self._owed:
            return
        waiter = asyncio.get_running_loop().create_future()
        self._behind.append((self._asked, waiter))
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(HOLD_MOST):
                    await waiter
        finally:
            if not waiter.done():
                waiter.cancel()
                self._behind = [b for b in self._behind if b[1] is not waiter]

    def _release(self) -> None:
        """Wake the replies no earlier start holds back any more."""
        if not self._behind:
            return
        first_owed = min(self._owed, default=self._asked + 1)
        still = []
        for seen, waiter in self._behind:
            if seen < first_owed:
                if not waiter.done():
                    waiter.set_result(None)
            else:
                still.append((seen, waiter))
        self._behind = still
