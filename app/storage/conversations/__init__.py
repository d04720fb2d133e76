"""Conversations and their messages in SQL: ``ConversationRepository``, one class made of one
module per job — ``reading`` (records, messages, pages), ``changes`` (create, deltas, a run's
start, clear, rewind, delete), ``editing`` (title, metadata, archived), ``search``
(filters and full-text search), ``lease`` (the run lease), ``run_appends`` (what runs store, many
at once) — over ``base`` (the row lock, the version bump) and ``statements`` (built once).

Imports SQLAlchemy, app.domain and app.storage; never commits.
"""

from app.storage.conversations.editing import merge_document
from app.storage.conversations.repository import ConversationRepository
from app.storage.conversations.run_appends import RunAppend
from app.storage.conversations.search import Filters, Found

__all__ = ["ConversationRepository", "Filters", "Found", "RunAppend", "merge_document"]
