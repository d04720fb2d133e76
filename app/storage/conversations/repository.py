"""ConversationRepository: conversations and their messages in SQL, for the API and the runs.

Imports app.storage. It flushes and never commits: a use case commits once. Writers lock the
conversation row first, so concurrent writers queue, in any process. A repository is made for
one owner and every query it runs is scoped to that owner's conversations; ``owner=None`` is the
system's unscoped view, for code that acts for no caller.
"""

from __future__ import annotations

from app.storage.conversations.changes import Changing
from app.storage.conversations.editing import Editing
from app.storage.conversations.lease import Leasing
from app.storage.conversations.reading import Reading
from app.storage.conversations.run_appends import RunAppending
from app.storage.conversations.search import Searching


class ConversationRepository(Reading, Searching, Changing, Editing, Leasing, RunAppending):
    """Reads and changes conversations through one AsyncConnection, which the caller commits.

    Every change takes the conversation's row lock (``SELECT ... FOR UPDATE`` on PostgreSQL, the
    database write lock that ``Database`` sessions take up front on SQLite), checks, then writes;
    each change bumps ``version`` by one and sets ``updated_at``. When a StorageError is raised
    nothing has been written. Lease operations change neither ``version`` nor ``updated_at``.

    A write that meets the expired lease of another run raises LeaseExpired and ends nothing:
    recovering that run is the use case's own step (app/runs/recovery.py), in a transaction of
    its own, before it tries again.
    """
