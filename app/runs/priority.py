"""First outputs first: while starts are being set up, the rest waits a little.

May import the standard library only. When a hundred runs start at once, what each client waits
for is its first token, and until a start's model request is under way it needs this process's
event loop: its request, its write transaction, the SDK's request building. The event writer's
flushes (the deltas of running runs, the endings of finished ones) and the rest of the replies
already under way are work those clients do not wait for, done on the same loop. So, while a
start is *pressing* — asked for, its model request not yet under way:

- the writer holds its flushes back while a start asked less than ``HOLD_MOST`` seconds ago
  presses (and until ``HOLD_MOST`` after the first thing it holds, at most): they are then
  larger and fewer, and run after the starts rather than between them. Events are sent to
  readers before they are stored, so no reader waits for it; a run's ``done`` (sent once its
  ending is stored) may;
- a run that has had its first output reads no more of its reply until the starts asked before
  that moment press no more (answered, or asked ``PAUSE_MOST`` ago): the rest of its reply
  waits in the socket, and the loop serves the starts first. Starts asked later do not hold it,
  so a reply pauses once at most. The pause may last longer than the writer's hold: on
  PostgreSQL a start's statements each wait for a turn of the loop, and a crowd of replies
  streaming at once made those turns long enough that a herd's last starts took seconds
  (docs/performance.md).

A start whose model request is under way presses no more: waiting on the network for a slow
model (seconds, for a model that thinks) needs no loop, and must cost the other runs nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

HOLD_MOST = 0.25
"""How long a start holds the writer's flushes at most, and a flush is held at most (s)."""
PAUSE_MOST = 1.0
"""How long a start holds back the replies under way at most (seconds since it was asked)."""


class FirstOutputs:
    """The starts of this process whose model request is not under way yet."""

    def __init__(self, clock: Callable[[], float] | None = None) -> None:
        self.on_clear: Callable[[], None] | None = None
        """Called when the last waiting start is answered (the writer flushes what it held)."""
        self._clock = clock or _loop_time  # the event writer's clock
        self._asked = 0  # starts asked for so far: each start's ticket is its number
        self._owed: dict[int, float] = {}  # the waiting starts' tickets: when each was asked
        self._behind: list[tuple[int, asyncio.Future[None]]] = []  # (ticket seen, waiter)
        self.pauses = 0
        """Replies that waited for earlier starts so far (for tests and the benchmark)."""

    @property
    def waiting(self) -> int:
        """How many starts have not had their model request under way yet."""
        return len(self._owed)

    def asked(self) -> Callable[..., None]:
        """A start was asked for: call what this returns once its model request is under way,
        or the start or its run ends before it is (calls after the first change nothing)."""
        self._asked += 1
        ticket = self._asked
        self._owed[ticket] = self._clock()

        def answer(*_: object) -> None:
            if self._owed.pop(ticket, None) is not None:
                self._release()
                if not self._owed and self.on_clear is not None:
                    self.on_clear()

        return answer

    def held_until(self, since: float | None) -> float:
        """Until when a flush of what waits since ``since`` is held back (this clock): 0 when
        no start presses."""
        pressing = self._pressing_until(HOLD_MOST)
        if not pressing or since is None:
            return 0.0
        return min(since + HOLD_MOST, pressing)

    async def earlier_starts(self) -> None:
        """Return once the starts asked before now press no more (answered, or asked
        ``PAUSE_MOST`` ago): a reply under way lets them go first."""
        pressing = self._pressing_until(PAUSE_MOST)
        if not pressing:
            return
        self.pauses += 1
        waiter = asyncio.get_running_loop().create_future()
        self._behind.append((self._asked, waiter))
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(0.0, pressing - self._clock())):
                    await waiter
        finally:
            if not waiter.done():
                waiter.cancel()
                self._behind = [b for b in self._behind if b[1] is not waiter]

    def _pressing_until(self, most: float) -> float:
        """When the newest pressing start presses no more (this clock); 0 when none does."""
        if not self._owed:
            return 0.0
        newest = self._owed[next(reversed(self._owed))]  # tickets go in in order: the last
        until = newest + most
        return until if until > self._clock() else 0.0

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


def _loop_time() -> float:
    return asyncio.get_running_loop().time()
