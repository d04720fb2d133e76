"""The SQL of a search, one text per dialect (app/storage/conversations/search.py runs it).

Imports nothing. ``:terms`` is the query's words: space-separated on PostgreSQL (read by
``plainto_tsquery``, which knows no syntax), each double-quoted on SQLite (an FTS5 string
each, which knows none either). ``SEARCH`` gives each conversation that matches every word in
its title or in one of its text messages: its ``id``, its ``score`` (the best message's rank plus
twice the title's, times a million, as an integer: comparable exactly across pages) and
``best``, the index of its best-ranked message (NULL when only the title matched).
``SNIPPETS`` gives, for the conversations ``:ids``, each matching message's index and the text
around the words found.
"""

from __future__ import annotations

SEARCH = {
    "postgresql": """
WITH messages_hit AS MATERIALIZED (
    SELECT DISTINCT ON (m.conversation_id)
        m.conversation_id AS id,
        ts_rank(m.search, plainto_tsquery('simple', :terms)) AS rank,
        m.idx AS best
    FROM messages AS m
    WHERE m.search @@ plainto_tsquery('simple', :terms)
    ORDER BY m.conversation_id, 2 DESC, m.idx
),
titles_hit AS MATERIALIZED (
    SELECT c.id, 2 * ts_rank(c.title_search, plainto_tsquery('simple', :terms)) AS rank
    FROM conversations AS c
    WHERE c.title_search @@ plainto_tsquery('simple', :terms)
),
hits AS (
    SELECT id, rank, best FROM messages_hit
    UNION ALL SELECT id, rank, NULL FROM titles_hit
)
SELECT id, CAST(sum(rank) * 1000000 AS BIGINT) AS score, max(best) AS best
FROM hits GROUP BY id
""",
    "sqlite": """
WITH message_ranks AS MATERIALIZED (
    SELECT message_fts.rowid AS id, -bm25(message_fts) AS rank
    FROM message_fts WHERE message_fts MATCH :terms
),
title_ranks AS MATERIALIZED (
    SELECT title_fts.rowid AS id, -2 * bm25(title_fts) AS rank
    FROM title_fts WHERE title_fts MATCH :terms
),
hits AS (
    SELECT m.conversation_id AS id, max(r.rank) AS rank, m.idx AS best
    FROM message_ranks AS r JOIN messages AS m ON m.rowid = r.id
    GROUP BY m.conversation_id
    UNION ALL
    SELECT c.id, r.rank, NULL FROM title_ranks AS r JOIN conversations AS c ON c.rowid = r.id
)
SELECT id, CAST(sum(rank) * 1000000 AS INTEGER) AS score, max(best) AS best
FROM hits GROUP BY id
""",
}

SNIPPETS = {
    "postgresql": """
SELECT m.conversation_id, m.idx, ts_headline('simple', m.data::json ->> 'text',
    plainto_tsquery('simple', :terms),
    'MaxWords=24, MinWords=8, MaxFragments=1, StartSel="", StopSel="", FragmentDelimiter=" … "')
FROM messages AS m
WHERE m.conversation_id IN :ids AND m.search @@ plainto_tsquery('simple', :terms)
""",
    "sqlite": """
SELECT m.conversation_id, m.idx, snippet(message_fts, 0, '', '', '…', 24)
FROM message_fts JOIN messages AS m ON m.rowid = message_fts.rowid
WHERE message_fts MATCH :terms AND m.conversation_id IN :ids
""",
}
