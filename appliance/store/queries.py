"""RecallQuery → parameterised SQL → entities with their latest memories.

No identifier in the SQL ever comes from a question or from model output: field names are
checked against the schema and then mapped to fixed SQL expressions; attribute names and
every value travel as bound parameters (JSON paths included). Sessions are isolated: a
query reads only its own session unless ``all_sessions`` is set explicitly.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..domain.records import Entity, Filter, Hop, RecallHit, RecallQuery
from ..domain.schema import MemorySchema
from ..errors import QueryError
from .database import Database
from .records import RecordsRepo

__all__ = ["compile_query", "run_query"]


_BASE_FIELDS = {"id": "e.entity_id", "state": "e.state", "updated_at": "e.updated_at"}
# A memory about the entity (any role) with this event type / containing this text.
_LINKED_MEMORY = (
    "EXISTS (SELECT 1 FROM memory_entities me JOIN memories m ON m.memory_id = me.memory_id "
    "WHERE me.session_id = e.session_id AND me.entity_type = e.entity_type AND me.entity_id = e.entity_id AND "
)
_EVENT_SQL = _LINKED_MEMORY + "m.event_type = ?)"
_TEXT_SQL = _LINKED_MEMORY + "strpos(lower(m.source_text), lower(?)) > 0)"


def _attribute_owner(schema: MemorySchema, entity_type: str | None, name: str) -> bool:
    ents = [schema.entity(entity_type)] if entity_type else list(schema.entities)
    return any(name in e.attribute_names for e in ents)


def _field_sql(schema: MemorySchema, entity_type: str | None, name: str, params: list[Any]) -> str:
    """A fixed SQL expression for a schema-checked field; attribute names become params."""
    if name in _BASE_FIELDS:
        return _BASE_FIELDS[name]
    if not _attribute_owner(schema, entity_type, name):
        where = f"entity {entity_type}" if entity_type else "the schema"
        raise QueryError(f"unknown field {name[:60]!r} for {where}")
    params.append(f'$."{name}"')
    return "json_extract_string(e.attributes, ?)"


def _as_number(expr: str) -> str:
    """``expr`` as a number when its text is a number ("3", "-2.5", ".5", "3.", "1e5"), else
    NULL, as DuckDB's TRY_CAST read it, in the SQL both engines run: SIMILAR TO, with no ``?``
    and no ``.`` wildcard, means the same in each (only "inf", "nan" and "1_000", which TRY_CAST
    also took, are no number here)."""
    text = f"trim(CAST({expr} AS VARCHAR))"
    return f"(CASE WHEN {text} SIMILAR TO '{_NUMBER}' THEN CAST({text} AS FLOAT8) END)"


_NUMBER = "[-+]{0,1}([0-9]+([.][0-9]*){0,1}|[.][0-9]+)([eE][-+]{0,1}[0-9]+){0,1}"


def _numeric(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _conditions(
    schema: MemorySchema, entity_type: str | None, filters: Sequence[Filter]
) -> tuple[list[str], list[Any]]:
    """WHERE conditions on alias ``e`` for one step's filters, with their bound values."""
    where: list[str] = []
    params: list[Any] = []
    for f in filters:
        if f.field in ("event_type", "text"):
            if f.field == "event_type" and str(f.value) not in schema.event_names:
                raise QueryError(f"unknown event type {str(f.value)[:60]!r}")
            where.append(_EVENT_SQL if f.field == "event_type" else _TEXT_SQL)
            params.append(str(f.value))
            continue
        fparams: list[Any] = []
        expr = _field_sql(schema, entity_type, f.field, fparams)
        if f.op == "in":
            values = f.value if isinstance(f.value, list) else [f.value]
            if not values:
                raise QueryError("'in' needs at least one value")
            where.append(f"{expr} IN ({', '.join('?' for _ in values[:50])})")
            params += fparams + [str(v) for v in values[:50]]
        elif f.op in ("gt", "lt"):
            num = _numeric(f.value)
            cmp = ">" if f.op == "gt" else "<"
            if num is None:
                where.append(f"CAST({expr} AS VARCHAR) {cmp} ?")
                params += fparams + [str(f.value)]
            else:
                where.append(f"{_as_number(expr)} {cmp} ?")
                params += fparams * 2 + [num]  # the expression is read twice
        elif f.op == "contains":
            # strpos takes no wildcards: '%' or '_' in a value are plain characters.
            where.append(f"strpos(lower(CAST({expr} AS VARCHAR)), lower(?)) > 0")
            params += fparams + [str(f.value)]
        else:
            where.append(f"CAST({expr} AS VARCHAR) = ?")
            params += fparams + [str(f.value)]
    return where, params


