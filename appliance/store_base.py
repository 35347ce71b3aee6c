"""What the store's modules share: the clock, the optional-session clause, and the seams
(``_tx``, ``_entity``, ``add_record``, ``records_where``) that ``MemoryStore`` provides to
the operations mixed in from ``store_resolution`` and ``store_lifecycle``."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import duckdb

from .memory import Entity, MemoryRecord

__all__ = ["StoreParts", "now", "session_clause"]


def now() -> datetime:
    return datetime.now(UTC)


def session_clause(column: str, session: str | None, keyword: str = "AND") -> tuple[str, list[Any]]:
    """`` {keyword} {column} = ? `` and its parameter, or nothing when no session is given."""
    return (f" {keyword} {column} = ? ", [session]) if session else ("", [])


class StoreParts:
    _con: duckdb.DuckDBPyConnection
    _lock: threading.RLock

    # provided by MemoryStore (first in its MRO)
    def _tx(self) -> Any:
        raise NotImplementedError

    def _entity(self, con: duckdb.DuckDBPyConnection, session: str, etype: str, eid: str) -> Entity | None:
        raise NotImplementedError

    def add_record(self, record: MemoryRecord, summary_of: Sequence[str] = ()) -> MemoryRecord:
        raise NotImplementedError

    def records_where(
        self, where: str, params: Sequence[Any], limit: int = 100, order: str = "m.ts DESC"
    ) -> list[MemoryRecord]:
        raise NotImplementedError
