"""First outputs first: while runs wait for their model's first output, storage waits a little.

May import the standard library only. When a hundred runs start at once, what each client waits
for is its first token; the event writer's flushes (the deltas of running runs, the endings of
finished ones) are work its clients do not wait for, done on the same event loop. So from the
moment a start is asked for until its run's model first answers (or it fails before that), the
writer holds its flushes back, by ``HOLD_MOST`` seconds at most: they are then larger and fewer,
and run after the starts rather than between them. Events are sent to readers before they are
stored, so no reader waits for it; a run's ``done`` (sent once its ending is stored) may.
"""

from __future__ import annotations

from collections.abc import Callable

HOLD_MOST = 0.25
"""How long a flush is held back at most, while starts wait for their model."""


class FirstOutputs:
    """The starts of this process whose model has not answered yet."""

    def __init__(self) -> None:
        self.waiting = 0
        self.on_clear: Callable[[], None] | None = None
        """Called when the last waiting start is answered (the writer flushes what it held)."""

    def asked(self) -> Callable[..., None]:
        """A start was asked for: call what this returns when its model answers, or the start
        or its run ends before it did (calls after the first change nothing)."""
        self.waiting += 1
        answered = False

        def answer(*_: object) -> None:
            nonlocal answered
            if not answered:
                answered = True
                self.waiting -= 1
                if not self.waiting and self.on_clear is not None:
                    self.on_clear()

        return answer

    def held_until(self, since: float | None) -> float:
        """Until when a flush of what waits since ``since`` is held back (the loop's clock):
        0 when nothing waits for a model."""
        if not self.waiting or since is None:
            return 0.0
        return since + HOLD_MOST
