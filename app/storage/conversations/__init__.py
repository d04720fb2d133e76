"""Conversations and their messages in SQL: ``ConversationRepository``, one class made of one
module per job — ``reading`` (records, messages, pages), ``changes`` (create, deltas, a run's
start, clear, rewind, delete), ``lease`` (the run lease), ``run_appends`` (what runs store, many
at once) — over ``base`` (the row lock, the version bump) and ``statements`` (built once).

Imports SQLAlchemy, app.domain and app.storage; never commits.
"""

from app.storage.conversations.repository import ConversationRepository
from app.storage.conversations.run_appends import RunAppend

__all__ = ["ConversationRepository", "RunAppend"]
