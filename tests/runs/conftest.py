"""Fixtures of the runs-layer tests: Services on the test database with a scripted adapter.

Each "process" is a Services of its own (its own writer, live runs and listener) on the same
database, so cross-process behaviour is tested without starting servers.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from app.conversations.service import ConversationService
from app.domain import AgentMessage, MessageList, TextMessage
from app.runs.config import ConfigContext
from app.runs.events import RunEvent
from app.runs.follow import Resume, RunReader
from app.runs.live import LiveRun
from app.runs.runner import RunService
from app.runs.server_tools import builtin_tools
from app.runs.services import Services
from app.settings import Settings
from app.storage import Database
from tests.domain.domain_support import ScriptedAdapter, selector

OWNER = "owner"
MakeServices = Callable[..., Awaitable[Services]]


@pytest.fixture
async def make_services(database_url: str) -> AsyncIterator[MakeServices]:
    """Build (and start) a Services with a scripted adapter; all stopped after the test."""
    made: list[Services] = []

    async def make(adapter: ScriptedAdapter, **overrides: Any) -> Services:
        settings = Settings(database_url=database_url, **overrides)
        configs = ConfigContext(selector(adapter), builtin_tools(), tool_timeout=5)
        services = Services(settings, Database(database_url), configs)
        await services.start()
        made.append(services)
        return services

    yield make
    for services in made:
        await services.stop()


async def new_conversation(services: Services, *texts: str, **config: Any) -> str:
    """A conversation of OWNER holding a system prompt and these user messages."""
    messages = MessageList([AgentMessage("Be brief."), *(TextMessage(t) for t in texts)])
    async with services.repository(OWNER) as repo:
        record = await repo.create(messages, dict(config), {})
    return record.id


async def start_run(services: Services, conversation_id: str, **kwargs: Any) -> LiveRun:
    return await RunService(services, OWNER).start(conversation_id, **kwargs)


async def all_events(run: LiveRun) -> list[RunEvent]:
    """Every event of a live run, until ``done``."""
    return [e async for batch in run.follow(0) for e in batch]


async def stored_events(services: Services, conversation_id: str, run_id: str) -> list[RunEvent]:
    """The run's events as a reader on ``services`` gets them from position 0."""
    reader = RunReader(services, OWNER)
    resume = await reader.resume(conversation_id, f"{run_id}:0")
    assert resume is not None
    return [e async for batch in reader.follow(resume) for e in batch]


def conversations(services: Services) -> ConversationService:
    return ConversationService(services, OWNER)


__all__ = ["Resume"]
