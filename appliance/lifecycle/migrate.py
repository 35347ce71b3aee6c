"""Schema evolution: an explicit, reversible migration of stored records to a new schema.

A migration names what changed — renamed event types, renamed or dropped attributes,
renamed states — and ``plan`` rewrites every stored record and entity accordingly, then
checks each rewritten record against the *new* schema. If any record would not fit, the
migration is refused with the list of problems and nothing changes. Applied, the store
keeps the before-image of every row, so ``revert`` restores them exactly.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..domain.records import SUMMARY_EVENT
from ..domain.schema import MemorySchema

__all__ = ["MigrationSpec", "MigrationPlan", "plan"]


class MigrationSpec(BaseModel):
    """What changed between two schema versions (everything else maps to itself)."""

    model_config = ConfigDict(extra="forbid")

    rename_event_types: dict[str, str] = Field(default_factory=dict)
    rename_attributes: dict[str, dict[str, str]] = Field(default_factory=dict)  # entity → old → new
    drop_attributes: dict[str, list[str]] = Field(default_factory=dict)  # entity → names
    rename_states: dict[str, dict[str, str]] = Field(default_factory=dict)  # entity → old → new


@dataclass
class MigrationPlan:
    memories: list[tuple[str, dict[str, Any], dict[str, Any]]] = field(default_factory=list)
    entities: list[tuple[tuple[str, str, str], dict[str, Any], dict[str, Any]]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    unchanged: int = 0

    def summary(self) -> dict[str, Any]:
        return {
            "records_changed": len(self.memories),
            "entities_changed": len(self.entities),
            "problems": self.problems[:20],
            "problem_count": len(self.problems),
        }


def _attrs(spec: MigrationSpec, etype: str | None, attrs: dict[str, Any]) -> dict[str, Any]:
    if not etype:
        return dict(attrs)
    renames = spec.rename_attributes.get(etype, {})
    dropped = set(spec.drop_attributes.get(etype, []))
    return {renames.get(k, k): v for k, v in attrs.items() if k not in dropped}


def _state(spec: MigrationSpec, etype: str | None, state: str | None) -> str | None:
    if state is None or not etype:
        return state
    return spec.rename_states.get(etype, {}).get(state, state)


def _fits(target: MemorySchema, event: str | None, etype: str | None, state: str | None, attrs: dict[str, Any]) -> str:
    """Why a rewritten record does not fit ``target`` ("" when it does)."""
    if event is not None and event != SUMMARY_EVENT and event not in target.event_names:
        return f"event type {event!r} is not in the new schema"
    if etype is None:
        return ""
    if etype not in target.entity_names:
        return f"entity type {etype!r} is not in the new schema"
    ent = target.entity(etype)
    extra = set(attrs) - set(ent.attribute_names)
    if extra:
        return f"{etype} has no attribute(s) {sorted(extra)} in the new schema"
    if state is not None and state not in ent.states:
        return f"{etype} state {state!r} is not in the new schema"
    return ""


def plan(
    target: MemorySchema,
    spec: MigrationSpec,
    memories: list[tuple[str, str, str | None, str | None, str | None, str]],
    entities: list[tuple[str, str, str, str | None, str]],
) -> MigrationPlan:
    """Rewrite rows for ``target``; ``memories``/``entities`` are raw store rows."""
    out = MigrationPlan()
    for mid, schema_id, event, etype, state, attrs_json in memories:
        attrs = json.loads(attrs_json or "{}")
        before = {"schema_id": schema_id, "event_type": event, "state": state, "attributes": attrs}
        new_event = spec.rename_event_types.get(event, event) if event else event
        new_state, new_attrs = _state(spec, etype, state), _attrs(spec, etype, attrs)
        after = {"schema_id": target.schema_id, "event_type": new_event, "state": new_state, "attributes": new_attrs}
        problem = _fits(target, new_event, etype, new_state, new_attrs)
        if problem:
            out.problems.append(f"memory {mid[:8]}: {problem}")
        out.memories.append((mid, before, after))
    for session, etype, eid, state, attrs_json in entities:
        attrs = json.loads(attrs_json or "{}")
        new_state, new_attrs = _state(spec, etype, state), _attrs(spec, etype, attrs)
        after = {"state": new_state, "attributes": new_attrs}
        before = {"state": state, "attributes": attrs}
        if after == before:
            out.unchanged += 1
            continue
        problem = _fits(target, None, etype, new_state, new_attrs)
        if problem:
            out.problems.append(f"entity {etype} {eid}: {problem}")
        out.entities.append(((session, etype, eid), before, after))
    return out
