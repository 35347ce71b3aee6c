"""The days each memory is about: its message day and every date it states.

Recall's time filters ("last week", "in May 2023", "上个月", "昨天") select memories by these
ranges, so a message written on May 26 about "May 17" is found for "what did I do on May 17?".
Rows are written in the record's own transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date

from .database import Connection, Database, session_clause

__all__ = ["DaysRepo"]


class DaysRepo:
    def __init__(self, db: Database) -> None:
        self.db = db

    def put(self, con: Connection, memory_id: str, session: str, days: Sequence[tuple[date, date, str]]) -> None:
        if days:
            con.executemany(
                "INSERT INTO memory_days VALUES (?, ?, ?, ?, ?)",
                [[memory_id, session, a, b, src] for a, b, src in days],
            )

    def delete(self, con: Connection, memory_ids: Sequence[str]) -> None:
        con.execute("DELETE FROM memory_days WHERE memory_id IN (SELECT unnest(?::VARCHAR[]))", [list(memory_ids)])

    def within(self, session: str | None, first: date, last: date, limit: int = 200) -> list[str]:
        """Memories about a day in [first, last], the ones stating such a date first, newest first."""
        where, params = session_clause("d.session_id", session)
        rows = self.db.fetch(
            "SELECT d.memory_id, max(CASE WHEN d.source <> 'message' THEN 1 ELSE 0 END) AS stated, max(m.ts) AS ts "
            "FROM memory_days d JOIN memories m ON m.memory_id = d.memory_id "
            f"WHERE d.first_day <= ? AND d.last_day >= ?{where} GROUP BY d.memory_id ORDER BY stated DESC, ts DESC LIMIT ?",
            [last, first, *params, limit],
        )
        return [r[0] for r in rows]

    def missing(self, limit: int = 1000) -> list[tuple[str, str]]:
        """(memory_id, session_id) of memories without any day (older files: backfilled)."""
        return [
            (r[0], r[1])
            for r in self.db.fetch(
                "SELECT m.memory_id, m.session_id FROM memories m "
                "WHERE NOT EXISTS (SELECT 1 FROM memory_days d WHERE d.memory_id = m.memory_id) LIMIT ?",
                [limit],
            )
        ]
