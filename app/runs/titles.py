"""Titles made for conversations after a completed reply (``PARLEY_AUTO_TITLE``, docs/search.md).

Imports app.domain, app.storage, app.spend and app.observability. After a run completes a reply
of a conversation without a title, ``Titler.after_reply`` starts a background task: a small
model call (the title provider and model are settings) given the first user message, its answer
cut to a few words. The task never delays or fails the run: a failure is logged and counted
(``parley_titles_total{outcome="failed"}``). No call is made for a key whose budget is spent
(the check a run makes before each model call): the conversation stays untitled until a later
reply's title. ``store_title`` is the one place a made title is stored — a conditional write,
so of processes titling one conversation at once exactly one stores — and where what follows a
stored title (the ``conversation.titled`` webhook) belongs.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable, Iterable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

from app.domain import (
    AgentMessage,
    Message,
    ModelAdapter,
    RequestOptions,
    Role,
    TextMessage,
    Usage,
)
from app.domain.selection import ModelSelectionStrategy
from app.observability import metrics
from app.settings import Settings
from app.spend import BudgetExceeded, Charge, KeyRecord, Payer, PriceTable
from app.spend.ledger import charge
from app.spend.limits import check_run_budget
from app.storage import ConversationRepository, RunRepository, utcnow
from app.webhooks import enqueue

log = logging.getLogger(__name__)

TITLE_WORDS = 6
TITLE_CHARS = 80
TITLE_CALL = 0
"""The title's model call in the usage ledger: call 0 of the run it followed (a run's own calls
are numbered from 1), so it is charged once, to the run's key, beside the run's calls."""
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
    owner: str
    first_user_text: str
    provider: str | None
    model: str | None
    key: KeyRecord | None = None
    """The database key that started the run: the title's call is charged to it too, and
    not made when its budget is spent."""

    @property
    def key_id(self) -> str | None:
        return self.key.id if self.key is not None else None


@dataclass(frozen=True)
class TitleCall:
    """The title's model call: its answer and what it used, where."""

    text: str
    provider: str
    model: str
    usage: Usage


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
    request: TitleRequest,
    call: TitleCall,
    prices: PriceTable,
) -> bool:
    """Store the call's title unless the conversation has one by now, count its tokens in the
    run's usage and charge it to the usage ledger (the run's key, conversation and budget), and
    tell the owner's webhooks (``conversation.titled``), in the repository's transaction;
    whether the title was stored."""
    title = title_from(call.text)
    stored = await repo.title_if_untitled(request.conversation_id, title)
    usage = {k: v for k, v in call.usage.as_dict().items() if v}
    await RunRepository(repo.session).add_usage(request.run_id, usage)
    payer = Payer(request.run_id, request.conversation_id, request.owner, request.key_id)
    made = Charge(TITLE_CALL, call.provider, call.model, call.usage, utcnow())
    await charge(repo.session, payer, [made], prices)
    if stored:
        ids = {"conversation_id": request.conversation_id, "run_id": request.run_id}
        await enqueue(repo.session, request.owner, "conversation.titled", ids)
    return stored


class Titler:
    """This process's title tasks: started after replies, cancelled when it stops."""

    def __init__(
        self,
        settings: Settings,
        selector: ModelSelectionStrategy,
        repository: RepositoryFactory,
        reader: RepositoryFactory,
        prices: PriceTable,
    ) -> None:
        self._settings = settings
        self._prices = prices
        self._selector = selector
        self._repository = repository
        self._reader = reader
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
                await self._within_budget(request)  # a stalled database is timed out too
                call = await self._ask(request)
            if not title_from(call.text):
                raise ValueError("the model answered no title")
            async with self._repository(None) as repo:
                stored = await store_title(repo, request, call, self._prices)
            metrics.title_made("stored" if stored else "taken")
        except BudgetExceeded as exc:  # no call made: a later reply's title may be
            log.info("no title for conversation %s: %s", request.conversation_id, exc)
            metrics.title_made("over_budget")
        except Exception as exc:  # never the run's failure: logged and counted
            log.warning(
                "no title for conversation %s: %s: %s",
                request.conversation_id,
                type(exc).__name__,
                str(exc)[:200],
            )
            metrics.title_made("failed")

    async def _within_budget(self, request: TitleRequest) -> None:
        """``BudgetExceeded`` when the run's key has spent its budget (its run is charged by
        now: the title follows the run's stored ending)."""
        key = request.key
        if key is None or not key.limits.budgeted:
            return
        async with self._reader(None) as repo:
            await check_run_budget(repo.session, key, 0, 0.0, utcnow())

    async def _ask(self, request: TitleRequest) -> TitleCall:
        adapter, model = self._model(request)
        messages = [AgentMessage(INSTRUCTION), TextMessage(request.first_user_text, role=Role.USER)]
        options = RequestOptions(model=model, max_output_tokens=32)
        response = await adapter.send_message(messages, [], options)
        return TitleCall(response.text, adapter.name, model, response.usage)

    def _model(self, request: TitleRequest) -> tuple[ModelAdapter, str]:
        provider = self._settings.title_provider or request.provider
        model = self._settings.title_model
        if model is None and provider == request.provider:
            model = request.model
        return self._selector.select_model(provider, model)
