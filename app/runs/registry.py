"""The runs this process is executing, so that ``cancel`` from any request can stop one.

Standard library only. A run in another process is stopped through its lease instead (the
holder notices at its next renewal).
"""

from __future__ import annotations

import asyncio


class RunRegistry:
    """Run id → the task that drives that run's model stream."""

    def __init__(self) -> None:
        self._tasks: dict[str, asyncio.Task[None]] = {}

    def add(self, run_id: str, task: asyncio.Task[None]) -> None:
        self._tasks[run_id] = task

    def discard(self, run_id: str) -> None:
        self._tasks.pop(run_id, None)

    def cancel(self, run_id: str) -> bool:
        """Stop the run if it runs here; True when it did."""
        task = self._tasks.get(run_id)
        if task is None:
            return False
        task.cancel()
        return True
