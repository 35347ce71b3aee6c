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

from .database import Connection

__all__ = ["VectorsRepo", "ENCODER_TABLES"]

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
