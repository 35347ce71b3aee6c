"""Sentence vectors for the semantic side of recall: one table per encoder, fixed-size arrays.

Each encoder writes its own table (``FLOAT[dim]``, core ``array_cosine_similarity``, no
extension), so switching encoders never mixes vectors of different models; a record without a
vector of the active encoder is embedded by ``backfill``. Table names come from the fixed
registry below, never from input.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date

import duckdb

from .database import Database, session_clause

__all__ = ["VectorsRepo", "ENCODER_TABLES"]

# encoder name → (table, dimension); memory_vectors is the v3 table of all-MiniLM-L6-v2.
ENCODER_TABLES: dict[str, tuple[str, int]] = {
    "minilm": ("memory_vectors", 384),
    "use3": ("vectors_use3", 512),
    "hashing": ("vectors_hashing", 384),  # the FakeEmbedder of the unit tests
}


class VectorsRepo:
    def __init__(self, db: Database, encoder: str = "use3") -> None:
        if encoder not in ENCODER_TABLES:
            raise ValueError(f"unknown encoder {encoder!r}")
        self.db = db
        self.encoder = encoder
        self.table, self.dim = ENCODER_TABLES[encoder]
        if not db.read_only:
            with db.lock:
                db.con.execute(
                    f"CREATE TABLE IF NOT EXISTS {self.table} (memory_id VARCHAR PRIMARY KEY, "
                    f"session_id VARCHAR NOT NULL, vec FLOAT[{self.dim}] NOT NULL)"
                )

    def tables(self) -> list[str]:
        """Every vector table present in the file (deletions clear all of them)."""
        names = {t for t, _ in ENCODER_TABLES.values()}
        rows = self.db.fetch(
            "SELECT table_name FROM duckdb_tables() WHERE table_name IN (SELECT unnest(?))", [list(names)]
        )
        return sorted(r[0] for r in rows)

    def put(self, con: duckdb.DuckDBPyConnection, rows: Sequence[tuple[str, str, Sequence[float]]]) -> None:
        """Store (memory_id, session_id, vector) rows inside the caller's transaction."""
        if rows:
            con.executemany(
                f"INSERT OR REPLACE INTO {self.table} VALUES (?, ?, ?::FLOAT[{self.dim}])",
                [[m, s, [float(x) for x in v]] for m, s, v in rows],
            )

    def delete(self, con: duckdb.DuckDBPyConnection, memory_ids: Sequence[str]) -> None:
        for table in self.tables():
            con.execute(f"DELETE FROM {table} WHERE memory_id IN (SELECT unnest(?))", [list(memory_ids)])

    def missing(self, limit: int = 1000) -> list[tuple[str, str, str]]:
        """(memory_id, session_id, source_text) of records without a vector of this encoder."""
        return [
            (r[0], r[1], r[2])
            for r in self.db.fetch(
                "SELECT m.memory_id, m.session_id, m.source_text FROM memories m "
                f"WHERE NOT EXISTS (SELECT 1 FROM {self.table} v WHERE v.memory_id = m.memory_id) LIMIT ?",
                [limit],
            )
        ]

    def search(
        self,
        session: str | None,
        vec: Sequence[float],
        k: int = 5,
        min_score: float = 0.0,
        days: tuple[date, date] | None = None,
    ) -> list[tuple[str, float]]:
        """The ``k`` (memory_id, cosine) pairs closest to ``vec`` (about a day in ``days``)."""
        where, params = session_clause("v.session_id", session, "WHERE")
        if days is not None:
            where = (where or " WHERE TRUE ") + (
                " AND v.memory_id IN (SELECT memory_id FROM memory_days WHERE first_day <= ? AND last_day >= ?) "
            )
            params = [*params, days[1], days[0]]
        sql = (
            f"SELECT v.memory_id, array_cosine_similarity(v.vec, ?::FLOAT[{self.dim}]) AS score "
            f"FROM {self.table} v{where} ORDER BY score DESC LIMIT ?"
        )
        rows = self.db.fetch(sql, [[float(x) for x in vec], *params, k])
        return [(m, float(sc)) for m, sc in rows if sc is not None and sc >= min_score]
