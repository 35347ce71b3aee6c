"""The PostgreSQL database's tables, as numbered migrations applied in order on open.

A PostgreSQL memory starts at the DuckDB file's version 7 (the tables it has by then, in
PostgreSQL's types) so ``meta.db_version`` means the same in both engines, and a snapshot of
either restores into the other. Later versions are added here and in ``duckdb/migrations.py``
together. A migration is never edited once released.

Two SQL functions make the repositories' one SQL run here too: ``json_extract_string`` (the
``'$."name"'`` paths the repositories bind) and ``jaro_winkler_similarity`` (misspelt names).
"""

from __future__ import annotations

__all__ = ["MIGRATIONS", "DB_VERSION", "SCHEMA_LOCK"]

DB_VERSION = 7
# pg_advisory_xact_lock key taken around every change of the tables' definitions: N processes
# opening a new database at once would otherwise race ("CREATE TABLE IF NOT EXISTS" is not
# safe against a concurrent create of the same table)
SCHEMA_LOCK = 4_140_207_001

_JSON_EXTRACT = """
CREATE OR REPLACE FUNCTION json_extract_string(doc json, path text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN path LIKE '$."%"' THEN doc ->> substr(path, 4, length(path) - 4) ELSE doc #>> '{}' END
$$"""

# Jaro-Winkler as DuckDB computes it (prefix scale 0.1, at most 4 prefix characters, only above 0.7).
_JARO_WINKLER = """
CREATE OR REPLACE FUNCTION jaro_winkler_similarity(s1 text, s2 text) RETURNS float8
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    n1 int := length(s1);
    n2 int := length(s2);
    window_size int;
    m1 bool[];
    m2 bool[];
    matches int := 0;
    transpositions int := 0;
    i int;
    j int;
    k int := 1;
    prefix int := 0;
    jaro float8;
BEGIN
    IF s1 IS NULL OR s2 IS NULL THEN RETURN NULL; END IF;
    IF n1 = 0 AND n2 = 0 THEN RETURN 1.0; END IF;
    IF n1 = 0 OR n2 = 0 THEN RETURN 0.0; END IF;
    window_size := greatest(greatest(n1, n2) / 2 - 1, 0);
    m1 := array_fill(false, ARRAY[n1]);
    m2 := array_fill(false, ARRAY[n2]);
    FOR i IN 1..n1 LOOP
        FOR j IN greatest(1, i - window_size)..least(n2, i + window_size) LOOP
            IF NOT m2[j] AND substr(s1, i, 1) = substr(s2, j, 1) THEN
                m1[i] := true;
                m2[j] := true;
                matches := matches + 1;
                EXIT;
            END IF;
        END LOOP;
    END LOOP;
    IF matches = 0 THEN RETURN 0.0; END IF;
    FOR i IN 1..n1 LOOP
        IF m1[i] THEN
            WHILE NOT m2[k] LOOP k := k + 1; END LOOP;
            IF substr(s1, i, 1) <> substr(s2, k, 1) THEN transpositions := transpositions + 1; END IF;
            k := k + 1;
        END IF;
    END LOOP;
    jaro := (matches::float8 / n1 + matches::float8 / n2 + (matches - transpositions / 2)::float8 / matches) / 3;
    IF jaro <= 0.7 THEN RETURN jaro; END IF;  -- Winkler's boost threshold
    WHILE prefix < least(4, n1, n2) AND substr(s1, prefix + 1, 1) = substr(s2, prefix + 1, 1) LOOP
        prefix := prefix + 1;
    END LOOP;
    RETURN jaro + prefix * 0.1 * (1 - jaro);
END
$$"""

