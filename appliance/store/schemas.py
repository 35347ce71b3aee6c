"""The schemas a memory holds: the ones it is read with now, and every version it held.

A memory is self-describing: every edge opens it with the schemas stored here, so a command
line that names another schema cannot silently read or write it with the wrong one. A row
whose ``position`` is set is loaded (0 is the default schema); rows without one are history.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from .database import Connection, Database
from .database import now as _now

__all__ = ["SchemasRepo", "StoredSchema"]

# (schema_id, domain, the schema in its file form)
StoredSchema = tuple[str, str, dict[str, Any]]


class SchemasRepo:
    def __init__(self, db: Database) -> None:
        self.db = db

    def _exists(self) -> bool:
        # a file of an older version opened read-only has not had the table added
        return "memory_schemas" in self.db.table_names()

    def current(self) -> list[StoredSchema]:
        """The schemas the memory is read with, the default first."""
        if not self._exists():
            return []
        rows = self.db.fetch(
            "SELECT schema_id, domain, body FROM memory_schemas WHERE position IS NOT NULL ORDER BY position"
        )
        return [(sid, domain, json.loads(body)) for sid, domain, body in rows]

    def history(self) -> list[dict[str, Any]]:
        """Every schema version the memory held, oldest first (``loaded`` marks the current)."""
        if not self._exists():
            return []
        rows = self.db.fetch(
            "SELECT schema_id, domain, body, stored_at, position FROM memory_schemas ORDER BY stored_at, schema_id"
        )
        return [
            {
                "schema_id": sid,
                "domain": domain,
                "schema_version": json.loads(body).get("schema_version"),
                "stored_at": at,
                "loaded": pos is not None,
            }
            for sid, domain, body, at, pos in rows
        ]

    def hold(self, schemas: Sequence[StoredSchema], con: Connection | None = None) -> None:
        """Make ``schemas`` the loaded ones, in order; earlier versions stay as history.
        ``con``: join a transaction already open (a migration switches schema atomically)."""
        if con is None:
            with self.db.transaction() as own:
                self._hold(own, schemas)
        else:
            self._hold(con, schemas)

    @staticmethod
    def _hold(con: Connection, schemas: Sequence[StoredSchema]) -> None:
        con.execute("UPDATE memory_schemas SET position = NULL WHERE position IS NOT NULL")
        at = _now()
        for i, (sid, domain, body) in enumerate(schemas):
            con.execute(
                "INSERT INTO memory_schemas VALUES (?, ?, ?, ?, ?) ON CONFLICT (schema_id) DO UPDATE SET position = ?",
                [sid, domain, json.dumps(body, ensure_ascii=False, sort_keys=True), at, i, i],
            )
