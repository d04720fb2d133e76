"""The conversation use cases behind the non-streaming routes; each commits once.

May import the domain, storage and the runs layer (the process's ``Services``, ``Delta``, the
config rules, recovery). Inputs are plain values (no API schemas); outputs are
``ConversationView``s and domain objects.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from app.domain import (
    AgentMessage,
    Message,
    MessageList,
    MessageListDeserializationError,
    ReasoningMessage,
    TextMessage,
    ToolCallMessage,
    interrupt_passed_calls,
)
from app.runs.config import merge_patch
from app.runs.delta import Delta, config_update
from app.runs.errors import InvalidInput, NoActiveRun
from app.runs.recovery import recover, recovering
from app.runs.services import Services
from app.storage import (
    ConversationRecord,
    ConversationRepository,
    Filters,
    RunRepository,
    merge_document,
)

_TEXTS = (TextMessage, AgentMessage, ReasoningMessage)  # the messages whose text has a limit


@dataclass(frozen=True)
class ConversationView:
    """A stored conversation and its derived status (in a search, the text that matched)."""

    record: ConversationRecord
    snippet: str | None = None

    @property
    def status(self) -> Literal["idle", "running", "requires_action"]:
        if self.record.is_running():
            return "running"
        return "requires_action" if self.record.pending_tool_call_ids else "idle"

    @property
    def run_id(self) -> str | None:
        return self.record.lease_run_id if self.record.is_running() else None


@dataclass(frozen=True)
class Edit:
    """A PATCH of a conversation: ``set_title`` to ``title`` (None clears it), ``archived``
    (None: unchanged) and ``metadata``, a merge patch into the stored metadata (None:
    unchanged); ``clear_metadata`` empties it first (a PATCH's ``"metadata": null``)."""

    title: str | None = None
    set_title: bool = False
    archived: bool | None = None
    metadata: Mapping[str, Any] | None = None
    clear_metadata: bool = False

    def metadata_update(self) -> Callable[[dict[str, Any]], dict[str, Any]] | None:
        """What the stored metadata becomes (None: it stays as it is)."""
        patch, clear = self.metadata, self.clear_metadata
        if patch is None and not clear:
            return None
        return lambda stored: merge_document({} if clear else stored, patch or {})


class ConversationService:
    """Create, read, change and delete conversations for one owner."""

    def __init__(self, services: Services, owner: str) -> None:
        self.services = services
        self.owner = owner

    async def create(
        self,
        system_prompt: str | None,
        config_patch: Mapping[str, Any],
        metadata: Mapping[str, Any],
        *,
        document: Mapping[str, Any] | None = None,
        messages: Sequence[Message] = (),
    ) -> ConversationView:
        """A new conversation holding ``system_prompt`` first, then either the serialized
        ``document`` (checked here) or ``messages`` (checked by the caller, as a delta's are)."""
        loaded = self._imported(document) if document is not None else MessageList(list(messages))
        if system_prompt is not None and system_prompt.strip():
            loaded.insert(0, AgentMessage(system_prompt.strip()))
        config = merge_patch({}, config_patch)
        self.services.configs.check(config)
        async with self.services.repository(self.owner) as repo:
            record = await repo.create(loaded, config, dict(metadata))
        return ConversationView(record)

    def _imported(self, document: Mapping[str, Any]) -> MessageList:
        try:
            messages = MessageList.from_dict(document)
        except MessageListDeserializationError as exc:
            raise InvalidInput(("body", "messages"), str(exc)) from exc
        limit = self.services.settings.max_import_messages
        if len(messages) > limit:
            raise InvalidInput(
                ("body", "messages", "messages"), f"at most {limit} messages can be imported"
            )
        longest = self.services.settings.max_text_chars
        for i, message in enumerate(messages):
            if isinstance(message, _TEXTS) and len(message.text) > longest:
                raise InvalidInput(
                    ("body", "messages", "messages", i, "text"),
                    f"messages[{i}].text: {len(message.text)} characters; at most {longest}",
                )
            if isinstance(message, ToolCallMessage) and not (
                message.error is None or message.result is None
            ):
                raise InvalidInput(
                    ("body", "messages", "messages", i, "result"),
                    f"messages[{i}].result: must be null when the call has an error",
                )
        # A pending call the conversation has moved past waits for a result nobody will post:
        # interrupted, as a provider import makes it, or the conversation could never run.
        return MessageList(interrupt_passed_calls(list(messages)))

    async def get(self, conversation_id: str) -> ConversationView:
        async with self.services.reader(self.owner) as repo:
            return ConversationView(await repo.get(conversation_id))

    async def list(
        self, limit: int, cursor: str | None, filters: Filters | None = None
    ) -> tuple[list[ConversationView], str | None]:
        """A page of the owner's conversations that pass ``filters`` (default: those not
        archived), newest first; with a query, best match first, each with its snippet."""
        async with self.services.reader(self.owner) as repo:
            found, next_cursor = await repo.find(limit, cursor, filters)
        return [ConversationView(f.record, f.snippet) for f in found], next_cursor

    async def edit(
        self, conversation_id: str, edit: Edit, expected_version: int | None
    ) -> ConversationView:
        """Apply a merge patch of title, metadata and archived, one version up. Allowed while
        a run holds the conversation (it touches no message); a stale version changes nothing."""
        async with self.services.repository(self.owner) as repo:
            record = await repo.edit(
                conversation_id,
                title=edit.title,
                set_title=edit.set_title,
                archived=edit.archived,
                update_metadata=edit.metadata_update(),
                expected_version=expected_version,
            )
        return ConversationView(record)

    async def delete(self, conversation_id: str) -> None:
        await recovering(self.services, self.owner, lambda: self._delete(conversation_id))

    async def _delete(self, conversation_id: str) -> None:
        async with self.services.repository(self.owner) as repo:
            await repo.delete(conversation_id)

    async def apply_delta(
        self, conversation_id: str, delta: Delta, expected_version: int | None
    ) -> ConversationView:
        """Apply a delta bundle all or nothing; a stale ``expected_version`` changes nothing."""
        return ConversationView(
            await recovering(
                self.services,
                self.owner,
                lambda: self._apply_delta(conversation_id, delta, expected_version),
            )
        )

    async def _apply_delta(
        self, conversation_id: str, delta: Delta, expected_version: int | None
    ) -> ConversationRecord:
        async with self.services.repository(self.owner) as repo:
            record = await repo.get(conversation_id)
            return await apply_delta(repo, self.services, record, delta, expected_version)

    async def messages(self, conversation_id: str) -> MessageList:
        async with self.services.reader(self.owner) as repo:
            return await repo.load_messages(conversation_id)

    async def clear(self, conversation_id: str, expected_version: int | None) -> ConversationView:
        return ConversationView(
            await recovering(
                self.services, self.owner, lambda: self._clear(conversation_id, expected_version)
            )
        )

    async def _clear(
        self, conversation_id: str, expected_version: int | None
    ) -> ConversationRecord:
        async with self.services.repository(self.owner) as repo:
            return await repo.clear(conversation_id, expected_version)

    async def cancel(self, conversation_id: str) -> str:
        """Ask the running run to stop, here or in another process; return its id.

        The process running it stops it and stores its partial reply before letting go of the
        conversation. A run whose process died is ended here, as ``interrupted``."""
        async with self.services.repository(self.owner) as repo:
            record = await repo.get(conversation_id)
            run_id = record.lease_run_id
            if run_id is None:
                raise NoActiveRun(conversation_id)
            lease = self.services.settings.run_lease_seconds
            if not record.is_running() and await recover(
                repo, self.services.manager, lease, conversation_id
            ):
                return run_id  # its process died: ended here (else it is ours, stalled: alive)
            await RunRepository(repo.session).request_cancel(run_id)
        self.services.manager.stop(run_id, "cancel")
        return run_id


async def apply_delta(
    repo: ConversationRepository,
    services: Services,
    record: ConversationRecord,
    delta: Delta,
    expected_version: int | None,
) -> ConversationRecord:
    """Apply ``delta`` to the conversation of ``record`` in the repository's transaction."""
    update = config_update(services.configs, delta.config_patch)
    config = update(record.config) if update is not None else None
    return await repo.apply_delta(
        record.id,
        messages=delta.messages,
        tool_results=delta.outcomes(),
        config=config,
        expected_version=expected_version,
    )