MIGRATIONS: dict[int, list[str]] = {
    7: [
        "CREATE EXTENSION IF NOT EXISTS vector",
        _JSON_EXTRACT,
        _JARO_WINKLER,
        """CREATE TABLE IF NOT EXISTS memories (
            memory_id VARCHAR PRIMARY KEY, session_id VARCHAR NOT NULL, ts TIMESTAMPTZ NOT NULL,
            schema_id VARCHAR NOT NULL, status VARCHAR NOT NULL, confidence FLOAT8 NOT NULL,
            source_text VARCHAR NOT NULL, event_type VARCHAR, entity_type VARCHAR,
            entity_id VARCHAR, state VARCHAR, attributes JSON, raw_output VARCHAR, note VARCHAR,
            spans JSON, recorded_at TIMESTAMPTZ, request_id VARCHAR)""",
        "CREATE INDEX IF NOT EXISTS memories_session ON memories (session_id, ts)",
        # a retried request stores once, whichever process or host it reaches
        "CREATE UNIQUE INDEX IF NOT EXISTS memories_request ON memories (session_id, request_id) "
        "WHERE request_id IS NOT NULL",
        """CREATE TABLE IF NOT EXISTS entities (
            session_id VARCHAR NOT NULL, entity_type VARCHAR NOT NULL, entity_id VARCHAR NOT NULL,
            state VARCHAR, attributes JSON NOT NULL, version INTEGER NOT NULL,
            created_at TIMESTAMPTZ NOT NULL, updated_at TIMESTAMPTZ NOT NULL, as_of TIMESTAMPTZ,
            PRIMARY KEY (session_id, entity_type, entity_id))""",
        """CREATE TABLE IF NOT EXISTS entity_history (
            session_id VARCHAR NOT NULL, entity_type VARCHAR NOT NULL, entity_id VARCHAR NOT NULL,
            version INTEGER NOT NULL, state VARCHAR, attributes JSON NOT NULL,
            valid_from TIMESTAMPTZ NOT NULL, memory_id VARCHAR)""",
        "CREATE INDEX IF NOT EXISTS entity_history_entity ON entity_history (session_id, entity_type, entity_id)",
        """CREATE TABLE IF NOT EXISTS relationships (
            session_id VARCHAR NOT NULL, rel_type VARCHAR NOT NULL,
            source_type VARCHAR NOT NULL, source_id VARCHAR NOT NULL,
            target_type VARCHAR NOT NULL, target_id VARCHAR NOT NULL,
            memory_id VARCHAR, created_at TIMESTAMPTZ NOT NULL,
            PRIMARY KEY (session_id, rel_type, source_type, source_id, target_type, target_id))""",
        "CREATE INDEX IF NOT EXISTS relationships_memory ON relationships (memory_id)",
        """CREATE TABLE IF NOT EXISTS memory_entities (
            memory_id VARCHAR NOT NULL, session_id VARCHAR NOT NULL, entity_type VARCHAR NOT NULL,
            entity_id VARCHAR NOT NULL, role VARCHAR NOT NULL)""",
        "CREATE INDEX IF NOT EXISTS memory_entities_entity ON memory_entities (session_id, entity_type, entity_id)",
        "CREATE INDEX IF NOT EXISTS memory_entities_memory ON memory_entities (memory_id)",
        "CREATE TABLE IF NOT EXISTS memory_vectors (memory_id VARCHAR PRIMARY KEY, session_id VARCHAR NOT NULL, "
        "vec vector(384) NOT NULL)",
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
        "CREATE TABLE IF NOT EXISTS lexical_terms (memory_id VARCHAR NOT NULL, session_id VARCHAR NOT NULL, "
        "term VARCHAR NOT NULL, tf INTEGER NOT NULL, length INTEGER)",
        # covering: a query's postings are read from the index alone (no heap page per posting)
        "CREATE INDEX IF NOT EXISTS lexical_terms_term ON lexical_terms (session_id, term) "
        "INCLUDE (memory_id, tf, length)",
        "CREATE INDEX IF NOT EXISTS lexical_terms_memory ON lexical_terms (memory_id)",
        "CREATE TABLE IF NOT EXISTS lexical_docs (memory_id VARCHAR PRIMARY KEY, session_id VARCHAR NOT NULL, "
        "length INTEGER NOT NULL)",
        "CREATE INDEX IF NOT EXISTS lexical_docs_session ON lexical_docs (session_id)",
        "CREATE TABLE IF NOT EXISTS memory_days (memory_id VARCHAR NOT NULL, session_id VARCHAR NOT NULL, "
        "first_day DATE NOT NULL, last_day DATE NOT NULL, source VARCHAR NOT NULL)",
        "CREATE INDEX IF NOT EXISTS memory_days_session ON memory_days (session_id, first_day)",
        "CREATE INDEX IF NOT EXISTS memory_days_memory ON memory_days (memory_id)",
        "CREATE TABLE IF NOT EXISTS memory_schemas (schema_id VARCHAR PRIMARY KEY, domain VARCHAR NOT NULL, "
        "body JSON NOT NULL, stored_at TIMESTAMPTZ NOT NULL, position INTEGER)",
    ],
}
