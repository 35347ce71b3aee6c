"""Sentence vectors for the semantic side of recall: one table per encoder, whichever engine.

Each encoder writes its own table, so switching encoders never mixes vectors of different
models; a record without a vector of the active encoder is embedded by ``backfill``. Table
names come from the fixed registry below, never from input. The index differs by engine:
an inverted file in core SQL on DuckDB (``duckdb/vectors.py``), pgvector's HNSW on PostgreSQL
(``postgres/vectors.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date
from typing import Protocol

from .database import Connection, Database

__all__ = ["VectorsRepo", "VectorTable", "ENCODER_TABLES"]

# encoder name → (table, dimension); memory_vectors is the v3 table of all-MiniLM-L6-v2.
ENCODER_TABLES: dict[str, tuple[str, int]] = {
    "minilm": ("memory_vectors", 384),
    "use3": ("vectors_use3", 512),
    "e5": ("vectors_e5", 384),
    "hashing": ("vectors_hashing", 384),  # the FakeEmbedder of the unit tests
}


class VectorsRepo(Protocol):
    encoder: str
    table: str
    dim: int

    def tables(self) -> list[str]: ...

    def put(self, con: Connection, rows: Sequence[tuple[str, str, Sequence[float]]]) -> None: ...

    def delete(self, con: Connection, memory_ids: Sequence[str]) -> None: ...

    def missing(self, limit: int = 1000) -> list[tuple[str, str, str]]: ...

    def count(self) -> int: ...

    def needs_training(self) -> bool: ...

    def train(self, seed: int = 0) -> int: ...

    def search(
        self,
        session: str | None,
        vec: Sequence[float],
        k: int = 5,
        min_score: float = 0.0,
        days: tuple[date, date] | None = None,
    ) -> list[tuple[str, float]]: ...


class VectorTable:
    """What both engines' vector tables do alike: which tables exist, deleting a memory's
    vectors, the memories still without one, the count."""

    def __init__(self, db: Database, encoder: str) -> None:
        self.db = db
        self.encoder = encoder
        self.table, self.dim = ENCODER_TABLES[encoder]

    def tables(self) -> list[str]:
        """Every vector table present (deletions clear all of them)."""
        return sorted({t for t, _ in ENCODER_TABLES.values()} & self.db.table_names())

    def delete(self, con: Connection, memory_ids: Sequence[str]) -> None:
        for table in self.tables():
            con.execute(f"DELETE FROM {table} WHERE memory_id IN (SELECT unnest(?::VARCHAR[]))", [list(memory_ids)])

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

    def count(self) -> int:
        row = self.db.fetch_one(f"SELECT count(*) FROM {self.table}")
        return int(row[0]) if row else 0
