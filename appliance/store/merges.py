"""Changes to which entity a memory is about: suffix ids, merges and corrections.

Every merge or correction leaves a row in ``entity_merges``, so it is never silent (the panel,
``appliance db merges`` and the HTTP API list them). History rows of a merged-away entity stay
under its old id. Values move by the one merge rule (``entities.merge_values``).
"""

from __future__ import annotations

import json
from typing import Any

from .database import Connection, Database, first_row, now, session_clause
from .entities import EntitiesRepo, Values

__all__ = ["MergesRepo"]


class MergesRepo:
    def __init__(self, db: Database, entities: EntitiesRepo) -> None:
        self.db = db
        self.entities = entities

    # --- lookups used by resolution ------------------------------------------------------
    def partial_ids_of(self, session: str, etype: str, full_id: str) -> list[str]:
        """Ids stored as suffixes ("尾号2345") that ``full_id`` ends with."""
        rows = self.db.fetch(
            "SELECT entity_id FROM partial_ids WHERE session_id = ? AND entity_type = ? "
            "AND right(?, length(entity_id)) = entity_id AND entity_id <> ?",
            [session, etype, full_id, full_id],
        )
        return [r[0] for r in rows]

    def recent(self, session: str | None = None, limit: int = 200) -> list[dict[str, Any]]:
        where, params = session_clause("session_id", session, "WHERE")
        sql = f"SELECT session_id, entity_type, from_id, to_id, rule, memory_id, ts FROM entity_merges{where}"
        rows = self.db.fetch(sql + " ORDER BY ts DESC LIMIT ?", [*params, limit])
        keys = ("session_id", "entity_type", "from_id", "to_id", "rule", "memory_id", "ts")
        return [dict(zip(keys, r)) for r in rows]

    # --- inside a transaction ----------------------------------------------------------------
    def mark_partial(self, con: Connection, session: str, etype: str, eid: str) -> None:
        con.execute("INSERT INTO partial_ids VALUES (?, ?, ?) ON CONFLICT DO NOTHING", [session, etype, eid])

    def merge(
        self,
        con: Connection,
        session: str,
        etype: str,
        from_id: str,
        to_id: str,
        rule: str,
        memory_id: str | None,
    ) -> bool:
        """Fold entity ``from_id`` into ``to_id``: its memories, relationships and values move.
        Returns False when there was nothing to merge."""
        if from_id == to_id:
            return False
        src = self.entities.read(con, session, etype, from_id)
        if src is None:
            return False
        self._move_links(con, session, etype, from_id, to_id, memory_id=None)
        self.entities.upsert(con, session, etype, to_id, Values(src.state, src.attributes, src.as_of), memory_id)
        self.entities.delete(con, session, etype, from_id)
        con.execute(
            "DELETE FROM partial_ids WHERE session_id = ? AND entity_type = ? AND entity_id = ?",
            [session, etype, from_id],
        )
        self._log(con, session, etype, from_id, to_id, rule, memory_id)
        return True

    def relink(
        self,
        con: Connection,
        memory_id: str,
        etype: str,
        old_id: str,
        new_id: str,
        by_memory: str,
        rule: str = "correction",
    ) -> bool:
        """Point one stored record at another entity ("not 12345, I meant 12354").

        The record's values move to ``new_id``; ``old_id`` disappears when no other memory
        cites it. Returns False when the record is not about ``old_id``."""
        row = first_row(
            con.execute(
                "SELECT session_id, state, attributes, note, ts FROM memories "
                "WHERE memory_id = ? AND entity_type = ? AND entity_id = ?",
                [memory_id, etype, old_id],
            )
        )
        if row is None:
            return False
        session, state, attrs, note, ts = row
        self._move_links(con, session, etype, old_id, new_id, memory_id=memory_id)
        note = ((note or "") + f" | corrected {etype} {old_id} → {new_id} by {by_memory[:8]}").strip(" |")
        con.execute("UPDATE memories SET note = ? WHERE memory_id = ?", [note, memory_id])
        self.entities.upsert(con, session, etype, new_id, Values(state, json.loads(attrs or "{}"), ts), by_memory)
        still_cited = first_row(
            con.execute(
                "SELECT count(*) FROM memory_entities WHERE session_id = ? AND entity_type = ? AND entity_id = ?",
                [session, etype, old_id],
            )
        )
        if not still_cited or not still_cited[0]:
            self.entities.delete(con, session, etype, old_id)
        self._log(con, session, etype, old_id, new_id, rule, by_memory)
        return True

    @staticmethod
    def _move_links(con: Connection, session: str, etype: str, old: str, new: str, memory_id: str | None) -> None:
        """Re-point memory links, primary ids and relationships from ``old`` to ``new``
        (only those of ``memory_id`` when given)."""
        only = " AND memory_id = ?" if memory_id else ""
        extra = [memory_id] if memory_id else []
        con.execute(
            "UPDATE memory_entities SET entity_id = ? WHERE session_id = ? AND entity_type = ? AND entity_id = ?"
            + only,
            [new, session, etype, old, *extra],
        )
        con.execute(
            "UPDATE memories SET entity_id = ? WHERE session_id = ? AND entity_type = ? AND entity_id = ?" + only,
            [new, session, etype, old, *extra],
        )
        moved = {
            "source": "session_id, rel_type, source_type, ?, target_type, target_id, memory_id, created_at",
            "target": "session_id, rel_type, source_type, source_id, target_type, ?, memory_id, created_at",
        }
        for end, columns in moved.items():
            match = f"WHERE session_id = ? AND {end}_type = ? AND {end}_id = ?" + only
            con.execute(
                f"INSERT INTO relationships SELECT {columns} FROM relationships {match} ON CONFLICT DO NOTHING",
                [new, session, etype, old, *extra],
            )
            con.execute(f"DELETE FROM relationships {match}", [session, etype, old, *extra])

    @staticmethod
    def _log(
        con: Connection,
        session: str,
        etype: str,
        from_id: str,
        to_id: str,
        rule: str,
        memory_id: str | None,
    ) -> None:
        con.execute(
            "INSERT INTO entity_merges VALUES (?, ?, ?, ?, ?, ?, ?)",
            [session, etype, from_id, to_id, rule, memory_id, now()],
        )
