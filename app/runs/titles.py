"""Titles made for conversations after a completed reply (``PARLEY_AUTO_TITLE``, docs/search.md).

Imports app.domain, app.storage and app.observability. After a run completes a reply of a
conversation without a title, ``Titler.after_reply`` starts a background task: a small model
call (the title provider and model are settings) given the first user message, its answer cut to
a few words. The task never delays or fails the run: a failure is logged and counted
(``parley_titles_total{outcome="failed"}``). ``store_title`` is the one place a made title is
stored — a conditional write, so of processes titling one conversation at once exactly one
stores — and where what follows a stored title (the ``conversation.titled`` webhook) belongs.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable, Iterable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

from app.domain import AgentMessage, Message, ModelAdapter, RequestOptions, Role, TextMessage
from app.domain.selection import ModelSelectionStrategy
from app.observability import metrics
from app.settings import Settings
from app.storage import ConversationRepository, RunRepository

log = logging.getLogger(__name__)

TITLE_WORDS = 6
TITLE_CHARS = 80
INSTRUCTION = (
    "Write a title for the conversation that begins with the next message: at most six "
    "words, in the message's language, without quotes or a final period. Answer with the "
    "title alone."
)
RepositoryFactory = Callable[[str | None], AbstractAsyncContextManager[ConversationRepository]]


@dataclass(frozen=True)
class TitleRequest:
    """What a title is made from and for: the run that completed the reply, and the
    conversation's provider and model (the defaults of the title's own)."""

    run_id: str
    conversation_id: str
    first_user_text: str
    provider: str | None
    model: str | None


def title_from(text: str) -> str:
    """A model's answer as a title: its first line, unquoted, at most TITLE_WORDS words and
    TITLE_CHARS characters, without a final period ('' when nothing is left)."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    first = lines[0] if lines else ""
    first = re.sub(r"^(title\s*:\s*)", "", first.strip(), flags=re.IGNORECASE)
    words = first.strip().strip("\"'“”‘’*#").split()[:TITLE_WORDS]
    title = " ".join(words)[:TITLE_CHARS].rstrip(" .")
    return title


def first_user_text(messages: Iterable[Message]) -> str | None:
    """The text of the conversation's first user message, if it has one."""
    for message in messages:
        if isinstance(message, TextMessage) and message.role is Role.USER and message.text.strip():
            return message.text
    return None


async def store_title(
    repo: ConversationRepository,
    conversation_id: str,
    run_id: str,
    title: str,
    usage: dict[str, int],
) -> bool:
    """Store ``title`` unless the conversation has one by now, and count the call's tokens in
    the run's usage, in the repository's transaction; whether the title was stored."""
    stored = await repo.title_if_untitled(conversation_id, title)
    await RunRepository(repo.session).add_usage(run_id, usage)
    return stored


class Titler:
    """This process's title tasks: started after replies, cancelled when it stops."""

    def __init__(
        self, settings: Settings, selector: ModelSelectionStrategy, repository: RepositoryFactory
    ) -> None:
        self._settings = settings
        self._selector = selector
        self._repository = repository
        self._tasks: set[asyncio.Task[None]] = set()

    def after_reply(self, request: TitleRequest) -> None:
        """Make a title for the conversation in the background (when the settings ask)."""
        if not self._settings.auto_title:
            return
        task = asyncio.create_task(self._title(request), name=f"title-{request.conversation_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        """Cancel the title tasks still running (their titles are not made)."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def wait(self) -> None:
        """Wait for the title tasks running now (tests; a drain)."""
        await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def _title(self, request: TitleRequest) -> None:
        try:
            async with asyncio.timeout(self._settings.title_timeout_seconds):
                title, usage = await self._ask(request)
            if not title:
                raise ValueError("the model answered no title")
            async with self._repository(None) as repo:
                stored = await store_title(
                    repo, request.conversation_id, request.run_id, title, usage
                )
            metrics.title_made("stored" if stored else "taken")
        except Exception as exc:  # never the run's failure: logged and counted
            log.warning(
                "no title for conversation %s: %s: %s",
                request.conversation_id,
                type(exc).__name__,
                str(exc)[:200],
            )
            metrics.title_made("failed")

    async def _ask(self, request: TitleRequest) -> tuple[str, dict[str, int]]:
        adapter, model = self._model(request)
        messages = [AgentMessage(INSTRUCTION), TextMessage(request.first_user_text, role=Role.USER)]
        options = RequestOptions(model=model, max_output_tokens=32)
        response = await adapter.send_message(messages, [], options)
        counts = {k: v for k, v in response.usage.as_dict().items() if v}
        return title_from(response.text), counts

    def _model(self, request: TitleRequest) -> tuple[ModelAdapter, str]:
        provider = self._settings.title_provider or request.provider
        model = self._settings.title_model
        if model is None and provider == request.provider:
            model = request.model
        return self._selector.select_model(provider, model)