_ENTITY_COLS = "e.session_id, e.entity_type, e.entity_id, e.state, e.attributes, e.version, e.updated_at"


def compile_query(schema: MemorySchema, q: RecallQuery, session: str) -> tuple[str, list[Any]]:
    """SQL text built only from fixed fragments, and the values it binds."""
    if q.entity_type is not None and q.entity_type not in schema.entity_names:
        raise QueryError(f"unknown entity type {q.entity_type[:60]!r}")
    if q.event_type is not None and q.event_type not in schema.event_names:
        raise QueryError(f"unknown event type {q.event_type[:60]!r}")
    params: list[Any] = []
    where: list[str] = []
    if not q.all_sessions:
        where.append("e.session_id = ?")
        params.append(session)
    if q.entity_type:
        where.append("e.entity_type = ?")
        params.append(q.entity_type)
    if q.event_type:
        where.append(_EVENT_SQL)
        params.append(q.event_type)
    conds, cparams = _conditions(schema, q.entity_type, q.filters)
    sql = f"SELECT {_ENTITY_COLS} FROM entities e WHERE " + (" AND ".join(where + conds) or "TRUE")
    params += cparams
    current = q.entity_type
    for hop in q.chain:
        sql, params = _hop(schema, hop, current, sql, params)
        current = hop.target_type
    order_params: list[Any] = []
    if q.sort:
        expr = _field_sql(schema, q.result_type, q.sort.field, order_params).replace("e.", "h.")
        direction = "DESC" if q.sort.descending else "ASC"
        order = f"{_as_number(expr)} {direction} NULLS LAST, {expr} {direction} NULLS LAST"
        order_params *= 3  # the expression is read three times
    else:
        order = "h.updated_at DESC"
    final = f"SELECT * FROM ({sql}) h ORDER BY {order} LIMIT ?"
    return final, params + order_params + [q.limit]


def _hop(schema: MemorySchema, hop: Hop, current: str | None, inner: str, params: list[Any]) -> tuple[str, list[Any]]:
    """Join one declared relationship from the entities of ``inner`` to its other end."""
    rel = next((r for r in schema.relationships if r.type == hop.relationship), None)
    if rel is None:
        raise QueryError(f"unknown relationship {hop.relationship[:60]!r}")
    if hop.target_type not in (rel.source, rel.target):
        raise QueryError(f"{rel.type} does not connect to {hop.target_type[:60]!r}")
    if current is not None and current not in (rel.source, rel.target):
        raise QueryError(f"{rel.type} does not start from {current}")
    forward = hop.target_type == rel.target and (current in (None, rel.source))
    a, b = ("source", "target") if forward else ("target", "source")
    conds, cparams = _conditions(schema, hop.target_type, hop.filters)
    # each entity once however many paths reach it: EXISTS, not DISTINCT (PostgreSQL has no
    # equality on JSON values to compare whole rows with)
    sql = (
        f"SELECT {_ENTITY_COLS} FROM entities e WHERE "
        + " AND ".join(["e.entity_type = ?", *conds])
        + f" AND EXISTS (SELECT 1 FROM ({inner}) s JOIN relationships r ON r.session_id = s.session_id "
        f"AND r.rel_type = ? AND r.{a}_type = s.entity_type AND r.{a}_id = s.entity_id "
        f"WHERE r.session_id = e.session_id AND r.{b}_type = e.entity_type AND r.{b}_id = e.entity_id)"
    )
    return sql, [hop.target_type, *cparams, *params, rel.type]


def run_query(
    db: Database, records: RecordsRepo, schema: MemorySchema, q: RecallQuery, session: str, memories_per_hit: int = 3
) -> tuple[str, list[Any], list[RecallHit]]:
    """Compile and execute; each hit carries the entity and its latest memories."""
    sql, params = compile_query(schema, q, session)
    rows = db.fetch(sql, params)
    keys = [(r[1], r[2]) for r in rows]
    memories = records.for_entities(None if q.all_sessions else session, keys, memories_per_hit)
    hits = []
    for _sess, etype, eid, state, attrs, version, updated in rows:
        ent = Entity(
            type=etype, id=eid, state=state, attributes=json.loads(attrs or "{}"), version=version, updated_at=updated
        )
        hits.append(RecallHit(entity=ent, memories=memories.get((etype, eid), [])))
    return sql, params, hits
