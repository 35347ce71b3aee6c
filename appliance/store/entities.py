"""Entities: the consolidated state of each thing memories are about, versioned with history.

**The merge rule** (``merge_values``, the only place values are combined — record upserts,
entity merges, corrections and bulk imports all call it): per attribute and for the state,
the value from the *newer message* wins; a null never erases a value; a value from an older
message only fills what is still empty; on equal message times the incoming value wins.
``as_of`` is the message time of the newest value an entity holds.

Optimistic locking: ``version`` increments on every change and every version has a history
row (``entity_history``: state, attributes, valid_from = message time, the memory that caused
it). ``update`` takes the version the caller read and refuses with ``StaleUpdateError`` if it
moved.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..domain.records import Entity
from ..errors import StaleUpdateError, StoreError
from .database import Connection, Database, WriteConflict, first_row, grown_since_rewrite, now, put_meta, session_clause
from .rows import ENTITY_SELECT, dumps, entity_from_row, holding_clause

__all__ = ["Values", "merge_values", "EntitiesRepo"]

_LINK_COLUMNS = tuple((c, "VARCHAR") for c in ("memory_id", "session_id", "entity_type", "entity_id", "role"))
_PUT_COLUMNS = (
    ("session_id", "VARCHAR"),
    ("entity_type", "VARCHAR"),
    ("entity_id", "VARCHAR"),
    ("state", "VARCHAR"),
    ("attributes", "JSON"),
    ("version", "INTEGER"),
    ("as_of", "TIMESTAMPTZ"),
    ("memory_id", "VARCHAR"),
)
# Entities are rewritten in (session, type) order once there are this many, and again each time
# they have doubled since (synthetic 50k entities in 10 sessions: name matching p50 9.4 → 4.1 ms).
CLUSTER_MIN = 20_000
CLUSTER_GROWTH = 2.0
_CLUSTERED_AT = "entities_clustered_at"  # meta key: entities when last rewritten


@dataclass(frozen=True)
class Values:
    """What an entity says at a message time: its state and attributes."""

    state: str | None
    attributes: dict[str, Any]
    as_of: datetime | None


def merge_values(current: Values | None, incoming: Values) -> Values:
    """Combine stored and incoming values by the module's rule (newer message wins per value;
    nulls never erase; older values only fill gaps)."""
    new_attrs = {k: v for k, v in incoming.attributes.items() if v is not None}
    if current is None:
        return Values(incoming.state, new_attrs, incoming.as_of)
    old_attrs = {k: v for k, v in current.attributes.items() if v is not None}
    newer = current.as_of is None or incoming.as_of is None or incoming.as_of >= current.as_of
    if newer:
        attrs = {**old_attrs, **new_attrs}
        state = incoming.state if incoming.state is not None else current.state
        as_of = incoming.as_of or current.as_of
    else:
        attrs = {**new_attrs, **old_attrs}
        state = current.state if current.state is not None else incoming.state
        as_of = current.as_of
    return Values(state, attrs, as_of)


class EntitiesRepo:
    def __init__(self, db: Database) -> None:
        self.db = db

    # --- inside a transaction -------------------------------------------------------------
    def read(self, con: Connection, session: str, etype: str, eid: str) -> Entity | None:
        row = first_row(
            con.execute(
                f"SELECT {ENTITY_SELECT} FROM entities e WHERE e.session_id = ? AND e.entity_type = ? AND e.entity_id = ?",
                [session, etype, eid],
            )
        )
        return entity_from_row(row) if row else None

    def upsert(
        self,
        con: Connection,
        session: str,
        etype: str,
        eid: str,
        incoming: Values,
        memory_id: str | None,
    ) -> Entity:
        """Merge ``incoming`` into the entity (created if missing) by the merge rule; a new
        version and a history row when anything changed."""
        current = self.read(con, session, etype, eid)
        stamp = now()
        if current is None:
            merged = merge_values(None, incoming)
            as_of = merged.as_of or stamp
            con.execute(
                "INSERT INTO entities (session_id, entity_type, entity_id, state, attributes, version, created_at, "
                "updated_at, as_of) VALUES (?, ?, ?, ?, ?, 1, ?, ?, ?)",
                [session, etype, eid, merged.state, dumps(merged.attributes), stamp, stamp, as_of],
            )
            version = 1
        else:
            merged = merge_values(Values(current.state, current.attributes, current.as_of), incoming)
            if merged.state == current.state and merged.attributes == current.attributes:
                if merged.as_of and (current.as_of is None or merged.as_of > current.as_of):
                    con.execute(
                        "UPDATE entities SET as_of = ? WHERE session_id = ? AND entity_type = ? AND entity_id = ?",
                        [merged.as_of, session, etype, eid],
                    )
                return current
            changed = con.execute(
                "UPDATE entities SET state = ?, attributes = ?, version = version + 1, updated_at = ?, as_of = ? "
                "WHERE session_id = ? AND entity_type = ? AND entity_id = ? AND version = ? RETURNING version",
                [
                    merged.state,
                    dumps(merged.attributes),
                    stamp,
                    merged.as_of or stamp,
                    session,
                    etype,
                    eid,
                    current.version,
                ],
            ).fetchall()
            if not changed:
                raise WriteConflict("entity changed concurrently")
            version = changed[0][0]
        self._history(con, session, etype, eid, version, merged, memory_id, stamp)
        return Entity(
            type=etype,
            id=eid,
            state=merged.state,
            attributes=merged.attributes,
            version=version,
            updated_at=stamp,
            as_of=merged.as_of,
            session_id=session,
        )

    @staticmethod
    def _history(
        con: Connection,
        session: str,
        etype: str,
        eid: str,
        version: int,
        values: Values,
        memory_id: str | None,
        stamp: datetime,
    ) -> None:
        con.execute(
            "INSERT INTO entity_history VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [session, etype, eid, version, values.state, dumps(values.attributes), values.as_of or stamp, memory_id],
        )

    def delete(self, con: Connection, session: str, etype: str, eid: str) -> None:
        con.execute(
            "DELETE FROM entities WHERE session_id = ? AND entity_type = ? AND entity_id = ?", [session, etype, eid]
        )

    def link(self, con: Connection, memory_id: str, session: str, etype: str, eid: str, role: str) -> None:
        con.execute("INSERT INTO memory_entities VALUES (?, ?, ?, ?, ?)", [memory_id, session, etype, eid, role])

    def link_many(self, con: Connection, links: Sequence[tuple[str, str, str, str, str]]) -> None:
        """(memory_id, session, type, id, role) links, set-wise (imports)."""
        if links:
            self.db.bulk(con, "INSERT INTO memory_entities SELECT * FROM {frame}", _LINK_COLUMNS, links)

    def put_many(self, con: Connection, rows: Sequence[tuple[Any, ...]]) -> None:
        """Write already-merged entity versions set-wise, each with its history row (imports):
        (session, type, id, state, attributes JSON, version, as_of, memory_id)."""
        if not rows:
            return
        self.db.bulk(
            con,
            "INSERT INTO entities (session_id, entity_type, entity_id, state, attributes, version, created_at, "
            "updated_at, as_of) SELECT session_id, entity_type, entity_id, state, attributes, version, now(), now(), "
            "as_of FROM {frame} ON CONFLICT (session_id, entity_type, entity_id) DO UPDATE SET state = excluded.state, "
            "attributes = excluded.attributes, version = excluded.version, updated_at = excluded.updated_at, "
            "as_of = excluded.as_of",
            _PUT_COLUMNS,
            rows,
        )
        self.db.bulk(
            con,
            "INSERT INTO entity_history SELECT session_id, entity_type, entity_id, version, state, attributes, "
            "as_of, memory_id FROM {frame}",
            _PUT_COLUMNS,
            rows,
        )

    # --- one transaction each ---------------------------------------------------------------
    def update(
        self,
        session: str,
        etype: str,
        eid: str,
        expected_version: int,
        state: str | None = None,
        attributes: dict[str, Any] | None = None,
    ) -> Entity:
        """Apply a person's change only if the entity is still at ``expected_version``
        (a person's edit is the newest word: it is as of now)."""
        with self.db.transaction() as con:
            self.db.lock_sessions(con, [session])
            current = self.read(con, session, etype, eid)
            if current is None:
                raise StoreError(f"no entity {etype} {eid!r} in session {session!r}", hint="check the id")
            if current.version != expected_version:
                raise StaleUpdateError(
                    f"{etype} {eid} is at version {current.version}, the update was based on version {expected_version}"
                )
            stamp = now()
            merged = merge_values(
                Values(current.state, current.attributes, current.as_of), Values(state, attributes or {}, stamp)
            )
            changed = con.execute(
                "UPDATE entities SET state = ?, attributes = ?, version = version + 1, updated_at = ?, as_of = ? "
                "WHERE session_id = ? AND entity_type = ? AND entity_id = ? AND version = ? RETURNING version",
                [merged.state, dumps(merged.attributes), stamp, stamp, session, etype, eid, expected_version],
            ).fetchall()
            if not changed:
                raise StaleUpdateError(f"{etype} {eid} changed while updating")
            self._history(con, session, etype, eid, changed[0][0], merged, None, stamp)
        entity = self.get(session, etype, eid)
        assert entity is not None
        return entity

    # --- reading -----------------------------------------------------------------------------
    def get(self, session: str, etype: str, eid: str) -> Entity | None:
        with self.db.reading() as con:
            return self.read(con, session, etype, eid)

    def page(self, session: str | None = None, limit: int = 200, offset: int = 0) -> list[Entity]:
        where, params = session_clause("e.session_id", session, "WHERE")
        rows = self.db.fetch(
            f"SELECT {ENTITY_SELECT} FROM entities e{where} ORDER BY e.updated_at DESC LIMIT ? OFFSET ?",
            [*params, limit, offset],
        )
        return [entity_from_row(r) for r in rows]

    def history(self, session: str, etype: str, eid: str) -> list[dict[str, Any]]:
        rows = self.db.fetch(
            "SELECT version, state, attributes, valid_from, memory_id FROM entity_history "
            "WHERE session_id = ? AND entity_type = ? AND entity_id = ? ORDER BY version",
            [session, etype, eid],
        )
        return [
            {"version": r[0], "state": r[1], "attributes": json.loads(r[2]), "valid_from": r[3], "memory_id": r[4]}
            for r in rows
        ]

    def ids_ending_with(self, session: str, etype: str, suffix: str) -> list[str]:
        """Stored ids of ``etype`` that end with ``suffix`` (and are longer than it)."""
        rows = self.db.fetch(
            "SELECT entity_id FROM entities WHERE session_id = ? AND entity_type = ? "
            "AND right(entity_id, length(?)) = ? AND entity_id <> ? ORDER BY updated_at DESC LIMIT 10",
            [session, etype, suffix, suffix, suffix],
        )
        return [r[0] for r in rows]

    def with_values(self, session: str, etype: str, values: dict[str, str]) -> str | None:
        """The newest entity of ``etype`` whose attributes equal ``values`` (all of them)."""
        where = " AND ".join("json_extract_string(attributes, ?) = ?" for _ in values)
        params: list[Any] = [session, etype]
        for k, v in values.items():
            params += [f'$."{k}"', str(v)]
        row = self.db.fetch_one(
            f"SELECT entity_id FROM entities WHERE session_id = ? AND entity_type = ? AND {where} "
            "ORDER BY updated_at DESC LIMIT 1",
            params,
        )
        return row[0] if row else None

    def matching(self, session: str | None, keys: Sequence[str], limit: int = 20) -> list[tuple[Entity, str, float]]:
        """Entities whose id or a value matches one of ``keys`` (names, codes, values said in a
        question): (entity, the key, strength) — 1.0 equal, 0.9 contained, else the Jaro-Winkler
        similarity of id and key when it is at least 0.9 (a misspelt name). A key with a digit is
        a code or a number and is never near another: order 10236 is not order 10231."""
        usable = sorted({k.strip() for k in keys if len(k.strip()) >= 2})
        if not usable:
            return []
        where, params = session_clause("e.session_id", session)
        contained = (
            "strpos(lower(e.entity_id), lower(q.k)) > 0 OR strpos(lower(CAST(e.attributes AS VARCHAR)), lower(q.k)) > 0"
        )
        rows = self.db.fetch(
            f"SELECT {ENTITY_SELECT}, q.k, CASE "
            f"WHEN lower(e.entity_id) = lower(q.k) THEN 1.0 WHEN {contained} THEN 0.9 "
            "ELSE jaro_winkler_similarity(lower(e.entity_id), lower(q.k)) END AS strength "
            "FROM entities e, (SELECT unnest(?::VARCHAR[]) AS k, unnest(?::BOOLEAN[]) AS fuzzy) q "
            f"WHERE ({contained} OR (q.fuzzy AND jaro_winkler_similarity(lower(e.entity_id), lower(q.k)) >= 0.9))"
            f"{where} "
            "ORDER BY strength DESC, e.updated_at DESC LIMIT ?",
            [usable, [not any(ch.isdigit() for ch in k) for k in usable], *params, limit],
        )
        out = [(entity_from_row(r[:8]), r[8], float(r[9])) for r in rows]
        return [(e, k, strength) for e, k, strength in out if strength == 1.0 or _holds_code(e, k)]

    # --- upkeep ------------------------------------------------------------------------------
    def count(self) -> int:
        return int(self.db.fetch("SELECT count(*) FROM entities")[0][0])

    def needs_clustering(self) -> bool:
        return grown_since_rewrite(self.db, self.count(), CLUSTER_MIN, CLUSTER_GROWTH, _CLUSTERED_AT)

    def cluster(self) -> None:
        """Rewrite the entities in (session, type) order, in one transaction, so that matching a
        name within a session reads that session's blocks (DuckDB skips blocks by their min/max)
        instead of every block. Delete and re-insert keep the table's own constraints; updates
        happen in place and keep the order; entities made later land after, until the next
        rewrite. A checkpoint afterwards drops the emptied blocks."""
        with self.db.transaction() as con:
            con.execute(
                "CREATE TEMP TABLE entities_clustered AS SELECT * FROM entities ORDER BY session_id, entity_type"
            )
            n = first_row(con.execute("SELECT count(*) FROM entities_clustered"))
            con.execute("DELETE FROM entities")
            con.execute("INSERT INTO entities SELECT * FROM entities_clustered")
            con.execute("DROP TABLE entities_clustered")
            put_meta(con, _CLUSTERED_AT, str(n[0] if n else 0))
        self.db.checkpoint()

    def holding(self, session: str | None, attributes: Sequence[tuple[str, str]], limit: int = 3) -> list[Entity]:
        """Entities holding a value of one of ``attributes`` ((entity type, name)), the newest
        values first: "what is the city the journey starts from?" is answered by the journey."""
        if not attributes:
            return []
        where, params = session_clause("e.session_id", session)
        cond, args = holding_clause(attributes, "e")
        rows = self.db.fetch(
            f"SELECT {ENTITY_SELECT} FROM entities e WHERE {cond}{where} "
            "ORDER BY coalesce(e.as_of, e.updated_at) DESC, e.updated_at DESC LIMIT ?",
            [*args, *params, limit],
        )
        return [entity_from_row(r) for r in rows]

    def of_types(self, session: str | None, types: Sequence[str], limit: int = 50) -> list[Entity]:
        """The session's entities of these types, most recently changed first."""
        if not types:
            return []
        where, params = session_clause("e.session_id", session)
        rows = self.db.fetch(
            f"SELECT {ENTITY_SELECT} FROM entities e WHERE e.entity_type IN (SELECT unnest(?::VARCHAR[])){where} "
            "ORDER BY e.updated_at DESC LIMIT ?",
            [list(types), *params, limit],
        )
        return [entity_from_row(r) for r in rows]

    def latest_of_type(self, session: str, etype: str) -> str | None:
        """The id of the session's most recently changed entity of ``etype``."""
        row = self.db.fetch_one(
            "SELECT entity_id FROM entities WHERE session_id = ? AND entity_type = ? ORDER BY updated_at DESC LIMIT 1",
            [session, etype],
        )
        return row[0] if row else None

    def all_raw(self) -> list[tuple[str, str, str, str | None, str]]:
        return [
            tuple(r)
            for r in self.db.fetch("SELECT session_id, entity_type, entity_id, state, attributes FROM entities")
        ]  # type: ignore[misc]

    def keys_by_type(self, session: str | None, etype: str) -> list[tuple[str, str]]:
        where, params = session_clause("session_id", session)
        return [
            (r[0], r[1])
            for r in self.db.fetch(
                f"SELECT session_id, entity_id FROM entities WHERE entity_type = ?{where}", [etype, *params]
            )
        ]

    def existing(self, con: Connection, keys: Sequence[tuple[str, str, str]]) -> dict[tuple[str, str, str], Entity]:
        """The stored entities among ``keys`` (session, type, id), read in one statement."""
        if not keys:
            return {}
        # three arrays, not a VALUES row per key: an import's 50k keys would be 150k parameters
        rows = con.execute(
            f"SELECT {ENTITY_SELECT} FROM (SELECT unnest(?::VARCHAR[]) AS s, unnest(?::VARCHAR[]) AS t, "
            "unnest(?::VARCHAR[]) AS i) k JOIN entities e "
            "ON e.session_id = k.s AND e.entity_type = k.t AND e.entity_id = k.i",
            [[k[0] for k in keys], [k[1] for k in keys], [k[2] for k in keys]],
        ).fetchall()
        out = {}
        for r in rows:
            ent = entity_from_row(r)
            out[(ent.session_id or "", ent.type, ent.id)] = ent
        return out


def _holds_code(entity: Entity, key: str) -> bool:
    """Whether a key with digits stands in the entity's id or a value whole — not inside a longer
    run of digits — or ends it (keys without digits: always)."""
    if not any(ch.isdigit() for ch in key):
        return True
    whole = re.compile(rf"(?<![0-9]){re.escape(key.lower())}(?![0-9])")
    for text in (entity.id, *(str(v) for v in entity.attributes.values() if v is not None)):
        low = text.lower()
        if low.endswith(key.lower()) or whole.search(low):
            return True
    return False
