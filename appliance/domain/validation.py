"""Whether a record's fields are a valid memory of a schema: the one check behind an edit, an
import and a restore, so no edge can store what an edit would refuse ("Spaceship", state
"exploded", ``amount: "not a number"``)."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from ..errors import ApplianceError, QueryError
from .drafts import draft_model
from .inputs import clean_memory_id, clean_session, clean_text
from .links import derive_relationships
from .records import SUMMARY_EVENT, MemoryRecord, Relationship
from .schema import MemorySchema

__all__ = ["check_fields", "check_record"]


def check_fields(schema: MemorySchema, fields: dict[str, Any]) -> dict[str, Any]:
    """Validate ``event_type``/``entity_type``/``entity_id``/``state``/``attributes`` against
    ``schema``; returns the attributes completed with nulls. Raises ``QueryError`` naming the
    field and the problem."""
    for key in ("event_type", "entity_type", "state", "entity_id"):
        if fields.get(key) is not None and not isinstance(fields[key], str):
            raise QueryError(f"{key} must be a string or null")
    if not isinstance(fields.get("attributes", {}), dict):
        raise QueryError("attributes must be an object of attribute → value")
    try:
        ent = schema.entity(str(fields.get("entity_type")))
    except KeyError:
        raise QueryError(f"unknown entity type {str(fields.get('entity_type'))[:60]!r}") from None
    given = fields.get("attributes") or {}
    attrs = {a.name: given.get(a.name) for a in ent.value_attributes}
    extra = set(given) - set(attrs)
    if extra:
        raise QueryError(f"{ent.name} has no attribute(s) {sorted(str(x)[:60] for x in extra)}")
    draft = {
        "event_type": fields.get("event_type"),
        "entity": {"type": ent.name, "id": fields.get("entity_id"), "state": fields.get("state"), "attributes": attrs},
        "relationships": derive_relationships(schema, ent, fields.get("entity_id"), attrs),
    }
    try:
        draft_model(schema).model_validate(draft)
    except ValidationError as exc:
        # Union errors list every entity branch: report the branch of this entity type.
        idx = schema.entity_names.index(ent.name)
        errs = [e for e in exc.errors() if f"E{idx}Entity" in map(str, e["loc"])] or exc.errors()
        loc = ".".join(str(p) for p in errs[0]["loc"] if not str(p).endswith("Entity"))
        raise QueryError(f"invalid value at {loc}: {errs[0]['msg']}") from None
    return attrs


def check_record(schemas: list[MemorySchema], rec: MemoryRecord) -> tuple[MemorySchema | None, str]:
    """(the schema ``rec`` is valid under, "") or (None, the problem that keeps it out of the
    store): its ids and text as every edge checks them, and — unless it is an unparsed text —
    its fields against the loaded schema it names, else the loaded schema that has its entity
    type (a record exported under an earlier version of the schema)."""
    try:
        clean_memory_id(rec.memory_id)
        clean_session(rec.session_id)
        clean_text(rec.source_text, "source_text")
    except ApplianceError as exc:
        return None, exc.message
    if rec.status == "unparsed":
        return None, ""
    fields = rec.model_dump(include={"event_type", "entity_type", "entity_id", "state", "attributes"})
    named = [s for s in schemas if s.schema_id == rec.schema_id]
    others = [s for s in schemas if s.schema_id != rec.schema_id and rec.entity_type in s.entity_names]
    problem = f"no loaded schema has entity type {str(rec.entity_type)[:60]!r}"
    for schema in named + others:
        if rec.event_type == SUMMARY_EVENT and schema.event_names:
            # compaction's reserved event: the entity and its values are checked all the same
            fields["event_type"] = schema.event_names[0]
        try:
            check_fields(schema, fields)
        except QueryError as exc:
            problem = exc.message
            continue
        undeclared = [r for r in rec.relationships if not _declared(schema, r)]
        if undeclared:
            r = undeclared[0]
            return None, f"relationship {r.source_type[:40]} -{r.type[:40]}-> {r.target_type[:40]} is not in the schema"
        return schema, ""
    return None, problem


def _declared(schema: MemorySchema, r: Relationship) -> bool:
    """Whether the schema declares this relationship between these entity types."""
    return any(
        d.type == r.type and d.source == r.source_type and d.target == r.target_type for d in schema.relationships
    )
