"""Forgetting policies: which records the schema allows to be deleted, and why.

Policies live in the schema (``retention`` on an event type or an entity type): an age
limit, a minimum importance score, forgetting when a session ends, and forgetting the
originals once a summary covers them. A record is forgotten only when a policy that
applies to its event type or its entity type says so; with no policy nothing is ever
selected. Summary records are never selected — they are what remains. ``select`` is pure:
the caller shows its result as a dry run or hands it to the store to delete.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ..domain.schema import MemorySchema, Retention

__all__ = ["Decision", "importance", "select", "policies", "schema_of"]

UNKNOWN_EVENT_IMPORTANCE = 0.2


@dataclass(frozen=True)
class Decision:
    memory_id: str
    session_id: str
    policy: str  # where the rule lives, e.g. "event_types.user_inquiry.retention.max_age_days=365"
    reason: str
    event_type: str | None
    entity_type: str | None
    entity_id: str | None
    recorded_at: datetime
    importance: float


def importance(schema: MemorySchema, event_type: str | None, status: str, confidence: float) -> float:
    """0–1: the event type's declared importance, discounted by extraction confidence;
    a record a person reviewed keeps its full weight."""
    ev = schema.event_type(event_type)
    base = ev.importance if ev is not None else UNKNOWN_EVENT_IMPORTANCE
    if status == "reviewed":
        return round(base, 4)
    return round(base * (0.5 + 0.5 * max(0.0, min(1.0, confidence))), 4)


def policies(schema: MemorySchema) -> list[tuple[str, str, Retention]]:
    """(kind, name, retention) for every event/entity type that declares a policy."""
    out: list[tuple[str, str, Retention]] = []
    for ev in schema.event_types:
        if ev.retention != Retention():
            out.append(("event_types", ev.name, ev.retention))
    for ent in schema.entities:
        if ent.retention != Retention():
            out.append(("entities", ent.name, ent.retention))
    return out


def _verdict(
    r: Retention, where: str, age: timedelta, score: float, ended: bool, compacted: bool
) -> tuple[str, str] | None:
    if r.max_age_days is not None and age > timedelta(days=r.max_age_days):
        return f"{where}.max_age_days={r.max_age_days:g}", f"older than {r.max_age_days:g} days ({age.days} d)"
    if r.min_importance is not None and score < r.min_importance:
        return f"{where}.min_importance={r.min_importance:g}", f"importance {score:.2f} < {r.min_importance:g}"
    if r.forget_on_session_end and ended:
        return f"{where}.forget_on_session_end", "its session ended"
    if r.forget_after_compaction and compacted:
        return f"{where}.forget_after_compaction", "a summary covers it"
    return None


def schema_of(
    schemas: Sequence[MemorySchema], schema_id: str, event: str | None, etype: str | None
) -> MemorySchema | None:
    """The loaded schema a record was written under; a record of an earlier version of a
    schema goes to the loaded one that declares its event (or entity) type; else none."""
    for s in schemas:
        if s.schema_id == schema_id:
            return s
    for s in schemas:
        if (event is not None and event in s.event_names) or (etype is not None and etype in s.entity_names):
            return s
    return None


def select(
    schemas: Sequence[MemorySchema], facts: Sequence[tuple[Any, ...]], now: datetime, assume_ended: bool = False
) -> list[Decision]:
    """The records the policies of *their own* schema would forget at ``now``, each with its
    rule (``assume_ended``: as if their sessions had ended — the preview of ending one).
    ``facts`` rows: (memory_id, session_id, ts, status, confidence, event_type, entity_type,
    entity_id, is_summary, session_ended, compacted, schema_id)."""
    chosen = []
    for mid, session, ts, status, conf, event, etype, eid, is_summary, ended, compacted, schema_id in facts:
        if is_summary:
            continue
        schema = schema_of(schemas, schema_id, event, etype)
        if schema is None:
            continue
        by_event = {e.name: e.retention for e in schema.event_types}
        by_entity = {e.name: e.retention for e in schema.entities}
        score = importance(schema, event, status, conf)
        rules = []
        if event in by_event:
            rules.append((by_event[event], f"event_types.{event}.retention"))
        if etype in by_entity:
            rules.append((by_entity[etype], f"entities.{etype}.retention"))
        for retention, where in rules:
            verdict = _verdict(retention, where, now - ts, score, ended or assume_ended, compacted)
            if verdict is not None:
                chosen.append(Decision(mid, session, verdict[0], verdict[1], event, etype, eid, ts, score))
                break
    return chosen
