"""The database's tables, as numbered migrations applied in order on open (``meta.db_version``).

A migration is never edited once released: a file at version N is brought to the current
version by running N+1 … in one transaction each.
"""

from __future__ import annotations

__all__ = ["MIGRATIONS", "DB_VERSION"]

DB_VERSION = 7

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
    # v5: the surface text of each value beside its normalised form, the time a record was
    # stored (``ts`` is the message time), a client-supplied idempotency key, the message time
    # an entity's values are as of, and the lexical index of recall.
    5: [
        "ALTER TABLE memories ADD COLUMN IF NOT EXISTS spans JSON",
        "ALTER TABLE memories ADD COLUMN IF NOT EXISTS recorded_at TIMESTAMPTZ",
        "ALTER TABLE memories ADD COLUMN IF NOT EXISTS request_id VARCHAR",
        "CREATE INDEX IF NOT EXISTS memories_request ON memories (request_id)",
        # the message time of the newest value an entity holds (the merge rule compares it)
        "ALTER TABLE entities ADD COLUMN IF NOT EXISTS as_of TIMESTAMPTZ",
        "UPDATE entities SET as_of = updated_at WHERE as_of IS NULL",
        # the lexical channel of recall (BM25 over each memory's text and values, core SQL only);
        # filled in the record's transaction, backfilled for older files by the facade on open
        "CREATE TABLE IF NOT EXISTS lexical_terms (memory_id VARCHAR NOT NULL, session_id VARCHAR NOT NULL, "
        "term VARCHAR NOT NULL, tf INTEGER NOT NULL)",
        "CREATE INDEX IF NOT EXISTS lexical_terms_term ON lexical_terms (session_id, term)",
        "CREATE INDEX IF NOT EXISTS lexical_terms_memory ON lexical_terms (memory_id)",
        "CREATE TABLE IF NOT EXISTS lexical_docs (memory_id VARCHAR PRIMARY KEY, session_id VARCHAR NOT NULL, "
        "length INTEGER NOT NULL)",
        "CREATE INDEX IF NOT EXISTS lexical_docs_session ON lexical_docs (session_id)",
        # the days a memory is about: its message day and every date it states (time filters of
        # recall: "what did I do on May 17?" finds a message written on May 26 about May 17)
        "CREATE TABLE IF NOT EXISTS memory_days (memory_id VARCHAR NOT NULL, session_id VARCHAR NOT NULL, "
        "first_day DATE NOT NULL, last_day DATE NOT NULL, source VARCHAR NOT NULL)",
        "CREATE INDEX IF NOT EXISTS memory_days_session ON memory_days (session_id, first_day)",
        "CREATE INDEX IF NOT EXISTS memory_days_memory ON memory_days (memory_id)",
    ],
    # v6: each posting carries its memory's length, so BM25 reads the postings alone (no join
    # to lexical_docs per query: synthetic 100k memories, p95 43 → 33 ms).
    6: [
        "ALTER TABLE lexical_terms ADD COLUMN IF NOT EXISTS length INTEGER",
        "UPDATE lexical_terms SET length = d.length FROM lexical_docs d WHERE d.memory_id = lexical_terms.memory_id",
    ],
    # v7: a memory is self-describing: the schemas it is read with and every version it held
    # (``position`` set = loaded, 0 the default; NULL = history).
    7: [
        "CREATE TABLE IF NOT EXISTS memory_schemas (schema_id VARCHAR PRIMARY KEY, domain VARCHAR NOT NULL, "
        "body JSON NOT NULL, stored_at TIMESTAMPTZ NOT NULL, position INTEGER)"
    ],
}
