"""Store operations that change which entity a memory is about: merges and corrections.

Part of ``MemoryStore`` (mixed in). Every operation is one transaction and leaves a row in
``entity_merges``, so a merge is never silent: the panel, ``appliance db merges`` and the
HTTP API list them. History rows of a merged-away entity stay under its old id.
"""

from __future__ import annotations

import json
from typing import Any

import duckdb

from .memory import Entity
from .store_base import StoreParts, session_clause
from .store_base import now as _now

__all__ = ["ResolutionOps"]


class ResolutionOps(StoreParts):
    # --- lookups used by resolution -----------------------------------------------------
    def entity_ids_ending_with(self, session: str, etype: str, suffix: str) -> list[str]:
        """Stored ids of ``etype`` that end with ``suffix`` (and are longer than it)."""
        with self._lock:
            rows = self._con.execute(
                "SELECT entity_id FROM entities WHERE session_id = ? AND entity_type = ? "
                "AND ends_with(entity_id, ?) AND entity_id <> ? ORDER BY updated_at DESC LIMIT 10",
                [session, etype, suffix, suffix],
            ).fetchall()
        return [r[0] for r in rows]

    def partial_ids_of(self, session: str, etype: str, full_id: str) -> list[str]:
        """Ids stored as suffixes ("尾号2345") that ``full_id`` ends with."""
        with self._lock:
            rows = self._con.execute(
                "SELECT entity_id FROM partial_ids WHERE session_id = ? AND entity_type = ? "
                "AND ends_with(?, entity_id) AND entity_id <> ?",
                [session, etype, full_id, full_id],
            ).fetchall()
        return [r[0] for r in rows]

    def mark_partial_id(self, session: str, etype: str, eid: str) -> None:
        with self._tx() as con:
            con.execute("INSERT OR IGNORE INTO partial_ids VALUES (?, ?, ?)", [session, etype, eid])

    def entity_with_values(self, session: str, etype: str, values: dict[str, str]) -> str | None:
        """The newest entity of ``etype`` whose attributes equal ``values`` (all of them)."""
        where = " AND ".join("json_extract_string(attributes, ?) = ?" for _ in values)
        params: list[Any] = [session, etype]
        for k, v in values.items():
            params += [f'$."{k}"', str(v)]
        with self._lock:
            row = self._con.execute(
                f"SELECT entity_id FROM entities WHERE session_id = ? AND entity_type = ? AND {where} "
                "ORDER BY updated_at DESC LIMIT 1",
                params,
            ).fetchone()
        return row[0] if row else None

    # --- merging ----------------------------------------------------------------------------
    def merge_entities(
        self, session: str, etype: str, from_id: str, to_id: str, rule: str, memory_id: str | None = None
    ) -> bool:
        """Fold entity ``from_id`` into ``to_id``: its memories, relationships and values move;
        the newer value of each attribute wins. Returns False when there was nothing to merge."""
        if from_id == to_id:
            return False
        with self._tx() as con:
            src = self._entity(con, session, etype, from_id)
            if src is None:
                return False
            self._move_links(con, session, etype, from_id, to_id, memory_id=None)
            dst = self._entity(con, session, etype, to_id)
            self._fold(con, session, etype, src, dst, to_id, memory_id)
            con.execute(
                "DELETE FROM entities WHERE session_id = ? AND entity_type = ? AND entity_id = ?",
                [session, etype, from_id],
            )
            con.execute(
                "DELETE FROM partial_ids WHERE session_id = ? AND entity_type = ? AND entity_id = ?",
                [session, etype, from_id],
            )
            self._log_merge(con, session, etype, from_id, to_id, rule, memory_id)
        return True

    def relink_record(
        self, memory_id: str, etype: str, old_id: str, new_id: str, by_memory: str, rule: str = "correction"
    ) -> bool:
        """Point one stored record at another entity ("not 12345, I meant 12354").

        The record's values move to ``new_id``; ``old_id`` disappears when no other memory
        cites it. Returns False when the record is not about ``old_id``."""
        with self._tx() as con:
            row = con.execute(
                "SELECT session_id, state, attributes, note FROM memories "
                "WHERE memory_id = ? AND entity_type = ? AND entity_id = ?",
                [memory_id, etype, old_id],
            ).fetchone()
            if row is None:
                return False
            session, state, attrs, note = row
            self._move_links(con, session, etype, old_id, new_id, memory_id=memory_id)
            note = ((note or "") + f" | corrected {etype} {old_id} → {new_id} by {by_memory[:8]}").strip(" |")
            con.execute("UPDATE memories SET note = ? WHERE memory_id = ?", [note, memory_id])
            values = {k: v for k, v in json.loads(attrs or "{}").items() if v is not None}
            dst = self._entity(con, session, etype, new_id)
            carried = Entity(type=etype, id=old_id, state=state, attributes=values, updated_at=_now())
            self._fold(con, session, etype, carried, dst, new_id, by_memory)
            still_cited = con.execute(
                "SELECT count(*) FROM memory_entities WHERE session_id = ? AND entity_type = ? AND entity_id = ?",
                [session, etype, old_id],
            ).fetchone()
            if not still_cited or not still_cited[0]:
                con.execute(
                    "DELETE FROM entities WHERE session_id = ? AND entity_type = ? AND entity_id = ?",
                    [session, etype, old_id],
                )
            self._log_merge(con, session, etype, old_id, new_id, rule, by_memory)
        return True

    def list_merges(self, session: str | None = None, limit: int = 200) -> list[dict[str, Any]]:
        where, params = session_clause("session_id", session, "WHERE")
        sql = f"SELECT session_id, entity_type, from_id, to_id, rule, memory_id, ts FROM entity_merges{where}"
        with self._lock:
            rows = self._con.execute(sql + " ORDER BY ts DESC LIMIT ?", [*params, limit]).fetchall()
        keys = ("session_id", "entity_type", "from_id", "to_id", "rule", "memory_id", "ts")
        return [dict(zip(keys, r)) for r in rows]

    # --- helpers (inside a transaction) -------------------------------------------------------
    def _move_links(
        self,
        con: duckdb.DuckDBPyConnection,
        session: str,
        etype: str,
        old: str,
        new: str,
        memory_id: str | None,
    ) -> None:
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
                f"INSERT OR IGNORE INTO relationships SELECT {columns} FROM relationships {match}",
                [new, session, etype, old, *extra],
            )
            con.execute(f"DELETE FROM relationships {match}", [session, etype, old, *extra])

    def _fold(
        self,
        con: duckdb.DuckDBPyConnection,
        session: str,
        etype: str,
        src: Entity,
        dst: Entity | None,
        to_id: str,
        memory_id: str | None,
    ) -> None:
        """Write ``src``'s values into entity ``to_id`` (created if missing), newer values winning."""
        now = _now()
        if dst is None:
            attrs, state, version = src.attributes, src.state, 1
            con.execute(
                "INSERT INTO entities VALUES (?, ?, ?, ?, ?, 1, ?, ?)",
                [session, etype, to_id, state, json.dumps(attrs, ensure_ascii=False), now, now],
            )
        else:
            src_newer = (src.updated_at or now) > (dst.updated_at or now)
            first, second = (dst, src) if src_newer else (src, dst)
            attrs = {**first.attributes, **second.attributes}
            state = second.state if second.state is not None else first.state
            version = dst.version + 1
            con.execute(
                "UPDATE entities SET state = ?, attributes = ?, version = ?, updated_at = ? "
                "WHERE session_id = ? AND entity_type = ? AND entity_id = ?",
                [state, json.dumps(attrs, ensure_ascii=False), version, now, session, etype, to_id],
            )
        con.execute(
            "INSERT INTO entity_history VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [session, etype, to_id, version, state, json.dumps(attrs, ensure_ascii=False), now, memory_id],
        )

    def _log_merge(
        self,
        con: duckdb.DuckDBPyConnection,
        session: str,
        etype: str,
        from_id: str,
        to_id: str,
        rule: str,
        memory_id: str | None,
    ) -> None:
        con.execute(
            "INSERT INTO entity_merges VALUES (?, ?, ?, ?, ?, ?, ?)",
            [session, etype, from_id, to_id, rule, memory_id, _now()],
        )
