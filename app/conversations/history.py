"""History use cases (issue 14): fork, rewind, provider-format import, pages, repaired context.

May import the domain, storage, the runs layer and the conversation use cases. Inputs are
plain values (no API schemas); each use case commits once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from app.conversations.service import ConversationView
from app.domain import (
    AgentMessage,
    Message,
    MessageList,
    ProviderFormatError,
    RepairedMessage,
    context_within,
    from_anthropic_format,
    from_openai_format,
    repair_with_sources,
)
from app.domain.attachments import Attachment, RunAttachments, attachments_of
from app.domain.context import count_message_tokens
from app.domain.inline_files import InlineFiles, with_stored_files
from app.runs.config import merge_patch
from app.runs.errors import InvalidInput
from app.runs.files import OwnerFiles, attachment_of
from app.runs.recovery import recovering
from app.runs.services import Services
from app.storage import ConversationRecord, StorageError

ProviderFormat = Literal["openai", "anthropic"]


@dataclass(frozen=True)
class Page:
    """Messages ``start`` onwards, and where the next page starts after (None: no more)."""

    messages: list[Message]
    start: int
    total: int
    next_after: int | None


@dataclass(frozen=True)
class RepairedContext:
    """What a run would send: the repaired window, with stored indices and token counts."""

    messages: list[RepairedMessage]
    """Sources are stored indices."""
    changed: list[bool]
    """Whether each message differs from the one stored message it was made from."""
    token_counts: list[int]
    dropped: int
    exact: bool
    budget: int | None


class HistoryService:
    """Reshape one owner's conversations: fork, rewind, import, page, context."""

    def __init__(self, services: Services, owner: str) -> None:
        self.services = services
        self.owner = owner

    async def fork(self, conversation_id: str, keep: int | None) -> ConversationView:
        """A new conversation with the first ``keep`` messages (all by default), the same
        config and system prompt, and ``metadata.forked_from``."""
        async with self.services.reader(self.owner) as repo:
            record = await repo.get(conversation_id)
            messages = list(await repo.load_messages(conversation_id))
        count = len(messages) if keep is None else _checked_keep(keep, len(messages))
        leading = next(
            (i for i, m in enumerate(messages) if not isinstance(m, AgentMessage)), len(messages)
        )
        kept = MessageList(messages[: max(count, leading)])  # the system prompt always comes
        metadata = {**record.metadata, "forked_from": {"id": record.id, "keep": count}}
        async with self.services.repository(self.owner) as repo:
            created = await repo.create(kept, dict(record.config), metadata)
        return ConversationView(created)

    async def rewind(
        self, conversation_id: str, keep: int, expected_version: int | None
    ) -> ConversationView:
        """Drop the messages after the first ``keep``."""

        async def attempt() -> ConversationRecord:
            async with self.services.repository(self.owner) as repo:
                try:
                    return await repo.rewind(conversation_id, keep, expected_version)
                except ValueError as exc:  # checked under the row lock, against the current count
                    raise InvalidInput(("body", "keep"), str(exc)) from exc

        return ConversationView(await recovering(self.services, self.owner, attempt))

    async def page(self, conversation_id: str, after: int | None, limit: int) -> Page:
        """Up to ``limit`` messages after index ``after`` (from the first when None)."""
        start = 0 if after is None else after + 1
        async with self.services.reader(self.owner) as repo:
            messages, total = await repo.load_page(conversation_id, start, limit)
        end = start + len(messages)
        return Page(messages, start, total, end - 1 if end < total else None)

    async def import_document(
        self,
        format: ProviderFormat,
        document: Mapping[str, Any],
        config_patch: Mapping[str, Any],
        metadata: Mapping[str, Any],
    ) -> ConversationView:
        """A new conversation from a provider's own request shape."""
        longest = self.services.settings.max_text_chars
        inline = InlineFiles()
        try:  # in a worker thread: an import may be tens of MB, the event loop serves the rest
            if format == "openai":
                messages = await asyncio.to_thread(
                    from_openai_format, document.get("messages"), longest, inline
                )
            else:
                messages = await asyncio.to_thread(
                    from_anthropic_format,
                    document.get("system"),
                    document.get("messages"),
                    longest,
                    inline,
                )
        except ProviderFormatError as exc:
            raise InvalidInput(("body", *exc.loc), str(exc)) from exc
        self._check_size(messages)
        config = merge_patch({}, config_patch)
        self.services.configs.check(config)
        messages = with_stored_files(messages, await self._store_inline(inline))
        async with self.services.repository(self.owner) as repo:
            record = await repo.create(MessageList(messages), config, dict(metadata))
        return ConversationView(record)

    async def _store_inline(self, inline: InlineFiles) -> dict[str, Attachment]:
        """Store an import's inline images and documents; their references by placeholder.
        The store checks each again (kind, size): a refusal is a 422."""
        files = OwnerFiles(self.services.files, self.owner)
        stored: dict[str, Attachment] = {}
        for placeholder, file in inline.files.items():
            try:
                record = await files.store.put(
                    self.owner,
                    file.data,
                    file.name,
                    file.media_type,
                    purpose="attachment",
                    from_message=True,
                )
            except StorageError as exc:
                raise InvalidInput(("body", "messages"), f"{file.name}: {exc}") from exc
            stored[placeholder] = attachment_of(record)
        return stored

    async def file_bytes(self, messages: Sequence[Message]) -> dict[str, bytes]:
        """The bytes of the messages' attachments that can still be read, by file id (an
        export inlines them; one that cannot be read is exported as a note)."""
        files = RunAttachments(OwnerFiles(self.services.files, self.owner))
        return await files.load(attachments_of(messages))

    def _check_size(self, messages: Sequence[Message]) -> None:
        limit = self.services.settings.max_import_messages
        if len(messages) > limit:
            raise InvalidInput(("body", "messages"), f"at most {limit} messages can be imported")

    async def context(self, conversation_id: str, max_tokens: int | None) -> RepairedContext:
        """The window a run would send within the budget, repaired as the run repairs it for
        its provider (reasoning of other providers, or cut short, is left out)."""
        async with self.services.reader(self.owner) as repo:
            record = await repo.get(conversation_id)
            messages = list(await repo.load_messages(conversation_id))
        config = self.services.configs.build(record.config)
        budget = max_tokens if max_tokens is not None else config.context_max_tokens
        counter, exact = self.services.configs.token_counter(config)
        window = context_within(messages, budget, counter, config.context_trim_to)
        provider = self.services.configs.provider_name(config)
        repaired = [
            RepairedMessage(r.message, tuple(window.indices[i] for i in r.sources))
            for r in repair_with_sources(window.messages, provider)
        ]
        counts = [count_message_tokens(r.message, counter) for r in repaired]
        changed = [len(r.sources) > 1 or messages[r.sources[0]] != r.message for r in repaired]
        return RepairedContext(repaired, changed, counts, window.dropped, exact, budget)


def _checked_keep(keep: int, count: int) -> int:
    if not 0 <= keep <= count:
        raise InvalidInput(("body", "keep"), f"keep must be between 0 and {count}, not {keep}")
    return keep
