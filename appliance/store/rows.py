"""Row ↔ object mapping for the ``memories`` and ``entities`` tables (one column list each)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..domain.records import Entity, MemoryRecord, Relationship

__all__ = [
    "MEMORY_COLUMNS",
    "MEMORY_SELECT",
    "ENTITY_SELECT",
    "memory_row",
    "record_from_row",
    "entity_from_row",
    "relationship_from_row",
    "dumps",
]

# Column order of memory rows written and read by this package (the table may hold more).
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
    "spans",
    "recorded_at",
    "request_id",
)
# the engine types of those columns, for bulk loads that name them
MEMORY_TYPES = dict.fromkeys(MEMORY_COLUMNS, "VARCHAR") | {
    "ts": "TIMESTAMPTZ",
    "recorded_at": "TIMESTAMPTZ",
    "confidence": "FLOAT8",
    "attributes": "JSON",
    "spans": "JSON",
}
MEMORY_SELECT = ", ".join(f"m.{c}" for c in MEMORY_COLUMNS)
ENTITY_SELECT = "e.entity_type, e.entity_id, e.state, e.attributes, e.version, e.updated_at, e.as_of, e.session_id"


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def memory_row(r: MemoryRecord, recorded_at: Any = None, request_id: str | None = None) -> tuple[Any, ...]:
    """A record as a ``memories`` row, in ``MEMORY_COLUMNS`` order."""
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
        dumps(r.attributes),
        r.raw_output,
        r.note,
        dumps(r.spans),
        recorded_at,
        request_id,
    )


def record_from_row(row: Sequence[Any], relationships: list[Relationship]) -> MemoryRecord:
    (mid, session, ts, schema_id, status, conf, text, ev, etype, eid, state, attrs, raw, note, spans, *_rest) = row
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
        spans=json.loads(spans or "{}"),
        raw_output=raw or "",
        note=note or "",
        relationships=relationships,
    )


def entity_from_row(row: Sequence[Any]) -> Entity:
    etype, eid, state, attrs, version, updated, as_of, session = row
    return Entity(
        type=etype,
        id=eid,
        state=state,
        attributes=json.loads(attrs or "{}"),
        version=version,
        updated_at=updated,
        as_of=as_of,
        session_id=session,
    )


def relationship_from_row(row: Sequence[Any]) -> Relationship:
    return Relationship(type=row[0], source_type=row[1], source_id=row[2], target_type=row[3], target_id=row[4])


def holding_clause(attributes: Sequence[tuple[str, str]], alias: str = "") -> tuple[str, list[Any]]:
    """SQL (and its parameters) for "the row holds a value of one of ``attributes``" ((entity
    type, name) pairs, names checked against the schema by the caller)."""
    p = f"{alias}." if alias else ""
    cond = " OR ".join(
        f"({p}entity_type = ? AND json_extract_string({p}attributes, ?) IS NOT NULL)" for _ in attributes
    )
    return f"({cond})", [x for etype, name in attributes for x in (etype, f'$."{name}"')]
