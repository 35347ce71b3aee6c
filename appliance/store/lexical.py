"""The lexical channel of recall: BM25 over each memory's terms, kept in DuckDB (core SQL).

Terms are produced by the caller (the language packs' ``search_terms``: stemmed words, CJK
bigrams and characters) from a memory's text and its stored values, and written in the record's
own transaction, so the index is never behind the memories. A query scores, in one statement,
only the postings of its terms within the session: Okapi BM25 (k1 and b fitted for recall, 1.2
and 0.75 by default) and the "+1" idf that never goes negative. Each posting carries its
memory's length, so a query reads the postings alone; ``cluster`` rewrites them in (session, term) order as they grow, so that a
query reads the stretches of its session and terms instead of every block.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import date, timedelta
from typing import NamedTuple

from .database import Connection, Database, first_row, grown_since_rewrite, put_meta, session_clause

__all__ = ["LexicalRepo", "Unindexed", "K1", "B"]

K1 = 1.2
B = 0.75
# Postings are rewritten in (session, term) order once there are this many, and again each time
# they have doubled since (synthetic 100k memories, 930k postings: query p50 18 → 11 ms).
CLUSTER_MIN = 200_000
CLUSTER_GROWTH = 2.0
# rows read past ``k`` so that memories tied at the cut are ordered before it is made
_TIE_MARGIN = 16
_CLUSTERED_AT = "lexical_clustered_at"  # meta key: postings when last rewritten
_TERMS_VERSION = "lexical_terms_version"  # meta key: the term function the postings were made with
_POSTING_COLUMNS = (
    ("memory_id", "VARCHAR"),
    ("session_id", "VARCHAR"),
    ("term", "VARCHAR"),
    ("tf", "INTEGER"),
    ("length", "INTEGER"),
)
_DOC_COLUMNS = (("memory_id", "VARCHAR"), ("session_id", "VARCHAR"), ("length", "INTEGER"))
_ON_DOC_CONFLICT = "ON CONFLICT (memory_id) DO UPDATE SET session_id = excluded.session_id, length = excluded.length"
_PUT_DOC = "INSERT INTO lexical_docs VALUES (?, ?, ?) " + _ON_DOC_CONFLICT
_TERMS_DDL = (
    "CREATE TABLE {name} (memory_id VARCHAR NOT NULL, session_id VARCHAR NOT NULL, term VARCHAR NOT NULL, "
    "tf INTEGER NOT NULL, length INTEGER)"
)
_TERMS_INDEXES = (
    "CREATE INDEX lexical_terms_term ON lexical_terms (session_id, term)",
    "CREATE INDEX lexical_terms_memory ON lexical_terms (memory_id)",
)


class Unindexed(NamedTuple):
    memory_id: str
    session_id: str
    text: str
    attributes: str  # JSON
    entity_id: str | None
    text_before: str | None


class LexicalRepo:
    def __init__(self, db: Database) -> None:
        self.db = db

    def index(self, con: Connection, memory_id: str, session: str, terms: Sequence[str]) -> None:
        """Write one memory's postings inside the caller's transaction."""
        counts = Counter(terms)
        if counts:  # one statement over two arrays: executemany costs ~30 ms for a long message
            con.execute(
                "INSERT INTO lexical_terms (memory_id, session_id, term, tf, length) "
                "SELECT ?, ?, unnest(?::VARCHAR[]), unnest(?::INTEGER[]), ?",
                [memory_id, session, list(counts), list(counts.values()), len(terms)],
            )
        con.execute(_PUT_DOC, [memory_id, session, len(terms)])

    def index_many(self, con: Connection, docs: Sequence[tuple[str, str, Sequence[str]]]) -> None:
        """Many memories' postings, set-wise (imports, backfill)."""
        postings = [(m, s, t, n, len(terms)) for m, s, terms in docs for t, n in Counter(terms).items()]
        lengths = [(m, s, len(terms)) for m, s, terms in docs]
        if postings:
            self.db.bulk(
                con,
                "INSERT INTO lexical_terms (memory_id, session_id, term, tf, length) SELECT * FROM {frame}",
                _POSTING_COLUMNS,
                postings,
            )
        if lengths:
            self.db.bulk(
                con,
                "INSERT INTO lexical_docs (memory_id, session_id, length) SELECT * FROM {frame} " + _ON_DOC_CONFLICT,
                _DOC_COLUMNS,
                lengths,
            )

    def delete(self, con: Connection, memory_ids: Sequence[str]) -> None:
        ids = list(memory_ids)
        con.execute("DELETE FROM lexical_terms WHERE memory_id IN (SELECT unnest(?::VARCHAR[]))", [ids])
        con.execute("DELETE FROM lexical_docs WHERE memory_id IN (SELECT unnest(?::VARCHAR[]))", [ids])

    def missing(self, within: timedelta, limit: int = 1000) -> list[Unindexed]:
        """Memories not indexed yet, each with the text of the memory told just before it in its
        session when that is at most ``within`` earlier (a turn is indexed with the words of the
        turn before, as when it was recorded)."""
        # "before" as ``record`` sees it: by message time, then by when it was stored (a session
        # whose turns all carry the session's date keeps its order)
        rows = self.db.fetch(
            "WITH todo AS (SELECT m.memory_id FROM memories m "
            "WHERE NOT EXISTS (SELECT 1 FROM lexical_docs d WHERE d.memory_id = m.memory_id) LIMIT ?), "
            "ordered AS (SELECT memory_id, session_id, source_text, attributes, entity_id, ts, "
            "lag(source_text) OVER w AS before, lag(ts) OVER w AS before_ts FROM memories "
            "WHERE session_id IN (SELECT m.session_id FROM memories m JOIN todo USING (memory_id)) "
            "WINDOW w AS (PARTITION BY session_id ORDER BY ts, recorded_at NULLS FIRST, memory_id)) "
            "SELECT o.memory_id, o.session_id, o.source_text, o.attributes, o.entity_id, "
            "CASE WHEN o.before_ts >= o.ts - ? THEN o.before END "
            "FROM ordered o JOIN todo USING (memory_id)",
            [limit, within],
        )
        return [Unindexed(r[0], r[1], r[2], r[3] or "{}", r[4], r[5]) for r in rows]

    def written_with(self) -> str | None:
        """The version of the term function the index was written with (None: before versions)."""
        row = self.db.fetch("SELECT value FROM meta WHERE key = ?", [_TERMS_VERSION])
        return row[0][0] if row else None

    def empty(self) -> bool:
        return not self.db.fetch("SELECT 1 FROM lexical_docs LIMIT 1")

    def mark_written_with(self, version: str) -> None:
        with self.db.transaction() as con:
            put_meta(con, _TERMS_VERSION, version)

    def clear(self) -> None:
        """Drop every posting (the index is rebuilt from the memories: a new term function)."""
        with self.db.transaction() as con:
            con.execute("DELETE FROM lexical_terms")
            con.execute("DELETE FROM lexical_docs")
            con.execute("DELETE FROM meta WHERE key IN (?, ?)", [_TERMS_VERSION, _CLUSTERED_AT])

    def search(
        self,
        session: str | None,
        terms: Sequence[str],
        k: int = 20,
        days: tuple[date, date] | None = None,
        k1: float = K1,
        b: float = B,
    ) -> list[tuple[str, float]]:
        """The ``k`` best (memory_id, BM25 score) for ``terms`` in ``session`` (all when None),
        among the memories about a day in ``days`` when given; ``k1`` and ``b`` as fitted for
        recall (``recall/weights.json``)."""
        unique = sorted(set(terms))
        if not unique:
            return []
        where_t, params_t = session_clause("t.session_id", session)
        if days is not None:
            where_t += " AND t.memory_id IN (SELECT memory_id FROM memory_days WHERE first_day <= ? AND last_day >= ?)"
            params_t = [*params_t, days[1], days[0]]
        where_d, params_d = session_clause("session_id", session, "WHERE")
        sql = (
            # the statistics are computed once (MATERIALIZED): inlined, PostgreSQL re-ran the
            # session's count and average for every posting (100k memories: 4 s a query)
            "WITH q AS (SELECT unnest(?::VARCHAR[]) AS term), "
            "stats AS MATERIALIZED (SELECT CAST(count(*) AS FLOAT8) AS n, CAST(avg(length) AS FLOAT8) AS avgdl "
            f"FROM lexical_docs{where_d}), "
            "hits AS (SELECT t.memory_id, t.term, t.tf, t.length FROM lexical_terms t JOIN q ON t.term = q.term "
            f"WHERE TRUE{where_t}), "
            "df AS MATERIALIZED (SELECT term, CAST(count(*) AS FLOAT8) AS df FROM hits GROUP BY term) "
            "SELECT h.memory_id, sum(ln(1 + (s.n - df.df + 0.5) / (df.df + 0.5)) * h.tf * (? + 1) / "
            "(h.tf + ? * (1 - ? + ? * h.length / s.avgdl))) AS score "
            "FROM hits h JOIN df USING (term), stats s "
            "GROUP BY h.memory_id ORDER BY score DESC, h.memory_id LIMIT ?"
        )
        rows = self.db.fetch(sql, [unique, *params_d, *params_t, k1, k1, b, b, k + _TIE_MARGIN])
        return self._in_told_order([(r[0], float(r[1])) for r in rows])[:k]

    def _in_told_order(self, scored: list[tuple[str, float]]) -> list[tuple[str, float]]:
        """Equal scores in the order the memories were told (message time, then stored time): the
        SQL breaks them by memory id, a random uuid, so two recordings of one conversation ranked
        its tied turns differently (a gold turn at rank 5 in one, 6 in the other)."""
        rounded = [round(score, 9) for _, score in scored]
        if len(set(rounded)) == len(rounded):
            return scored
        times = Counter(rounded)
        tied = [m for (m, _), r in zip(scored, rounded) if times[r] > 1]
        told = {
            mid: (ts, recorded)
            for mid, ts, recorded in self.db.fetch(
                "SELECT memory_id, ts, recorded_at FROM memories WHERE memory_id IN (SELECT unnest(?::VARCHAR[]))",
                [tied],
            )
        }
        order = sorted(range(len(scored)), key=lambda i: (-rounded[i], told.get(scored[i][0], ()), scored[i][0]))
        return [scored[i] for i in order]

    def needs_clustering(self) -> bool:
        return grown_since_rewrite(self.db, self.postings(), CLUSTER_MIN, CLUSTER_GROWTH, _CLUSTERED_AT)

    def postings(self) -> int:
        return int(self.db.fetch("SELECT count(*) FROM lexical_terms")[0][0])

    def cluster(self) -> None:
        """Rewrite the postings in (session, term) order, in one transaction. DuckDB skips the
        blocks whose min/max exclude a filter's value: appended in write order, every block holds
        every session and most terms, and a query reads them all; clustered, it reads its own
        stretch. Postings written later land after them, unclustered, until the next rewrite."""
        with self.db.transaction() as con:
            con.execute("DROP TABLE IF EXISTS lexical_terms_clustered")
            con.execute(_TERMS_DDL.format(name="lexical_terms_clustered"))
            con.execute(
                "INSERT INTO lexical_terms_clustered SELECT memory_id, session_id, term, tf, length "
                "FROM lexical_terms ORDER BY session_id, term"
            )
            n = first_row(con.execute("SELECT count(*) FROM lexical_terms_clustered"))
            con.execute("DROP TABLE lexical_terms")
            con.execute("ALTER TABLE lexical_terms_clustered RENAME TO lexical_terms")
            for ddl in _TERMS_INDEXES:
                con.execute(ddl)
            put_meta(con, _CLUSTERED_AT, str(n[0] if n else 0))

    def held(self, session: str | None, terms: Sequence[str]) -> bool:
        """Whether one memory of ``session`` holds every one of ``terms``."""
        return bool(self.holding(session, terms, limit=1))

    def holding(self, session: str | None, terms: Sequence[str], limit: int = 30) -> list[str]:
        """The ids of up to ``limit`` memories of ``session`` that hold every one of ``terms``."""
        unique = sorted(set(terms))
        if not unique:
            return []
        where, params = session_clause("session_id", session)
        rows = self.db.fetch(
            f"SELECT memory_id FROM lexical_terms WHERE term IN (SELECT unnest(?::VARCHAR[])){where} "
            "GROUP BY memory_id HAVING count(DISTINCT term) = ? ORDER BY memory_id LIMIT ?",
            [unique, *params, len(unique), limit],
        )
        return [r[0] for r in rows]

    def document_frequency(self, session: str | None, terms: Sequence[str]) -> dict[str, int]:
        """How many of the session's memories hold each term (0 for absent terms)."""
        unique = sorted(set(terms))
        if not unique:
            return {}
        where, params = session_clause("session_id", session)
        rows = self.db.fetch(
            f"SELECT term, count(*) FROM lexical_terms WHERE term IN (SELECT unnest(?::VARCHAR[])){where} GROUP BY term",
            [unique, *params],
        )
        found = {r[0]: int(r[1]) for r in rows}
        return {t: found.get(t, 0) for t in unique}
