"""RecallQuery → parameterised SQL → hits → a context summary.

No identifier in the SQL ever comes from a question or from model output: field names are
checked against the schema and then mapped to fixed SQL expressions; attribute names and
every value travel as bound parameters (JSON paths included). Sessions are isolated: a
query reads only its own session unless ``all_sessions`` is set explicitly.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Protocol

from .errors import QueryError
from .memory import Entity, MemoryRecord, RecallHit, RecallQuery, SemanticHit
from .schema import MemorySchema

__all__ = ["compile_query", "run_query", "summarise", "Readable"]


class Readable(Protocol):
    def select(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]: ...
    def memories_for_entities(
        self, session: str | None, keys: Sequence[tuple[str, str]], per_entity: int = 3
    ) -> dict[tuple[str, str], list[MemoryRecord]]: ...


_BASE_FIELDS = {"id": "e.entity_id", "state": "e.state"}


def _attribute_owner(schema: MemorySchema, entity_type: str | None, name: str) -> bool:
    ents = [schema.entity(entity_type)] if entity_type else list(schema.entities)
    return any(name in e.attribute_names for e in ents)


def _field_sql(schema: MemorySchema, q: RecallQuery, name: str, params: list[Any]) -> str:
    """A fixed SQL expression for a schema-checked field; attribute names become params."""
    if name in _BASE_FIELDS:
        return _BASE_FIELDS[name]
    if name == "updated_at":
        return "e.updated_at"
    if not _attribute_owner(schema, q.entity_type, name):
        where = f"entity {q.entity_type}" if q.entity_type else "the schema"
        raise QueryError(f"unknown field {name[:60]!r} for {where}")
    params.append(f'$."{name}"')
    return "json_extract_string(e.attributes, ?)"


def _numeric(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


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
        where.append(
            "EXISTS (SELECT 1 FROM memory_entities me JOIN memories m ON m.memory_id = me.memory_id "
            "WHERE me.session_id = e.session_id AND me.entity_type = e.entity_type "
            "AND me.entity_id = e.entity_id AND m.event_type = ?)"
        )
        params.append(q.event_type)
    for f in q.filters:
        if f.field == "event_type":
            where.append(
                "EXISTS (SELECT 1 FROM memory_entities me JOIN memories m ON m.memory_id = me.memory_id "
                "WHERE me.session_id = e.session_id AND me.entity_type = e.entity_type "
                "AND me.entity_id = e.entity_id AND m.event_type = ?)"
            )
            params.append(str(f.value))
            continue
        fparams: list[Any] = []
        expr = _field_sql(schema, q, f.field, fparams)
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
                where.append(f"TRY_CAST({expr} AS DOUBLE) {cmp} ?")
                params += fparams + [num]
        elif f.op == "contains":
            # contains() takes no wildcards: '%' or '_' in a value are plain characters.
            where.append(f"contains(lower(CAST({expr} AS VARCHAR)), lower(?))")
            params += fparams + [str(f.value)]
        else:
            where.append(f"CAST({expr} AS VARCHAR) = ?")
            params += fparams + [str(f.value)]
    sql = (
        "SELECT e.session_id, e.entity_type, e.entity_id, e.state, e.attributes, e.version, e.updated_at "
        "FROM entities e WHERE " + (" AND ".join(where) or "TRUE")
    )
    if q.hop:
        sql, params = _hop(schema, q, sql, params)
    order_params: list[Any] = []
    if q.sort:
        hop_q = q.model_copy(update={"entity_type": q.hop.target_type if q.hop else q.entity_type})
        expr = _field_sql(schema, hop_q, q.sort.field, order_params).replace("e.", "h.")
        direction = "DESC" if q.sort.descending else "ASC"
        order = f"TRY_CAST({expr} AS DOUBLE) {direction} NULLS LAST, {expr} {direction} NULLS LAST"
        order_params *= 2
    else:
        order = "h.updated_at DESC"
    final = f"SELECT * FROM ({sql}) h ORDER BY {order} LIMIT ?"
    return final, params + order_params + [q.limit]


def _hop(schema: MemorySchema, q: RecallQuery, inner: str, params: list[Any]) -> tuple[str, list[Any]]:
    assert q.hop is not None
    rel = next((r for r in schema.relationships if r.type == q.hop.relationship), None)
    if rel is None:
        raise QueryError(f"unknown relationship {q.hop.relationship[:60]!r}")
    if q.hop.target_type not in (rel.source, rel.target):
        raise QueryError(f"{rel.type} does not connect to {q.hop.target_type[:60]!r}")
    forward = q.hop.target_type == rel.target and (q.entity_type in (None, rel.source))
    a, b = ("source", "target") if forward else ("target", "source")
    sql = (
        "SELECT DISTINCT t.session_id, t.entity_type, t.entity_id, t.state, t.attributes, t.version, t.updated_at "
        f"FROM ({inner}) s JOIN relationships r ON r.session_id = s.session_id AND r.rel_type = ? "
        f"AND r.{a}_type = s.entity_type AND r.{a}_id = s.entity_id "
        f"JOIN entities t ON t.session_id = r.session_id AND t.entity_type = r.{b}_type AND t.entity_id = r.{b}_id "
        "WHERE t.entity_type = ?"
    )
    return sql, params + [rel.type, q.hop.target_type]


def run_query(
    store: Readable, schema: MemorySchema, q: RecallQuery, session: str, memories_per_hit: int = 3
) -> tuple[str, list[Any], list[RecallHit]]:
    """Compile and execute; each hit carries the entity and its latest memories."""
    sql, params = compile_query(schema, q, session)
    rows = store.select(sql, params)
    keys = [(r[1], r[2]) for r in rows]
    memories = store.memories_for_entities(None if q.all_sessions else session, keys, memories_per_hit)
    hits = []
    for _sess, etype, eid, state, attrs, version, updated in rows:
        ent = Entity(
            type=etype, id=eid, state=state, attributes=json.loads(attrs or "{}"), version=version, updated_at=updated
        )
        hits.append(RecallHit(entity=ent, memories=memories.get((etype, eid), [])))
    return sql, params, hits


def summarise(
    hits: Sequence[RecallHit], extra: Sequence[MemoryRecord] = (), semantic: Sequence[SemanticHit] = ()
) -> str:
    """A compact, structured context block for an agent's prompt."""
    if not hits and not extra and not semantic:
        return "No matching memories."
    lines = []
    for h in hits:
        e = h.entity
        attrs = ", ".join(f"{k}={v}" for k, v in e.attributes.items() if v is not None)
        lines.append(f"- {e.type} {e.id}" + (f" [{e.state}]" if e.state else "") + (f": {attrs}" if attrs else ""))
        for m in h.memories:
            lines.append(f'    {m.timestamp:%Y-%m-%d %H:%M} {m.event_type or "unparsed"}: "{m.source_text[:160]}"')
    for m in extra:
        lines.append(f'- memory {m.memory_id[:8]} {m.timestamp:%Y-%m-%d}: "{m.source_text[:160]}"')
    if semantic:
        lines.append("Related (semantic):")
        for s in semantic:
            when = f"{s.memory.timestamp:%Y-%m-%d}"
            lines.append(
                f'- [{s.score:.2f}] {when} {s.memory.event_type or "unparsed"}: "{s.memory.source_text[:160]}"'
            )
    return "\n".join(lines)
