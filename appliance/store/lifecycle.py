"""Store operations of the memory lifecycle: compaction, forgetting, schema migrations.

Each operation is one transaction:

* a summary record is written together with its links to the originals (``memory_links``);
* forgetting deletes only the ids a policy selected and logs id + policy (not the text) in
  ``forget_log``; entities stay — they are the consolidated state;
* a schema migration stores the before-image of every row it changes
  (``migration_before``), so ``revert_migration`` restores the exact previous rows.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from ..domain.records import SUMMARY_EVENT
from ..errors import StoreError
from .database import Connection, Database, first_row, session_clause
from .database import now as _now
from .lexical import LexicalRepo
from .vectors import VectorsRepo

__all__ = ["LifecycleRepo", "RecordFacts"]

# (memory_id, session_id, ts, status, confidence, event_type, entity_type, entity_id,
#  is_summary, session_ended, compacted, schema_id): what a forgetting policy looks at.
RecordFacts = tuple[Any, ...]

# A primary memory (alias m, link l) that is not a summary and that no summary covers yet;
# binds SUMMARY_EVENT.
_UNCOVERED = (
    "l.role = 'primary' AND m.event_type IS DISTINCT FROM ? "
    "AND NOT EXISTS (SELECT 1 FROM memory_links k WHERE k.memory_id = m.memory_id)"
)


class LifecycleRepo:
    def __init__(self, db: Database, vectors: VectorsRepo, lexical: LexicalRepo) -> None:
        self.db = db
        self.vectors = vectors
        self.lexical = lexical

    # --- compaction ---------------------------------------------------------------------
    def entities_to_compact(
        self, entity_type: str, min_records: int, session: str | None = None
    ) -> list[tuple[str, str, int]]:
        """(session, entity id, count) of entities with at least ``min_records`` memories
        that no summary covers yet (summaries themselves do not count)."""
        where, params = session_clause("l.session_id", session)
        sql = (
            "SELECT l.session_id, l.entity_id, count(*) FROM memory_entities l JOIN memories m ON m.memory_id = l.memory_id "
            f"WHERE l.entity_type = ?{where} AND {_UNCOVERED} "
            "GROUP BY l.session_id, l.entity_id HAVING count(*) >= ? ORDER BY count(*) DESC"
        )
        rows = self.db.fetch(sql, [entity_type, *params, SUMMARY_EVENT, min_records])
        return [(r[0], r[1], int(r[2])) for r in rows]

    def uncompacted_memories(self, session: str, entity_type: str, entity_id: str, limit: int = 200) -> list[str]:
        """Ids of an entity's primary memories not yet covered by a summary, oldest first."""
        rows = self.db.fetch(
            "SELECT m.memory_id FROM memory_entities l JOIN memories m ON m.memory_id = l.memory_id "
            f"WHERE l.session_id = ? AND l.entity_type = ? AND l.entity_id = ? AND {_UNCOVERED} "
            "ORDER BY m.ts LIMIT ?",
            [session, entity_type, entity_id, SUMMARY_EVENT, limit],
        )
        return [r[0] for r in rows]

    def summary_sources(self, summary_id: str) -> list[str]:
        rows = self.db.fetch("SELECT memory_id FROM memory_links WHERE summary_id = ? ORDER BY memory_id", [summary_id])
        return [r[0] for r in rows]

    def summaries_of(self, memory_id: str) -> list[str]:
        return [r[0] for r in self.db.fetch("SELECT summary_id FROM memory_links WHERE memory_id = ?", [memory_id])]

    # --- forgetting -----------------------------------------------------------------------
    def end_session(self, session: str) -> None:
        with self.db.transaction() as con:
            con.execute(
                "INSERT INTO ended_sessions VALUES (?, ?) ON CONFLICT (session_id) DO UPDATE SET ts = excluded.ts",
                [session, _now()],
            )

    def record_facts(self, session: str | None = None) -> list[RecordFacts]:
        """What a forgetting policy looks at, for every record (no text, no attributes)."""
        where, params = session_clause("m.session_id", session, "WHERE")
        sql = (
            "SELECT m.memory_id, m.session_id, m.ts, m.status, m.confidence, m.event_type, m.entity_type, "
            "m.entity_id, m.event_type IS NOT DISTINCT FROM ?, "
            "EXISTS (SELECT 1 FROM ended_sessions s WHERE s.session_id = m.session_id), "
            "EXISTS (SELECT 1 FROM memory_links k WHERE k.memory_id = m.memory_id), m.schema_id "
            f"FROM memories m{where} ORDER BY m.ts"
        )
        return [tuple(r) for r in self.db.fetch(sql, [SUMMARY_EVENT, *params])]

    def forget(self, chosen: Sequence[tuple[str, str]]) -> int:
        """Delete the (memory_id, policy) records a policy chose; log each deletion."""
        if not chosen:
            return 0
        with self.db.transaction() as con:
            con.execute("CREATE TEMP TABLE IF NOT EXISTS _forget (memory_id VARCHAR, policy VARCHAR)")
            con.execute("DELETE FROM _forget")
            con.executemany("INSERT INTO _forget VALUES (?, ?)", [list(c) for c in chosen])
            con.execute(
                "INSERT INTO forget_log SELECT m.memory_id, m.session_id, f.policy, m.event_type, m.entity_type, "
                "m.entity_id, m.ts, ? FROM memories m JOIN _forget f ON f.memory_id = m.memory_id",
                [_now()],
            )
            for table in ("memory_entities", "relationships"):
                con.execute(f"DELETE FROM {table} WHERE memory_id IN (SELECT memory_id FROM _forget)")
            self.vectors.delete(con, [c[0] for c in chosen])
            self.lexical.delete(con, [c[0] for c in chosen])
            con.execute("DELETE FROM memory_days WHERE memory_id IN (SELECT memory_id FROM _forget)")
            con.execute(
                "DELETE FROM memory_links WHERE memory_id IN (SELECT memory_id FROM _forget) "
                "OR summary_id IN (SELECT memory_id FROM _forget)"
            )
            gone = con.execute(
                "DELETE FROM memories WHERE memory_id IN (SELECT memory_id FROM _forget) RETURNING memory_id"
            ).fetchall()
            con.execute("DELETE FROM _forget")
        return len(gone)

    def forget_log(self, limit: int = 200) -> list[dict[str, Any]]:
        keys = ("memory_id", "session_id", "policy", "event_type", "entity_type", "entity_id", "recorded_at", "ts")
        rows = self.db.fetch(f"SELECT {', '.join(keys)} FROM forget_log ORDER BY ts DESC LIMIT ?", [limit])
        return [dict(zip(keys, r)) for r in rows]

    # --- schema migrations ------------------------------------------------------------------
    def apply_migration(
        self,
        migration_id: str,
        from_schema_id: str,
        to_schema_id: str,
        spec: dict[str, Any],
        memories: Sequence[tuple[str, dict[str, Any], dict[str, Any]]],
        entities: Sequence[tuple[tuple[str, str, str], dict[str, Any], dict[str, Any]]],
        then: Callable[[Connection], None] | None = None,
    ) -> int:
        """Rewrite records and entities; keep each before-image for ``revert_migration``.

        ``memories``: (memory_id, before, after) with fields schema_id, event_type, state,
        attributes; ``entities``: ((session, type, id), before, after) with state, attributes;
        ``then`` runs in the same transaction (the memory's stored schema switches with its rows)."""
        with self.db.transaction() as con:
            con.execute(
                "INSERT INTO schema_migrations VALUES (?, ?, ?, ?, ?, ?, NULL)",
                [
                    migration_id,
                    from_schema_id,
                    to_schema_id,
                    json.dumps(spec, ensure_ascii=False),
                    len(memories),
                    _now(),
                ],
            )
            for mid, before, after in memories:
                con.execute(
                    "INSERT INTO migration_before VALUES (?, 'memory', ?, ?)",
                    [migration_id, json.dumps(mid), json.dumps(before, ensure_ascii=False)],
                )
                self._write_memory_fields(con, mid, after)
            for key, before, after in entities:
                con.execute(
                    "INSERT INTO migration_before VALUES (?, 'entity', ?, ?)",
                    [migration_id, json.dumps(list(key), ensure_ascii=False), json.dumps(before, ensure_ascii=False)],
                )
                self._write_entity_fields(con, key, after)
            if then is not None:
                then(con)
        return len(memories)

    def revert_migration(self, migration_id: str, then: Callable[[Connection], None] | None = None) -> int:
        """Put back every row a migration changed, exactly as it was; returns records restored.
        ``then`` runs in the same transaction (the stored schema switches back with the rows)."""
        with self.db.transaction() as con:
            row = first_row(
                con.execute("SELECT reverted_at FROM schema_migrations WHERE migration_id = ?", [migration_id])
            )
            if row is None:
                raise StoreError(f"no migration {migration_id!r}", hint="see `appliance schema migrations`")
            if row[0] is not None:
                raise StoreError(f"migration {migration_id} was already reverted at {row[0]}")
            n = 0
            for kind, key, before in con.execute(
                "SELECT kind, row_key, before FROM migration_before WHERE migration_id = ?", [migration_id]
            ).fetchall():
                if kind == "memory":
                    self._write_memory_fields(con, json.loads(key), json.loads(before))
                    n += 1
                else:
                    self._write_entity_fields(con, tuple(json.loads(key)), json.loads(before))
            con.execute("UPDATE schema_migrations SET reverted_at = ? WHERE migration_id = ?", [_now(), migration_id])
            if then is not None:
                then(con)
        return n

    def list_migrations(self) -> list[dict[str, Any]]:
        keys = ("migration_id", "from_schema_id", "to_schema_id", "spec", "records", "applied_at", "reverted_at")
        out = [
            dict(zip(keys, r))
            for r in self.db.fetch(f"SELECT {', '.join(keys)} FROM schema_migrations ORDER BY applied_at DESC")
        ]
        for m in out:
            m["spec"] = json.loads(m["spec"])
        return out

    def memories_not_under(
        self, schema_ids: Sequence[str]
    ) -> list[tuple[str, str, str | None, str | None, str | None, str]]:
        """(memory_id, schema_id, event_type, entity_type, state, attributes JSON) of records
        written under none of ``schema_ids``."""
        marks = ", ".join("?" for _ in schema_ids) or "NULL"
        return [
            tuple(r)  # type: ignore[misc]
            for r in self.db.fetch(
                "SELECT memory_id, schema_id, event_type, entity_type, state, attributes FROM memories "
                f"WHERE schema_id NOT IN ({marks}) ORDER BY ts",
                list(schema_ids),
            )
        ]

    @staticmethod
    def _write_memory_fields(con: Connection, memory_id: str, fields: dict[str, Any]) -> None:
        con.execute(
            "UPDATE memories SET schema_id = ?, event_type = ?, state = ?, attributes = ? WHERE memory_id = ?",
            [
                fields["schema_id"],
                fields["event_type"],
                fields["state"],
                json.dumps(fields["attributes"], ensure_ascii=False),
                memory_id,
            ],
        )

    @staticmethod
    def _write_entity_fields(con: Connection, key: tuple[Any, ...], fields: dict[str, Any]) -> None:
        con.execute(
            "UPDATE entities SET state = ?, attributes = ? WHERE session_id = ? AND entity_type = ? AND entity_id = ?",
            [fields["state"], json.dumps(fields["attributes"], ensure_ascii=False), *key],
        )
