"""Memories: inserting (one and many), reading, editing, deleting, exporting.

A record's entity upserts and relationships are written by ``MemoryStore.write`` in the same
transaction as its row; the bulk path reaches the same end state set-wise (imports, benchmarks)
and combines values with the same merge rule (``entities.merge_values``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from ..domain.records import MemoryRecord, Relationship
from ..errors import StoreError
from .database import Connection, Database, now, session_clause
from .rows import (
    MEMORY_COLUMNS,
    MEMORY_SELECT,
    MEMORY_TYPES,
    dumps,
    holding_clause,
    memory_row,
    record_from_row,
    relationship_from_row,
)

__all__ = ["RecordsRepo", "EDITABLE_FIELDS"]

EDITABLE_FIELDS = ("event_type", "entity_type", "entity_id", "state", "attributes", "status", "note", "spans")
_INSERT = f"INSERT INTO memories ({', '.join(MEMORY_COLUMNS)}) VALUES ({', '.join('?' for _ in MEMORY_COLUMNS)})"


class RecordsRepo:
    def __init__(self, db: Database) -> None:
        self.db = db

    # --- writing (inside a transaction) -------------------------------------------------
    def insert(self, con: Connection, r: MemoryRecord, request_id: str | None = None) -> None:
        con.execute(_INSERT, list(memory_row(r, recorded_at=now(), request_id=request_id)))

    def add_relationship(self, con: Connection, session: str, rel: Relationship, memory_id: str) -> None:
        con.execute(
            "INSERT INTO relationships VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            [session, rel.type, rel.source_type, rel.source_id, rel.target_type, rel.target_id, memory_id, now()],
        )

    def insert_many(self, con: Connection, records: Sequence[MemoryRecord]) -> None:
        stamp = now()
        self.db.bulk(
            con,
            f"INSERT INTO memories ({', '.join(MEMORY_COLUMNS)}) SELECT * FROM {{frame}}",
            list(MEMORY_TYPES.items()),
            [memory_row(r, recorded_at=stamp) for r in records],
        )

    # --- one transaction each ---------------------------------------------------------------
    def update(self, con: Connection, memory_id: str, **fields: Any) -> None:
        """Edit a stored record's fields (already validated by the caller), inside a transaction."""
        bad = set(fields) - set(EDITABLE_FIELDS)
        if bad:
            raise StoreError(f"cannot edit field(s) {sorted(bad)}")
        for name, value in fields.items():  # names come from the fixed set above
            if name in ("attributes", "spans"):
                value = dumps(value)
            con.execute(f"UPDATE memories SET {name} = ? WHERE memory_id = ?", [value, memory_id])

    def reviewed(self, schema_ids: Sequence[str], limit: int = 500) -> list[MemoryRecord]:
        """Records a person corrected or marked reviewed under these schemas, newest first
        (they teach extraction: ``extract/examples.py``)."""
        if not schema_ids:
            return []
        marks = ", ".join("?" for _ in schema_ids)
        return self._where(f"m.status = 'reviewed' AND m.schema_id IN ({marks})", list(schema_ids), limit=limit)

    def reviewed_count(self, schema_ids: Sequence[str]) -> int:
        if not schema_ids:
            return 0
        marks = ", ".join("?" for _ in schema_ids)
        row = self.db.fetch_one(
            f"SELECT count(*) FROM memories WHERE status = 'reviewed' AND schema_id IN ({marks})", list(schema_ids)
        )
        return int(row[0]) if row else 0

    def delete(self, con: Connection, memory_id: str) -> bool:
        """Delete one record and its links (entities stay: other records may cite them);
        the caller deletes its vectors and lexical postings in the same transaction."""
        con.execute("DELETE FROM memory_entities WHERE memory_id = ?", [memory_id])
        con.execute("DELETE FROM relationships WHERE memory_id = ?", [memory_id])
        con.execute("DELETE FROM memory_links WHERE memory_id = ? OR summary_id = ?", [memory_id, memory_id])
        gone = con.execute("DELETE FROM memories WHERE memory_id = ? RETURNING memory_id", [memory_id]).fetchall()
        return bool(gone)

    # --- reading --------------------------------------------------------------------------------
    def _where(
        self, where: str, params: Sequence[Any], limit: int, order: str = "m.ts DESC", offset: int = 0
    ) -> list[MemoryRecord]:
        """Records matching a WHERE clause written in this package, with bound params."""
        sql = f"SELECT {MEMORY_SELECT} FROM memories m WHERE {where} ORDER BY {order} LIMIT ? OFFSET ?"
        with self.db.reading():  # the rows and their relationships as of one moment
            return self.from_rows(self.db.fetch(sql, [*params, limit, offset]))

    def from_rows(self, rows: Sequence[Sequence[Any]]) -> list[MemoryRecord]:
        """Build records with their relationships fetched in one query, not one per row."""
        rels: dict[str, list[Relationship]] = {}
        ids = [r[0] for r in rows]
        if ids:
            marks = ", ".join("?" for _ in ids)
            found = self.db.fetch(
                "SELECT memory_id, rel_type, source_type, source_id, target_type, target_id FROM relationships "
                f"WHERE memory_id IN ({marks})",
                ids,
            )
            for mid, *rel in found:
                rels.setdefault(mid, []).append(relationship_from_row(rel))
        return [record_from_row(r, rels.get(r[0], [])) for r in rows]

    def get(self, memory_id: str) -> MemoryRecord | None:
        rows = self._where("m.memory_id = ?", [memory_id], limit=1)
        return rows[0] if rows else None

    def by_request(self, session: str, request_id: str) -> MemoryRecord | None:
        """The record stored earlier under a client's idempotency key in this session."""
        rows = self._where("m.session_id = ? AND m.request_id = ?", [session, request_id], limit=1)
        return rows[0] if rows else None

    def request_ids(self, memory_ids: Sequence[str]) -> dict[str, str]:
        """For the memories of ``memory_ids`` stored under a client's key, memory id → that key."""
        if not memory_ids:
            return {}
        marks = ", ".join("?" for _ in memory_ids)
        rows = self.db.fetch(
            f"SELECT memory_id, request_id FROM memories WHERE memory_id IN ({marks}) AND request_id IS NOT NULL",
            list(memory_ids),
        )
        return {r[0]: r[1] for r in rows}

    def sessions(self, prefix: str = "", limit: int = 1000) -> list[str]:
        """Session ids that hold memories, those starting with ``prefix``, sorted."""
        rows = self.db.fetch(
            "SELECT DISTINCT session_id FROM memories WHERE starts_with(session_id, ?) ORDER BY 1 LIMIT ?",
            [prefix, limit],
        )
        return [r[0] for r in rows]

    def by_ids(self, ids: Sequence[str], order: str = "m.ts DESC") -> list[MemoryRecord]:
        """The records with these ids (any missing are simply absent)."""
        if not ids:
            return []
        marks = ", ".join("?" for _ in ids)
        return self._where(f"m.memory_id IN ({marks})", list(ids), limit=len(ids), order=order)

    def replies(self, ids: Sequence[str], within: timedelta) -> dict[str, tuple[str, str]]:
        """For each memory of ``ids``, the memory told next in its session (by message time, then
        by when it was stored), when that is at most ``within`` later: memory id → (reply id,
        reply text). One bounded lookup per memory: a correlated query over the session reads
        all of it (100k memories: 13 ms for three)."""
        out: dict[str, tuple[str, str]] = {}
        for mid, session, ts, recorded in self.db.fetch(
            "SELECT memory_id, session_id, ts, recorded_at FROM memories WHERE memory_id IN (SELECT unnest(?::VARCHAR[]))",
            [list(ids)],
        ):
            row = self.db.fetch_one(
                "SELECT memory_id, source_text FROM memories WHERE session_id = ? AND ts >= ? AND ts <= ? "
                "AND memory_id <> ? AND (ts > ? OR recorded_at > ?) ORDER BY ts, recorded_at LIMIT 1",
                [session, ts, ts + within, mid, ts, recorded],
            )
            if row is not None:
                out[mid] = (row[0], row[1])
        return out

    def latest_about(
        self, session: str, entity_id: str, entity_type: str | None = None, besides: str | None = None
    ) -> MemoryRecord | None:
        """The session's newest record about ``entity_id`` (of ``entity_type``; not ``besides``)."""
        where, params = ["m.session_id = ?", "m.entity_id = ?"], [session, entity_id]
        if entity_type is not None:
            where.append("m.entity_type = ?")
            params.append(entity_type)
        if besides is not None:
            where.append("m.memory_id <> ?")
            params.append(besides)
        found = self._where(" AND ".join(where), params, limit=1)
        return found[0] if found else None

    def latest_event(self, session: str, schema_id: str | None = None) -> str | None:
        """The event type of the session's newest record (under ``schema_id`` when given)."""
        where, params = "m.session_id = ? AND m.event_type IS NOT NULL", [session]
        if schema_id is not None:
            where += " AND m.schema_id = ?"
            params.append(schema_id)
        row = self.db.fetch_one(
            f"SELECT m.event_type FROM memories m WHERE {where} ORDER BY m.ts DESC, m.recorded_at DESC LIMIT 1", params
        )
        return row[0] if row else None

    def latest_schema(self, session: str, since: datetime, until: datetime) -> str | None:
        """The schema id of the session's newest record told between ``since`` and ``until``
        (routing keeps a conversation in its domain; a history recorded late has its own times)."""
        row = self.db.fetch_one(
            "SELECT m.schema_id FROM memories m WHERE m.session_id = ? AND m.ts BETWEEN ? AND ? "
            "ORDER BY m.ts DESC, m.recorded_at DESC LIMIT 1",
            [session, since, until],
        )
        return row[0] if row else None

    def told(self, session: str, schema_id: str, limit: int = 50) -> frozenset[str]:
        """The attributes the session's latest ``limit`` records under ``schema_id`` hold a value of."""
        rows = self.db.fetch(
            "SELECT m.attributes FROM memories m WHERE m.session_id = ? AND m.schema_id = ? "
            "AND m.attributes IS NOT NULL ORDER BY m.ts DESC LIMIT ?",
            [session, schema_id, limit],
        )
        names: set[str] = set()
        for (attrs,) in rows:
            values = json.loads(attrs) if isinstance(attrs, str) else attrs
            names |= {k for k, v in (values or {}).items() if v is not None}
        return frozenset(names)

    def text_before(self, session: str, at: datetime, within: timedelta) -> str | None:
        """The text of the session's newest memory told before ``at`` and at most ``within`` earlier."""
        row = self.db.fetch_one(
            "SELECT m.source_text FROM memories m WHERE m.session_id = ? AND m.ts <= ? AND m.ts >= ? "
            "ORDER BY m.ts DESC, m.recorded_at DESC LIMIT 1",
            [session, at, at - within],
        )
        return row[0] if row else None

    def containing(self, session: str | None, text: str, limit: int = 5) -> list[MemoryRecord]:
        """Records whose text contains ``text`` (case-sensitive substring, no wildcards)."""
        where, params = session_clause("m.session_id", session)
        return self._where(f"strpos(m.source_text, ?) > 0{where}", [text, *params], limit=limit)

    def for_entity(self, session: str | None, etype: str, eid: str, limit: int = 5) -> list[MemoryRecord]:
        where = "m.memory_id IN (SELECT memory_id FROM memory_entities WHERE entity_type = ? AND entity_id = ?" + (
            " AND session_id = ?)" if session else ")"
        )
        params = [etype, eid] + ([session] if session else [])
        return self._where(where, params, limit=limit)

    def holding(self, session: str | None, attributes: Sequence[tuple[str, str]], limit: int = 30) -> list[str]:
        """Memories whose record holds a value of one of ``attributes`` ((entity type, name)),
        newest first: the answer to "what is the city the journey starts from?" is a memory
        that filled ``origin_city``."""
        if not attributes:
            return []
        where, params = session_clause("session_id", session)
        cond, args = holding_clause(attributes)
        rows = self.db.fetch(
            f"SELECT memory_id FROM memories WHERE {cond}{where} ORDER BY ts DESC LIMIT ?",
            [*args, *params, limit],
        )
        return [r[0] for r in rows]

    def for_entities(
        self, session: str | None, keys: Sequence[tuple[str, str]], per_entity: int = 3
    ) -> dict[tuple[str, str], list[MemoryRecord]]:
        """The latest ``per_entity`` memories of each entity, in two queries for all keys."""
        if not keys:
            return {}
        values = ", ".join("(?, ?)" for _ in keys)
        session_sql, session_params = session_clause("l.session_id", session)
        params: list[Any] = [p for k in keys for p in k] + session_params
        sql = (
            f"SELECT k_type, k_id, {MEMORY_SELECT.replace('m.', '')} FROM ("
            f"SELECT l.entity_type AS k_type, l.entity_id AS k_id, {MEMORY_SELECT}, "
            "row_number() OVER (PARTITION BY l.entity_type, l.entity_id ORDER BY m.ts DESC) AS rn "
            f"FROM (VALUES {values}) AS k(t, i) "
            "JOIN memory_entities l ON l.entity_type = k.t AND l.entity_id = k.i "
            f"JOIN memories m ON m.memory_id = l.memory_id WHERE TRUE{session_sql}"
            ") WHERE rn <= ? ORDER BY k_type, k_id, ts DESC"
        )
        rows = self.db.fetch(sql, [*params, per_entity])
        records = self.from_rows([r[2:] for r in rows])
        out: dict[tuple[str, str], list[MemoryRecord]] = {}
        for row, rec in zip(rows, records):
            out.setdefault((row[0], row[1]), []).append(rec)
        return out

    def page(
        self,
        session: str | None = None,
        search: str = "",
        limit: int = 100,
        offset: int = 0,
        status: str | None = None,
        order: str = "m.ts DESC",
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
        return self._where(" AND ".join(clauses), params, limit=limit, order=order, offset=offset)

    def iter(self, batch: int = 500, session: str | None = None) -> Iterator[MemoryRecord]:
        """Every record, oldest first, in pages (exports)."""
        offset = 0
        while True:
            chunk = self.page(session=session, limit=batch, offset=offset, order="m.ts, m.memory_id")
            if not chunk:
                return
            yield from chunk
            offset += batch

    def ids(self) -> set[str]:
        return {r[0] for r in self.db.fetch("SELECT memory_id FROM memories")}

    def session_exists(self, session: str) -> bool:
        return self.db.fetch_one("SELECT 1 FROM memories WHERE session_id = ? LIMIT 1", [session]) is not None

    # --- Parquet ---------------------------------------------------------------------------------
    def export_parquet(self, path: Path) -> int:
        with self.db.reading():
            self.db.export_parquet("SELECT * FROM memories ORDER BY ts", path)
            row = self.db.fetch_one("SELECT count(*) FROM memories")
        return int(row[0]) if row else 0

    @staticmethod
    def read_parquet_rows(path: Path) -> list[dict[str, Any]]:
        """Rows of a Parquet export (as written by ``export_parquet``), as dicts: read by an
        in-memory DuckDB whichever backend stores the memory."""
        import duckdb

        with duckdb.connect() as con:
            try:
                cur = con.execute("SELECT * FROM read_parquet(?)", [str(path)])
            except duckdb.Error as exc:
                raise StoreError(f"cannot read {path} as Parquet: {str(exc)[:200]}") from None
            cols = [d[0] for d in cur.description]
            return [dict(zip(cols, row)) for row in cur.fetchall()]

    def attributes_json(self, raw: str | None) -> dict[str, Any]:
        return json.loads(raw or "{}")
