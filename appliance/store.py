"""MemoryStore: every DuckDB statement of the appliance lives here.

Why it is shaped this way:

* One transaction per record: the memory row, its entity upserts, history rows and
  relationships commit together or not at all. DuckDB's WAL makes a committed record
  survive a SIGKILL; an uncommitted one disappears whole (no orphan relationships).
* Optimistic locking: ``entities.version`` increments on every change. ``update_entity``
  takes the version the caller read and refuses (``StaleUpdateError``) if it moved;
  internal merges re-read and retry, so concurrent writers never lose an update.
* One writer: DuckDB lets one process write a file. In-process writers are serialised by
  a lock; a second process gets ``StoreLockedError`` with a clear hint.
* Migrations run on open (``meta.db_version``); the file is never silently recreated.
* Extensions are never auto-installed (that would download): only built-ins (json, parquet).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import duckdb

from .errors import CorruptStoreError, StaleUpdateError, StoreError, StoreLockedError
from .memory import Entity, MemoryRecord, Relationship
from .store_base import now as _now
from .store_base import session_clause
from .store_lifecycle import LifecycleOps
from .store_resolution import ResolutionOps

__all__ = ["MemoryStore", "DB_VERSION"]

DB_VERSION = 4
MAX_ATTEMPTS = 5

MIGRATIONS: dict[int, list[str]] = {
    1: [
        """CREATE TABLE IF NOT EXISTS memories (
            memory_id VARCHAR PRIMARY KEY, session_id VARCHAR NOT NULL, ts TIMESTAMPTZ NOT NULL,
            schema_id VARCHAR NOT NULL, status VARCHAR NOT NULL, confidence DOUBLE NOT NULL,
            source_text VARCHAR NOT NULL, event_type VARCHAR, entity_type VARCHAR,
            entity_id VARCHAR, state VARCHAR, attributes JSON, raw_output VARCHAR, note VARCHAR)""",
        """CREATE TABLE IF NOT EXISTS entities (
            session_id VARCHAR NOT NULL, entity_type VARCHAR NOT NULL, entity_id VARCHAR NOT NULL,
            state VARCHAR, attributes JSON NOT NULL, version INTEGER NOT NULL,
            created_at TIMESTAMPTZ NOT NULL, updated_at TIMESTAMPTZ NOT NULL,
            PRIMARY KEY (session_id, entity_type, entity_id))""",
        """CREATE TABLE IF NOT EXISTS entity_history (
            session_id VARCHAR NOT NULL, entity_type VARCHAR NOT NULL, entity_id VARCHAR NOT NULL,
            version INTEGER NOT NULL, state VARCHAR, attributes JSON NOT NULL,
            valid_from TIMESTAMPTZ NOT NULL, memory_id VARCHAR)""",
        """CREATE TABLE IF NOT EXISTS relationships (
            session_id VARCHAR NOT NULL, rel_type VARCHAR NOT NULL,
            source_type VARCHAR NOT NULL, source_id VARCHAR NOT NULL,
            target_type VARCHAR NOT NULL, target_id VARCHAR NOT NULL,
            memory_id VARCHAR, created_at TIMESTAMPTZ NOT NULL,
            PRIMARY KEY (session_id, rel_type, source_type, source_id, target_type, target_id))""",
        """CREATE TABLE IF NOT EXISTS memory_entities (
            memory_id VARCHAR NOT NULL, session_id VARCHAR NOT NULL, entity_type VARCHAR NOT NULL,
            entity_id VARCHAR NOT NULL, role VARCHAR NOT NULL)""",
        "CREATE INDEX IF NOT EXISTS memories_session ON memories (session_id, ts)",
        "CREATE INDEX IF NOT EXISTS memory_entities_entity ON memory_entities (session_id, entity_type, entity_id)",
        "CREATE INDEX IF NOT EXISTS memory_entities_memory ON memory_entities (memory_id)",
    ],
    # v2: reading a record's relationships was a full scan of the relationships table.
    2: ["CREATE INDEX IF NOT EXISTS relationships_memory ON relationships (memory_id)"],
    # v3: sentence vectors for the semantic side of hybrid recall (core array functions only).
    3: [
        "CREATE TABLE IF NOT EXISTS memory_vectors (memory_id VARCHAR PRIMARY KEY, session_id VARCHAR NOT NULL, "
        "vec FLOAT[384] NOT NULL)"
    ],
    # v4: lifecycle — visible merges, suffix-only ids, compaction links, forgetting log,
    # and the journal that makes schema migrations reversible.
    4: [
        "CREATE TABLE IF NOT EXISTS entity_merges (session_id VARCHAR NOT NULL, entity_type VARCHAR NOT NULL, "
        "from_id VARCHAR NOT NULL, to_id VARCHAR NOT NULL, rule VARCHAR NOT NULL, memory_id VARCHAR, "
        "ts TIMESTAMPTZ NOT NULL)",
        "CREATE TABLE IF NOT EXISTS partial_ids (session_id VARCHAR NOT NULL, entity_type VARCHAR NOT NULL, "
        "entity_id VARCHAR NOT NULL, PRIMARY KEY (session_id, entity_type, entity_id))",
        "CREATE TABLE IF NOT EXISTS memory_links (summary_id VARCHAR NOT NULL, memory_id VARCHAR NOT NULL, "
        "PRIMARY KEY (summary_id, memory_id))",
        "CREATE INDEX IF NOT EXISTS memory_links_memory ON memory_links (memory_id)",
        "CREATE TABLE IF NOT EXISTS ended_sessions (session_id VARCHAR PRIMARY KEY, ts TIMESTAMPTZ NOT NULL)",
        "CREATE TABLE IF NOT EXISTS forget_log (memory_id VARCHAR NOT NULL, session_id VARCHAR NOT NULL, "
        "policy VARCHAR NOT NULL, event_type VARCHAR, entity_type VARCHAR, entity_id VARCHAR, "
        "recorded_at TIMESTAMPTZ, ts TIMESTAMPTZ NOT NULL)",
        "CREATE TABLE IF NOT EXISTS schema_migrations (migration_id VARCHAR PRIMARY KEY, "
        "from_schema_id VARCHAR NOT NULL, to_schema_id VARCHAR NOT NULL, spec JSON NOT NULL, "
        "records INTEGER NOT NULL, applied_at TIMESTAMPTZ NOT NULL, reverted_at TIMESTAMPTZ)",
        "CREATE TABLE IF NOT EXISTS migration_before (migration_id VARCHAR NOT NULL, kind VARCHAR NOT NULL, "
        "row_key JSON NOT NULL, before JSON NOT NULL)",
    ],
}


class MemoryStore(ResolutionOps, LifecycleOps):
    """Records, entities and relationships in one DuckDB file (or ``:memory:``).

    Merges/corrections (``store_resolution``) and compaction, forgetting and schema
    migrations (``store_lifecycle``) are mixed in from their own modules."""

    def __init__(self, path: str | Path, read_only: bool = False) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        config: dict[str, str | bool | int | float | list[str]] = {"autoinstall_known_extensions": False}
        try:
            self._con = duckdb.connect(self.path, read_only=read_only, config=config)
        except duckdb.IOException as exc:
            text = str(exc)
            if "lock" in text.lower():
                raise StoreLockedError(
                    f"database {self.path} is in use by another process: {text.splitlines()[0][:200]}"
                ) from None
            raise CorruptStoreError(f"cannot open database {self.path}: {text[:300]}") from None
        except duckdb.Error as exc:
            raise CorruptStoreError(f"cannot open database {self.path}: {str(exc)[:300]}") from None
        self._lock = threading.RLock()
        self.read_only = read_only
        if not read_only:
            self._migrate()
        self._check()

    # --- lifecycle --------------------------------------------------------------------
    def _migrate(self) -> None:
        with self._lock:
            self._con.execute("CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
            row = self._con.execute("SELECT value FROM meta WHERE key = 'db_version'").fetchone()
            current = int(row[0]) if row else 0
            if current > DB_VERSION:
                raise StoreError(
                    f"database version {current} is newer than this appliance ({DB_VERSION})",
                    hint="upgrade the appliance",
                )
            for version in range(current + 1, DB_VERSION + 1):
                self._con.execute("BEGIN TRANSACTION")
                try:
                    for stmt in MIGRATIONS[version]:
                        self._con.execute(stmt)
                    self._con.execute("INSERT OR REPLACE INTO meta VALUES ('db_version', ?)", [str(version)])
                    self._con.execute("COMMIT")
                except Exception:
                    self._con.execute("ROLLBACK")
                    raise

    def _check(self) -> None:
        try:
            self._con.execute("SELECT count(*) FROM memories").fetchone()
        except duckdb.Error as exc:
            raise CorruptStoreError(f"{self.path} is not an appliance database: {str(exc)[:200]}") from None

    def close(self) -> None:
        with self._lock:
            self._con.close()

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- writing ----------------------------------------------------------------------
    def _tx(self) -> _Transaction:
        if self.read_only:
            raise StoreError("the store is open read-only")
        return _Transaction(self)

    def add_record(self, record: MemoryRecord, summary_of: Sequence[str] = ()) -> MemoryRecord:
        """Store a record with its entity upserts and relationships, atomically.

        ``summary_of``: ids of the memories this (summary) record compacts, linked in the
        same transaction."""
        for attempt in range(MAX_ATTEMPTS):
            try:
                with self._tx() as con:
                    self._insert_memory(con, record)
                    if summary_of:
                        con.executemany(
                            "INSERT OR IGNORE INTO memory_links VALUES (?, ?)",
                            [[record.memory_id, m] for m in summary_of],
                        )
                    if record.status != "unparsed" and record.entity_type and record.entity_id:
                        self._merge_entity(
                            con,
                            record.session_id,
                            record.entity_type,
                            record.entity_id,
                            record.state,
                            record.attributes,
                            record.memory_id,
                            "primary",
                        )
                    linked = {(record.entity_type, record.entity_id)}
                    for ref in record.mentions:
                        if (ref.type, ref.id) not in linked:
                            linked.add((ref.type, ref.id))
                            self._merge_entity(
                                con, record.session_id, ref.type, ref.id, None, {}, record.memory_id, "mentioned"
                            )
                    for rel in record.relationships:
                        for etype, eid in ((rel.source_type, rel.source_id), (rel.target_type, rel.target_id)):
                            if (etype, eid) not in linked:
                                linked.add((etype, eid))
                                self._merge_entity(
                                    con, record.session_id, etype, eid, None, {}, record.memory_id, "related"
                                )
                        con.execute(
                            "INSERT OR IGNORE INTO relationships VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                            [
                                record.session_id,
                                rel.type,
                                rel.source_type,
                                rel.source_id,
                                rel.target_type,
                                rel.target_id,
                                record.memory_id,
                                _now(),
                            ],
                        )
                return record
            except duckdb.TransactionException:
                if attempt == MAX_ATTEMPTS - 1:
                    raise StoreError("could not commit the record after retries (write conflict)") from None
        return record

    def _insert_memory(self, con: duckdb.DuckDBPyConnection, r: MemoryRecord) -> None:
        con.execute("INSERT INTO memories VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", list(_memory_row(r)))

    def _merge_entity(
        self,
        con: duckdb.DuckDBPyConnection,
        session: str,
        etype: str,
        eid: str,
        state: str | None,
        attributes: dict[str, Any],
        memory_id: str,
        role: str,
    ) -> None:
        """Insert or update one entity: non-null values win, version +1, history kept."""
        con.execute("INSERT INTO memory_entities VALUES (?, ?, ?, ?, ?)", [memory_id, session, etype, eid, role])
        row = con.execute(
            "SELECT state, attributes, version FROM entities WHERE session_id = ? AND entity_type = ? AND entity_id = ?",
            [session, etype, eid],
        ).fetchone()
        now = _now()
        new_attrs = {k: v for k, v in attributes.items() if v is not None}
        if row is None:
            con.execute(
                "INSERT INTO entities VALUES (?, ?, ?, ?, ?, 1, ?, ?)",
                [session, etype, eid, state, json.dumps(new_attrs, ensure_ascii=False), now, now],
            )
            version, merged, new_state = 1, new_attrs, state
        else:
            old_state, old_attrs_json, version = row
            merged = {**json.loads(old_attrs_json or "{}"), **new_attrs}
            new_state = state if state is not None else old_state
            if new_state == old_state and merged == json.loads(old_attrs_json or "{}"):
                return
            changed = con.execute(
                "UPDATE entities SET state = ?, attributes = ?, version = version + 1, updated_at = ? "
                "WHERE session_id = ? AND entity_type = ? AND entity_id = ? AND version = ? RETURNING version",
                [new_state, json.dumps(merged, ensure_ascii=False), now, session, etype, eid, version],
            ).fetchall()
            if not changed:
                raise duckdb.TransactionException("entity changed concurrently")
            version = changed[0][0]
        con.execute(
            "INSERT INTO entity_history VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [session, etype, eid, version, new_state, json.dumps(merged, ensure_ascii=False), now, memory_id],
        )

    def update_entity(
        self,
        session: str,
        etype: str,
        eid: str,
        expected_version: int,
        state: str | None = None,
        attributes: dict[str, Any] | None = None,
    ) -> Entity:
        """Apply a change only if the entity is still at ``expected_version``."""
        with self._tx() as con:
            current = self._entity(con, session, etype, eid)
            if current is None:
                raise StoreError(f"no entity {etype} {eid!r} in session {session!r}", hint="check the id")
            if current.version != expected_version:
                raise StaleUpdateError(
                    f"{etype} {eid} is at version {current.version}, the update was based on version {expected_version}"
                )
            merged = {**current.attributes, **(attributes or {})}
            new_state = state if state is not None else current.state
            changed = con.execute(
                "UPDATE entities SET state = ?, attributes = ?, version = version + 1, updated_at = ? "
                "WHERE session_id = ? AND entity_type = ? AND entity_id = ? AND version = ? RETURNING version",
                [new_state, json.dumps(merged, ensure_ascii=False), _now(), session, etype, eid, expected_version],
            ).fetchall()
            if not changed:
                raise StaleUpdateError(f"{etype} {eid} changed while updating")
            con.execute(
                "INSERT INTO entity_history VALUES (?, ?, ?, ?, ?, ?, ?, NULL)",
                [session, etype, eid, changed[0][0], new_state, json.dumps(merged, ensure_ascii=False), _now()],
            )
        entity = self.get_entity(session, etype, eid)
        assert entity is not None
        return entity

    def update_record(self, memory_id: str, **fields: Any) -> MemoryRecord:
        """Edit a stored record's fields (already validated by the caller)."""
        allowed = {"event_type", "entity_type", "entity_id", "state", "attributes", "status", "note"}
        bad = set(fields) - allowed
        if bad:
            raise StoreError(f"cannot edit field(s) {sorted(bad)}")
        with self._tx() as con:
            for name, value in fields.items():  # names come from the fixed set above
                if name == "attributes":
                    value = json.dumps(value, ensure_ascii=False)
                con.execute(f"UPDATE memories SET {name} = ? WHERE memory_id = ?", [value, memory_id])
        rec = self.get_record(memory_id)
        if rec is None:
            raise StoreError(f"no memory {memory_id}")
        return rec

    def delete_record(self, memory_id: str) -> bool:
        """Delete one record and its entity links (entities stay: other records may cite them)."""
        with self._tx() as con:
            con.execute("DELETE FROM memory_entities WHERE memory_id = ?", [memory_id])
            con.execute("DELETE FROM relationships WHERE memory_id = ?", [memory_id])
            con.execute("DELETE FROM memory_vectors WHERE memory_id = ?", [memory_id])
            con.execute("DELETE FROM memory_links WHERE memory_id = ? OR summary_id = ?", [memory_id, memory_id])
            gone = con.execute("DELETE FROM memories WHERE memory_id = ? RETURNING memory_id", [memory_id]).fetchall()
        return bool(gone)

    # --- reading ----------------------------------------------------------------------
    def _entity(self, con: duckdb.DuckDBPyConnection, session: str, etype: str, eid: str) -> Entity | None:
        row = con.execute(
            "SELECT entity_type, entity_id, state, attributes, version, updated_at FROM entities "
            "WHERE session_id = ? AND entity_type = ? AND entity_id = ?",
            [session, etype, eid],
        ).fetchone()
        return _entity_from_row(row) if row else None

    def get_entity(self, session: str, etype: str, eid: str) -> Entity | None:
        with self._lock:
            return self._entity(self._con, session, etype, eid)

    def get_record(self, memory_id: str) -> MemoryRecord | None:
        rows = self.records_where("m.memory_id = ?", [memory_id], limit=1)
        return rows[0] if rows else None

    def records_where(
        self, where: str, params: Sequence[Any], limit: int = 100, order: str = "m.ts DESC"
    ) -> list[MemoryRecord]:
        """Records matching a *trusted* WHERE clause (built by this package) and bound params."""
        sql = f"SELECT {_MEMORY_COLS} FROM memories m WHERE {where} ORDER BY {order} LIMIT ?"
        with self._lock:
            rows = self._con.execute(sql, [*params, limit]).fetchall()
            return self._records_from_rows(rows)

    def records_by_ids(self, ids: Sequence[str], order: str = "m.ts DESC") -> list[MemoryRecord]:
        """The records with these ids (any missing are simply absent)."""
        if not ids:
            return []
        marks = ", ".join("?" for _ in ids)
        return self.records_where(f"m.memory_id IN ({marks})", list(ids), limit=len(ids), order=order)

    def _records_from_rows(self, rows: Sequence[Sequence[Any]]) -> list[MemoryRecord]:
        """Build records with their relationships fetched in one query, not one per row."""
        rels: dict[str, list[Relationship]] = {}
        ids = [r[0] for r in rows]
        if ids:
            marks = ", ".join("?" for _ in ids)
            for mid, *rel in self._con.execute(
                "SELECT memory_id, rel_type, source_type, source_id, target_type, target_id FROM relationships "
                f"WHERE memory_id IN ({marks})",
                ids,
            ).fetchall():
                rels.setdefault(mid, []).append(
                    Relationship(
                        type=rel[0], source_type=rel[1], source_id=rel[2], target_type=rel[3], target_id=rel[4]
                    )
                )
        return [self._record_from_row(r, rels.get(r[0], [])) for r in rows]

    def list_records(
        self, session: str | None = None, search: str = "", limit: int = 100, offset: int = 0, status: str | None = None
    ) -> list[MemoryRecord]:
        """Records for the panel / export: newest first, optional substring search."""
        clauses, params = ["TRUE"], []
        if session:
            clauses.append("m.session_id = ?")
            params.append(session)
        if status:
            clauses.append("m.status = ?")
            params.append(status)
        if search:
            clauses.append("(m.source_text ILIKE ? OR m.entity_id ILIKE ? OR m.event_type ILIKE ?)")
            params += [f"%{search}%"] * 3
        sql = f"SELECT {_MEMORY_COLS} FROM memories m WHERE {' AND '.join(clauses)} ORDER BY m.ts DESC LIMIT ? OFFSET ?"
        with self._lock:
            rows = self._con.execute(sql, [*params, limit, offset]).fetchall()
            return self._records_from_rows(rows)

    def _record_from_row(self, row: Sequence[Any], relationships: list[Relationship]) -> MemoryRecord:
        (mid, session, ts, schema_id, status, conf, text, ev, etype, eid, state, attrs, raw, note) = row
        return MemoryRecord(
            memory_id=mid,
            session_id=session,
            timestamp=ts,
            schema_id=schema_id,
            status=status,
            confidence=conf,
            source_text=text,
            event_type=ev,
            entity_type=etype,
            entity_id=eid,
            state=state,
            attributes=json.loads(attrs or "{}"),
            raw_output=raw or "",
            note=note or "",
            relationships=relationships,
        )

    def list_entities(self, session: str | None = None, limit: int = 200) -> list[Entity]:
        where, params = session_clause("session_id", session, "WHERE")
        sql = f"SELECT entity_type, entity_id, state, attributes, version, updated_at FROM entities{where}"
        with self._lock:
            rows = self._con.execute(sql + " ORDER BY updated_at DESC LIMIT ?", [*params, limit]).fetchall()
        return [_entity_from_row(r) for r in rows]

    def list_relationships(self, session: str | None = None, limit: int = 500) -> list[Relationship]:
        where, params = session_clause("session_id", session, "WHERE")
        sql = f"SELECT rel_type, source_type, source_id, target_type, target_id FROM relationships{where}"
        with self._lock:
            rows = self._con.execute(sql + " LIMIT ?", [*params, limit]).fetchall()
        return [
            Relationship(type=r[0], source_type=r[1], source_id=r[2], target_type=r[3], target_id=r[4]) for r in rows
        ]

    def entity_history(self, session: str, etype: str, eid: str) -> list[dict[str, Any]]:
        with self._lock:
            rows = self._con.execute(
                "SELECT version, state, attributes, valid_from, memory_id FROM entity_history "
                "WHERE session_id = ? AND entity_type = ? AND entity_id = ? ORDER BY version",
                [session, etype, eid],
            ).fetchall()
        return [
            {"version": r[0], "state": r[1], "attributes": json.loads(r[2]), "valid_from": r[3], "memory_id": r[4]}
            for r in rows
        ]

    def select(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        """Run a SELECT compiled by ``recall`` (trusted identifiers, bound values only)."""
        if not sql.lstrip().upper().startswith(("SELECT", "WITH")):
            raise StoreError("only SELECT statements may be run through select()")
        with self._lock:
            return self._con.execute(sql, list(params)).fetchall()

    def memories_for_entity(self, session: str | None, etype: str, eid: str, limit: int = 5) -> list[MemoryRecord]:
        where = "m.memory_id IN (SELECT memory_id FROM memory_entities WHERE entity_type = ? AND entity_id = ?" + (
            " AND session_id = ?)" if session else ")"
        )
        params = [etype, eid] + ([session] if session else [])
        return self.records_where(where, params, limit=limit)

    def memories_for_entities(
        self, session: str | None, keys: Sequence[tuple[str, str]], per_entity: int = 3
    ) -> dict[tuple[str, str], list[MemoryRecord]]:
        """The latest ``per_entity`` memories of each entity, in two queries for all keys."""
        if not keys:
            return {}
        values = ", ".join("(?, ?)" for _ in keys)
        session_sql, session_params = session_clause("l.session_id", session)
        params: list[Any] = [p for k in keys for p in k] + session_params
        cols = _MEMORY_COLS
        sql = (
            f"SELECT k_type, k_id, {cols.replace('m.', '')} FROM ("
            f"SELECT l.entity_type AS k_type, l.entity_id AS k_id, {cols}, "
            "row_number() OVER (PARTITION BY l.entity_type, l.entity_id ORDER BY m.ts DESC) AS rn "
            f"FROM (VALUES {values}) AS k(t, i) "
            "JOIN memory_entities l ON l.entity_type = k.t AND l.entity_id = k.i "
            f"JOIN memories m ON m.memory_id = l.memory_id WHERE TRUE{session_sql}"
            ") WHERE rn <= ? ORDER BY k_type, k_id, ts DESC"
        )
        with self._lock:
            rows = self._con.execute(sql, [*params, per_entity]).fetchall()
            records = self._records_from_rows([r[2:] for r in rows])
        out: dict[tuple[str, str], list[MemoryRecord]] = {}
        for row, rec in zip(rows, records):
            out.setdefault((row[0], row[1]), []).append(rec)
        return out

    def add_vectors(self, rows: Sequence[tuple[str, str, Sequence[float]]]) -> None:
        """Store (memory_id, session_id, 384-d vector) rows; existing ids are replaced."""
        if not rows:
            return
        with self._tx() as con:
            con.executemany(
                "INSERT OR REPLACE INTO memory_vectors VALUES (?, ?, ?::FLOAT[384])",
                [[m, s, [float(x) for x in v]] for m, s, v in rows],
            )

    def memories_without_vectors(self, limit: int = 1000) -> list[tuple[str, str, str]]:
        """(memory_id, session_id, source_text) of records not embedded yet (for backfill)."""
        with self._lock:
            return [
                tuple(r)
                for r in self._con.execute(  # type: ignore[misc]
                    "SELECT m.memory_id, m.session_id, m.source_text FROM memories m "
                    "WHERE NOT EXISTS (SELECT 1 FROM memory_vectors v WHERE v.memory_id = m.memory_id) LIMIT ?",
                    [limit],
                ).fetchall()
            ]

    def semantic_search(
        self, session: str | None, vec: Sequence[float], k: int = 5, min_score: float = 0.0
    ) -> list[tuple[MemoryRecord, float]]:
        """The ``k`` memories closest to ``vec`` by cosine similarity, with their scores."""
        where, params = session_clause("v.session_id", session, "WHERE")
        sql = (
            "SELECT v.memory_id, array_cosine_similarity(v.vec, ?::FLOAT[384]) AS score "
            f"FROM memory_vectors v{where} ORDER BY score DESC LIMIT ?"
        )
        with self._lock:
            scored = [
                (m, float(sc))
                for m, sc in self._con.execute(sql, [[float(x) for x in vec], *params, k]).fetchall()
                if sc is not None and sc >= min_score
            ]
        records = {r.memory_id: r for r in self.records_by_ids([m for m, _ in scored])}
        return [(records[m], sc) for m, sc in scored if m in records]

    def counts(self) -> dict[str, int]:
        with self._lock:
            return {
                t: int(self._con.execute(f"SELECT count(*) FROM {t}").fetchone()[0])  # type: ignore[index]
                for t in ("memories", "entities", "relationships", "entity_history")
            }

    # --- bulk -------------------------------------------------------------------------
    def add_records_bulk(self, records: Sequence[MemoryRecord]) -> int:
        """Store many records in one set-based transaction (imports, synthetic benchmarks).

        Same end state as ``add_record`` per record: entities merged (non-null wins,
        version +1), a history row per touched entity, relationships deduplicated.
        """
        import pandas as pd  # ships with gradio; used only for zero-copy bulk inserts

        if not records:
            return 0
        now = _now()
        mem_rows: list[tuple[Any, ...]] = []
        links: list[tuple[str, ...]] = []
        rels: list[tuple[Any, ...]] = []
        ents: dict[tuple[str, str, str], tuple[str | None, dict[str, Any]]] = {}
        for r in records:
            mem_rows.append(_memory_row(r))
            if r.status == "unparsed" or not r.entity_type or not r.entity_id:
                continue
            touched = [(r.entity_type, r.entity_id, r.state, r.attributes, "primary")]
            touched += [(m.type, m.id, None, {}, "mentioned") for m in r.mentions]
            for rel in r.relationships:
                touched += [
                    (rel.source_type, rel.source_id, None, {}, "related"),
                    (rel.target_type, rel.target_id, None, {}, "related"),
                ]
                rels.append(
                    (
                        r.session_id,
                        rel.type,
                        rel.source_type,
                        rel.source_id,
                        rel.target_type,
                        rel.target_id,
                        r.memory_id,
                        now,
                    )
                )
            seen = set()
            for etype, eid, state, attrs, role in touched:
                if (etype, eid) in seen:
                    continue
                seen.add((etype, eid))
                links.append((r.memory_id, r.session_id, etype, eid, role))
                key = (r.session_id, etype, eid)
                old_state, old_attrs = ents.get(key, (None, {}))
                ents[key] = (
                    state if state is not None else old_state,
                    {**old_attrs, **{k: v for k, v in attrs.items() if v is not None}},
                )
        mem_cols = list(MEMORY_COLUMNS)
        frames = {
            "_bulk_m": pd.DataFrame(mem_rows, columns=mem_cols),
            "_bulk_l": pd.DataFrame(links, columns=["memory_id", "session_id", "entity_type", "entity_id", "role"]),
            "_bulk_e": pd.DataFrame(
                [(k[0], k[1], k[2], v[0], json.dumps(v[1], ensure_ascii=False), now) for k, v in ents.items()],
                columns=["session_id", "entity_type", "entity_id", "state", "attributes", "ts"],
            ),
            "_bulk_r": pd.DataFrame(
                rels,
                columns=[
                    "session_id",
                    "rel_type",
                    "source_type",
                    "source_id",
                    "target_type",
                    "target_id",
                    "memory_id",
                    "created_at",
                ],
            ),
        }
        with self._tx() as con:
            for name, frame in frames.items():
                con.register(name, frame)
            try:
                con.execute(f"INSERT INTO memories SELECT {', '.join(mem_cols)} FROM _bulk_m")
                con.execute("INSERT INTO memory_entities SELECT * FROM _bulk_l")
                con.execute(
                    "INSERT INTO entities SELECT session_id, entity_type, entity_id, state, attributes, 1, ts, ts "
                    "FROM _bulk_e ON CONFLICT (session_id, entity_type, entity_id) DO UPDATE SET "
                    "state = COALESCE(excluded.state, entities.state), "
                    "attributes = json_merge_patch(entities.attributes, excluded.attributes), "
                    "version = entities.version + 1, updated_at = excluded.updated_at"
                )
                con.execute(
                    "INSERT INTO entity_history SELECT e.session_id, e.entity_type, e.entity_id, e.version, e.state, "
                    "e.attributes, e.updated_at, NULL FROM entities e JOIN _bulk_e b ON e.session_id = b.session_id "
                    "AND e.entity_type = b.entity_type AND e.entity_id = b.entity_id"
                )
                if rels:
                    con.execute("INSERT OR IGNORE INTO relationships SELECT * FROM _bulk_r")
            finally:
                for name in frames:
                    con.unregister(name)
        return len(records)

    def iter_records(self, batch: int = 500) -> Iterator[MemoryRecord]:
        offset = 0
        while True:
            chunk = self.list_records(limit=batch, offset=offset)
            if not chunk:
                return
            yield from chunk
            offset += batch

    def export_parquet(self, path: Path) -> int:
        with self._lock:
            self._con.execute(f"COPY (SELECT * FROM memories ORDER BY ts) TO '{_sql_path(path)}' (FORMAT parquet)")
            return int(self._con.execute("SELECT count(*) FROM memories").fetchone()[0])  # type: ignore[index]

    def read_parquet_rows(self, path: Path) -> list[dict[str, Any]]:
        """Rows of a Parquet export (as written by ``export_parquet``), as dicts."""
        with self._lock:
            try:
                cur = self._con.execute("SELECT * FROM read_parquet(?)", [str(path)])
            except duckdb.Error as exc:
                raise StoreError(f"cannot read {path} as Parquet: {str(exc)[:200]}") from None
            cols = [d[0] for d in cur.description]
            return [dict(zip(cols, row)) for row in cur.fetchall()]


def _memory_row(r: MemoryRecord) -> tuple[Any, ...]:
    """A record as a ``memories`` row, in column order (single and bulk inserts)."""
    return (
        r.memory_id,
        r.session_id,
        r.timestamp,
        r.schema_id,
        r.status,
        r.confidence,
        r.source_text,
        r.event_type,
        r.entity_type,
        r.entity_id,
        r.state,
        json.dumps(r.attributes, ensure_ascii=False),
        r.raw_output,
        r.note,
    )


def _sql_path(path: Path) -> str:
    # COPY cannot take a bound parameter for its target; refuse anything but a plain path.
    s = str(path)
    if "'" in s or "\x00" in s:
        raise StoreError(f"unsupported characters in export path {s!r}")
    return s


# Column order of ``memories`` (matches ``_memory_row`` and the CREATE TABLE above).
MEMORY_COLUMNS = (
    "memory_id",
    "session_id",
    "ts",
    "schema_id",
    "status",
    "confidence",
    "source_text",
    "event_type",
    "entity_type",
    "entity_id",
    "state",
    "attributes",
    "raw_output",
    "note",
)
_MEMORY_COLS = ", ".join(f"m.{c}" for c in MEMORY_COLUMNS)


def _entity_from_row(row: Sequence[Any]) -> Entity:
    return Entity(
        type=row[0], id=row[1], state=row[2], attributes=json.loads(row[3] or "{}"), version=row[4], updated_at=row[5]
    )


class _Transaction:
    def __init__(self, store: MemoryStore) -> None:
        self.store = store

    def __enter__(self) -> duckdb.DuckDBPyConnection:
        self.store._lock.acquire()
        self.store._con.execute("BEGIN TRANSACTION")
        return self.store._con

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        try:
            if exc_type is None:
                self.store._con.execute("COMMIT")
            else:
                self.store._con.execute("ROLLBACK")
        finally:
            self.store._lock.release()
