"""The store: every SQL statement of the appliance lives in this package.

``MemoryStore`` composes one ``Database`` (connection, lock, migrations, transactions) with
repositories, one per table family:

* ``records``  — memories (insert, read, edit, delete, export)
* ``entities`` — consolidated entities and their history (the one merge rule lives here)
* ``vectors``  — sentence vectors per encoder
* ``merges``   — suffix ids, entity merges, corrections (the merge log)
* ``lifecycle``— compaction links, forgetting, schema migrations
* ``queries``  — structured recall (RecallQuery → SQL)
* ``schemas``  — the schemas the memory is read with, and every version it held

``write(plan)`` stores one record and everything it implies — the memory row, its entity
upserts and relationships, suffix ids, merges, a correction, its vector — in **one
transaction**: a crash leaves either all of it or none.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..domain.records import MemoryRecord, RecallHit, RecallQuery, RecordWrite, Relationship
from ..domain.schema import MemorySchema
from ..errors import StoreError
from .backends import open_database, vectors_repo
from .database import Connection, Database, WriteConflict, first_row, now, session_clause
from .days import DaysRepo
from .entities import EntitiesRepo, Values, merge_values
from .lexical import LexicalRepo
from .lifecycle import LifecycleRepo, RecordFacts
from .merges import MergesRepo
from .queries import compile_query, run_query
from .records import RecordsRepo
from .rows import dumps, relationship_from_row
from .schemas import SchemasRepo, StoredSchema
from .vectors import ENCODER_TABLES, VectorsRepo

__all__ = [
    "MemoryStore",
    "Database",
    "open_database",
    "merge_values",
    "Values",
    "RecordFacts",
    "compile_query",
    "ENCODER_TABLES",
    "check_integrity",
    "StoredSchema",
]

MAX_ATTEMPTS = 5


class MemoryStore:
    """Records, entities, relationships and vectors in one DuckDB file (or ``:memory:``), or in
    a PostgreSQL database shared by many processes (``path`` a ``postgresql://`` URL)."""

    def __init__(self, path: str | Path, read_only: bool = False, encoder: str = "use3", create: bool = True) -> None:
        self.db = open_database(path, read_only=read_only, create=create)
        self.path = self.db.path  # the file, or the server URL without its password
        self.backend = self.db.backend  # "duckdb" or "postgres"
        self.read_only = self.db.read_only  # also when the file could only be opened for reading
        self.records = RecordsRepo(self.db)
        self.entities = EntitiesRepo(self.db)
        self.vectors: VectorsRepo = vectors_repo(self.db, encoder)
        self.merges = MergesRepo(self.db, self.entities)
        self.lexical = LexicalRepo(self.db)
        self.days = DaysRepo(self.db)
        self.lifecycle = LifecycleRepo(self.db, self.vectors, self.lexical)
        self.schemas = SchemasRepo(self.db)

    # --- writing ---------------------------------------------------------------------------
    def write(self, plan: RecordWrite, request_id: str | None = None) -> MemoryRecord:
        """Store one record and everything it implies in one transaction (see module doc)."""
        record = plan.record
        for attempt in range(MAX_ATTEMPTS):
            try:
                with self.db.transaction() as con:
                    self.db.lock_sessions(con, [record.session_id])
                    self._write(con, plan, request_id)
                return record
            except WriteConflict:
                if attempt == MAX_ATTEMPTS - 1:
                    raise StoreError("could not commit the record after retries (write conflict)") from None
        return record

    def _write(self, con: Connection, plan: RecordWrite, request_id: str | None) -> None:
        record = plan.record
        self.records.insert(con, record, request_id)
        if plan.summary_of:
            con.executemany(
                "INSERT INTO memory_links VALUES (?, ?) ON CONFLICT DO NOTHING",
                [[record.memory_id, m] for m in plan.summary_of],
            )
        session = record.session_id
        linked: set[tuple[str, str]] = set()

        def touch(etype: str, eid: str, values: Values, role: str) -> None:
            linked.add((etype, eid))
            self.entities.link(con, record.memory_id, session, etype, eid, role)
            self.entities.upsert(con, session, etype, eid, values, record.memory_id)

        if record.status != "unparsed" and record.entity_type and record.entity_id:
            touch(
                record.entity_type,
                record.entity_id,
                Values(record.state, record.attributes, record.timestamp),
                "primary",
            )
        for ref in record.mentions:
            if (ref.type, ref.id) not in linked:
                touch(ref.type, ref.id, Values(None, {}, record.timestamp), "mentioned")
        for rel in record.relationships:
            for etype, eid in ((rel.source_type, rel.source_id), (rel.target_type, rel.target_id)):
                if (etype, eid) not in linked:
                    touch(etype, eid, Values(None, {}, record.timestamp), "related")
            self.records.add_relationship(con, session, rel, record.memory_id)
        for etype, eid in plan.partial_ids:
            self.merges.mark_partial(con, session, etype, eid)
        for etype, old, new, rule in plan.merges:
            self.merges.merge(con, session, etype, old, new, rule, record.memory_id)
        if plan.correction is not None:
            earlier, etype, old, new = plan.correction
            self.merges.relink(con, earlier, etype, old, new, by_memory=record.memory_id)
        if plan.vector is not None:
            self.vectors.put(con, [(record.memory_id, session, plan.vector)])
        if plan.terms is not None:
            self.lexical.index(con, record.memory_id, session, plan.terms)
        self.days.put(con, record.memory_id, session, plan.days)

    @contextmanager
    def session_transaction(self, session: str) -> Iterator[None]:
        """One transaction holding ``session``'s write lock: the reads that decide a record (the
        resolver's: suffix ids, same values, latest of a type; a retried request's id) and its
        write see no other writer of the session in between, in any process (PostgreSQL's
        advisory lock; a DuckDB file has one writing process, serialised by its lock)."""
        with self.db.transaction() as con:
            self.db.lock_sessions(con, [session])
            yield

    def add_record(self, record: MemoryRecord) -> MemoryRecord:
        """Store a record as it is (no resolution rules): ``write`` of a plan with nothing else."""
        return self.write(RecordWrite(record=record))

    def write_many(self, records: Sequence[MemoryRecord]) -> int:
        """Store many records in one set-based transaction (imports, benchmarks): the same end
        state as ``write`` per record, values combined by the same merge rule."""
        if not records:
            return 0
        links: list[tuple[str, str, str, str, str]] = []
        rels: list[tuple[str, Relationship, str]] = []
        touched: dict[tuple[str, str, str], list[tuple[Values, str]]] = {}
        for r in records:
            if r.status == "unparsed" or not r.entity_type or not r.entity_id:
                continue
            items = [(r.entity_type, r.entity_id, Values(r.state, r.attributes, r.timestamp), "primary")]
            items += [(m.type, m.id, Values(None, {}, r.timestamp), "mentioned") for m in r.mentions]
            for rel in r.relationships:
                items += [
                    (rel.source_type, rel.source_id, Values(None, {}, r.timestamp), "related"),
                    (rel.target_type, rel.target_id, Values(None, {}, r.timestamp), "related"),
                ]
                rels.append((r.session_id, rel, r.memory_id))
            seen: set[tuple[str, str]] = set()
            for etype, eid, values, role in items:
                if (etype, eid) in seen:
                    continue
                seen.add((etype, eid))
                links.append((r.memory_id, r.session_id, etype, eid, role))
                touched.setdefault((r.session_id, etype, eid), []).append((values, r.memory_id))
        with self.db.transaction() as con:
            self.db.lock_sessions(con, [r.session_id for r in records])
            self.records.insert_many(con, records)
            existing = self.entities.existing(con, list(touched))
            rows: list[tuple[Any, ...]] = []
            for key, updates in touched.items():
                current = existing.get(key)
                merged: Values | None = Values(current.state, current.attributes, current.as_of) if current else None
                for incoming, _ in sorted(updates, key=lambda u: u[0].as_of or 0):
                    merged = merge_values(merged, incoming)
                assert merged is not None
                if current is not None and (merged.state, merged.attributes) == (current.state, current.attributes):
                    continue
                version = current.version + 1 if current else 1
                rows.append((*key, merged.state, dumps(merged.attributes), version, merged.as_of, updates[-1][1]))
            self.entities.put_many(con, rows)
            self.entities.link_many(con, links)
            for session, rel, memory_id in rels:
                self.records.add_relationship(con, session, rel, memory_id)
        return len(records)

    def maintain(self) -> None:
        """Keep the indexes fit for their size (retrain the vector lists, re-cluster the lexical
        postings and the entities, when they have grown)."""
        if self.vectors.needs_training():
            self.vectors.train()
        if self.lexical.needs_clustering():
            self.lexical.cluster()
        if self.entities.needs_clustering():
            self.entities.cluster()
        self.db.maintain()

    def add_vectors(self, rows: Sequence[tuple[str, str, Sequence[float]]], only_stored: bool = False) -> None:
        """Store vectors for records already stored (backfill after import or an encoder switch,
        the background indexer). ``only_stored``: a memory deleted while it was being encoded
        gets none."""
        with self.db.transaction() as con:
            if only_stored:
                ids = [m for m, _, _ in rows]
                sql = "SELECT memory_id FROM memories WHERE memory_id IN (SELECT unnest(?::VARCHAR[]))"
                alive = {r[0] for r in con.execute(sql, [ids]).fetchall()}
                rows = [r for r in rows if r[0] in alive]
            self.vectors.put(con, rows)

    def edit(self, memory_id: str, **fields: Any) -> MemoryRecord:
        """A person's correction of a record, in one transaction: the memory row, and its entity
        takes the corrected values (as of now: a person's word is the newest)."""
        with self.db.transaction() as con:
            row = first_row(
                con.execute("SELECT session_id, entity_type, entity_id FROM memories WHERE memory_id = ?", [memory_id])
            )
            if row is None:
                raise StoreError(f"no memory {memory_id}", hint="list memories to find its id")
            session, old_type, old_id = row
            self.db.lock_sessions(con, [session])
            self.records.update(con, memory_id, **fields)
            etype, eid = fields.get("entity_type", old_type), fields.get("entity_id", old_id)
            if etype and eid:
                if (etype, eid) != (old_type, old_id):
                    con.execute("DELETE FROM memory_entities WHERE memory_id = ? AND role = 'primary'", [memory_id])
                    self.entities.link(con, memory_id, session, etype, eid, "primary")
                values = Values(fields.get("state"), dict(fields.get("attributes") or {}), now())
                self.entities.upsert(con, session, etype, eid, values, memory_id)
        rec = self.records.get(memory_id)
        assert rec is not None
        return rec

    def delete_record(self, memory_id: str) -> bool:
        with self.db.transaction() as con:
            self.vectors.delete(con, [memory_id])
            self.lexical.delete(con, [memory_id])
            self.days.delete(con, [memory_id])
            return self.records.delete(con, memory_id)

    def add_terms(self, docs: Sequence[tuple[str, str, Sequence[str]]]) -> None:
        """Index memories already stored (backfill after an import or an upgrade)."""
        with self.db.transaction() as con:
            self.lexical.index_many(con, docs)

    def add_days(self, rows: Sequence[tuple[str, str, Sequence[tuple[Any, Any, str]]]]) -> None:
        """The days of memories already stored (backfill after an import or an upgrade)."""
        with self.db.transaction() as con:
            for memory_id, session, days in rows:
                self.days.put(con, memory_id, session, days)

    # --- reading -------------------------------------------------------------------------------
    def get_record(self, memory_id: str) -> MemoryRecord | None:
        return self.records.get(memory_id)

    def list_records(self, **kwargs: Any) -> list[MemoryRecord]:
        return self.records.page(**kwargs)

    def list_relationships(self, session: str | None = None, limit: int = 500) -> list[Relationship]:
        where, params = session_clause("session_id", session, "WHERE")
        rows = self.db.fetch(
            f"SELECT rel_type, source_type, source_id, target_type, target_id FROM relationships{where} LIMIT ?",
            [*params, limit],
        )
        return [relationship_from_row(r) for r in rows]

    def run_query(
        self, schema: MemorySchema, q: RecallQuery, session: str, per_hit: int = 3
    ) -> tuple[str, list[Any], list[RecallHit]]:
        """Structured recall: compile ``q`` to SQL and fetch entities with their latest memories."""
        return run_query(self.db, self.records, schema, q, session, per_hit)

    def semantic_search(
        self, session: str | None, vec: Sequence[float], k: int = 5, min_score: float = 0.0
    ) -> list[tuple[MemoryRecord, float]]:
        """The ``k`` memories closest to ``vec`` by cosine similarity, with their scores."""
        scored = self.vectors.search(session, vec, k, min_score)
        records = {r.memory_id: r for r in self.records.by_ids([m for m, _ in scored])}
        return [(records[m], sc) for m, sc in scored if m in records]

    def counts(self) -> dict[str, int]:
        out = {}
        for t in ("memories", "entities", "relationships", "entity_history"):
            row = self.db.fetch_one(f"SELECT count(*) FROM {t}")
            out[t] = int(row[0]) if row else 0
        return out

    def select(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run a read-only statement (integrity checks and tests)."""
        if not sql.lstrip().upper().startswith(("SELECT", "WITH")):
            raise StoreError("only SELECT statements may be run through select()")
        return self.db.fetch(sql, params)

    def checkpoint(self) -> None:
        self.db.checkpoint()

    @property
    def wal_copy(self) -> Path | None:
        """The copy of a write-ahead log kept at open (``database.keep_wal_copy``), if any."""
        return self.db.wal_copy

    @property
    def checkpoint_failed(self) -> str:
        """Why the last checkpoint failed ("" when it did not): the log still holds the rest."""
        return self.db.checkpoint_failed

    def snapshot(self, target: str | Path) -> None:
        """A consistent copy of the whole store in a new file (``backup``)."""
        self.db.snapshot(target)

    def restore_from(self, source: str | Path) -> None:
        """Fill this (empty) store with every row of the snapshot ``source`` (``restore``)."""
        self.db.restore_from(source)

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_INTEGRITY = {
    "relationship without its memory": "SELECT count(*) FROM relationships r WHERE r.memory_id IS NOT NULL "
    "AND NOT EXISTS (SELECT 1 FROM memories m WHERE m.memory_id = r.memory_id)",
    "entity link without its memory": "SELECT count(*) FROM memory_entities l "
    "WHERE NOT EXISTS (SELECT 1 FROM memories m WHERE m.memory_id = l.memory_id)",
    "entity link without its entity": "SELECT count(*) FROM memory_entities l WHERE NOT EXISTS (SELECT 1 FROM "
    "entities e WHERE e.session_id = l.session_id AND e.entity_type = l.entity_type AND e.entity_id = l.entity_id)",
    "parsed memory without its entity link": "SELECT count(*) FROM memories m WHERE m.status <> 'unparsed' "
    "AND m.entity_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM memory_entities l WHERE l.memory_id = m.memory_id)",
    "entity version without history": "SELECT count(*) FROM entities e WHERE NOT EXISTS (SELECT 1 FROM "
    "entity_history h WHERE h.session_id = e.session_id AND h.entity_type = e.entity_type "
    "AND h.entity_id = e.entity_id AND h.version = e.version)",
}


def check_integrity(store: MemoryStore) -> list[str]:
    """Orphans or half-written rows; empty when the database is consistent."""
    out = []
    for name, sql in _INTEGRITY.items():
        n = store.select(sql)[0][0]
        if n:
            out.append(f"{n} x {name}")
    vec_orphans = sum(
        store.select(
            f"SELECT count(*) FROM {t} v WHERE NOT EXISTS (SELECT 1 FROM memories m WHERE m.memory_id = v.memory_id)"
        )[0][0]
        for t in store.vectors.tables()
    )
    if vec_orphans:
        out.append(f"{vec_orphans} x vector without its memory")
    return out
