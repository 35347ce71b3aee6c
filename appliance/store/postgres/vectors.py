"""Sentence vectors on PostgreSQL: pgvector's ``vector(dim)`` with an HNSW index (cosine).

Every query filters by session. A session of fewer than ``EXACT_MAX`` vectors is compared with
each of them (exact, through the session index: ~10 ms for 2k). A larger one is searched through
the HNSW index: PostgreSQL's planner would still pick the exact path (100k memories in 10
sessions: 58 ms a query), so the session test is written so that no b-tree serves it and
sequential scans are off for that query; the scan is iterative
(``hnsw.iterative_scan = relaxed_order``: it goes on until ``k`` rows pass the filter), the rows
are ordered again by exact distance, and a scan that found fewer than ``k`` (a session too thin
for the scan's budget) is answered exactly instead.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import date

import numpy as np

from ..database import Connection, Database, session_clause
from ..vectors import VectorTable
from .migrations import SCHEMA_LOCK

__all__ = ["PgVectors", "vector_text", "EXACT_MAX"]

EXACT_MAX = 5_000  # vectors of one session below which a query compares with every one


def vector_text(vec: Sequence[float] | np.ndarray) -> str:
    """pgvector's text form of a vector."""
    return json.dumps([float(x) for x in vec])


class PgVectors(VectorTable):
    def __init__(self, db: Database, encoder: str = "use3") -> None:
        super().__init__(db, encoder)
        if not db.read_only and self.table not in db.table_names():
            with db.transaction() as con:
                con.execute("SELECT pg_advisory_xact_lock(?)", [SCHEMA_LOCK])
                con.execute(
                    f"CREATE TABLE IF NOT EXISTS {self.table} (memory_id VARCHAR PRIMARY KEY, "
                    f"session_id VARCHAR NOT NULL, vec vector({self.dim}) NOT NULL)"
                )
                con.execute(f"CREATE INDEX IF NOT EXISTS {self.table}_session ON {self.table} (session_id)")
                con.execute(
                    f"CREATE INDEX IF NOT EXISTS {self.table}_hnsw ON {self.table} USING hnsw (vec vector_cosine_ops)"
                )

    def put(self, con: Connection, rows: Sequence[tuple[str, str, Sequence[float]]]) -> None:
        """Store (memory_id, session_id, vector) rows inside the caller's transaction."""
        latest = list({m: (m, s, v) for m, s, v in rows}.values())  # one statement: the last write of an id wins
        if not latest:
            return
        wrong = next((np.shape(v) for _, _, v in latest if np.shape(v) != (self.dim,)), None)
        if wrong is not None:
            raise ValueError(f"{self.encoder} vectors have {self.dim} dimensions, got one of shape {wrong}")
        self.db.bulk(
            con,
            f"INSERT INTO {self.table} (memory_id, session_id, vec) SELECT * FROM {{frame}} "
            "ON CONFLICT (memory_id) DO UPDATE SET session_id = excluded.session_id, vec = excluded.vec",
            (("memory_id", "VARCHAR"), ("session_id", "VARCHAR"), ("vec", f"vector({self.dim})")),
            [(m, s, vector_text(v)) for m, s, v in latest],
        )

    def needs_training(self) -> bool:
        return False  # HNSW grows with the table: nothing to retrain

    def train(self, seed: int = 0) -> int:
        return 0

    def search(
        self,
        session: str | None,
        vec: Sequence[float],
        k: int = 5,
        min_score: float = 0.0,
        days: tuple[date, date] | None = None,
    ) -> list[tuple[str, float]]:
        """The ``k`` (memory_id, cosine) pairs closest to ``vec`` (about a day in ``days``)."""
        query = vector_text(np.asarray(vec, dtype=np.float32))
        with self.db.reading() as con:
            rows = None
            if self._large(con, session):
                con.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
                con.execute("SET LOCAL enable_seqscan = off")
                rows = self._nearest(con, query, session, k, days, indexed=False)
                if len(rows) < k:  # the scan's budget ran out before k of the session's vectors
                    rows = None
                con.execute("RESET enable_seqscan")
            if rows is None:
                rows = self._nearest(con, query, session, k, days, indexed=True)
        return [(m, float(sc)) for m, sc in rows if sc is not None and sc >= min_score]

    def _large(self, con: Connection, session: str | None) -> bool:
        """Whether the session holds ``EXACT_MAX`` vectors or more (counted no further)."""
        where, params = session_clause("session_id", session, "WHERE")
        row = con.execute(
            f"SELECT count(*) FROM (SELECT 1 FROM {self.table}{where} LIMIT ?) s", [*params, EXACT_MAX]
        ).fetchall()
        return int(row[0][0]) >= EXACT_MAX

    def _nearest(
        self, con: Connection, query: str, session: str | None, k: int, days: tuple[date, date] | None, indexed: bool
    ) -> list[tuple[str, float]]:
        # "session_id || ''" is the same test that no b-tree serves: the HNSW scan filters it
        column = "v.session_id" if indexed else "(v.session_id || '')"
        where, params = session_clause(column, session, "WHERE")
        where = where or " WHERE TRUE "
        if days is not None:
            where += " AND v.memory_id IN (SELECT memory_id FROM memory_days WHERE first_day <= ? AND last_day >= ?) "
            params = [*params, days[1], days[0]]
        return [
            (r[0], r[1])
            for r in con.execute(
                f"SELECT memory_id, 1 - distance AS score FROM (SELECT v.memory_id, v.vec <=> ?::vector AS distance "
                f"FROM {self.table} v{where} ORDER BY distance LIMIT ?) hits ORDER BY distance",
                [query, *params, k],
            ).fetchall()
        ]
