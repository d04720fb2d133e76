"""What a run reports to metrics and logs: started, its chunks' timing and tokens, finished.

May import the domain, app.observability and the run statuses (storage). One ``RunObserver``
per run; the runner calls ``started``, ``chunk`` for each StreamChunk, and ``finished`` once
with the final status.
"""

from __future__ import annotations

from app.domain import ContentBlockDelta, ContentBlockStart, MessageStop
from app.observability import logs, metrics
from app.storage.runs import FinalStatus


class RunObserver:
    """Records one run: counts, active gauge, time to first token, gaps, output tokens."""

    def __init__(self, provider: str, conversation_id: str, run_id: str) -> None:
        self.provider = provider
        self.conversation_id = conversation_id
        self.run_id = run_id
        self.clock = metrics.TokenClock(provider)
        self._finished = False

    def started(self) -> None:
        logs.bind(conversation_id=self.conversation_id, run_id=self.run_id)
        self.clock = metrics.TokenClock(self.provider)
        metrics.run_started(self.provider)

    def chunk(self, chunk: object) -> None:
        if isinstance(chunk, ContentBlockDelta):
            self.clock.delta()
        elif isinstance(chunk, ContentBlockStart):
            self.clock.block_start()
        elif isinstance(chunk, MessageStop) and chunk.usage.output_tokens:
            metrics.output_tokens(self.provider, chunk.usage.output_tokens)

    def finished(self, status: FinalStatus) -> None:
        if not self._finished:
            self._finished = True
            metrics.run_finished(self.provider, status)
