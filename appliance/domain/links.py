"""Relationships and mentions implied by a record's filled reference attributes.

``Order.user_id = U-1`` names the User U-1 (a mention) and, when the schema declares a
relationship between User and Order, implies ``User U-1 OWNS Order <id>``. Extraction, import,
editing and resolution all derive them here, so the rule exists once.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date
from typing import Any

from ..lang.dates import date_range, find_dates
from .records import MAX_RELATIONSHIPS, EntityRef, MemoryRecord, Relationship
from .schema import EntityType, MemorySchema

__all__ = ["derive_relationships", "derived_links", "relationship_of", "mentions_of", "days_of"]


def derive_relationships(
    schema: MemorySchema, entity: EntityType, entity_id: str | None, attributes: Mapping[str, Any]
) -> list[dict[str, str]]:
    """Relationships implied by filled ref attributes, in draft form (``from_type`` …)."""
    if entity_id is None:
        return []
    rels = []
    for a in entity.value_attributes:
        value = attributes.get(a.name)
        if a.kind != "ref" or value is None:
            continue
        other = schema.entity_for_id_attribute(a.name)
        rel = schema.relationship_between(other.name, entity.name) if other else None
        if other is None or rel is None:
            continue
        ends = {other.name: str(value), entity.name: entity_id}
        rels.append(
            {
                "type": rel.type,
                "from_type": rel.source,
                "from_id": ends[rel.source],
                "to_type": rel.target,
                "to_id": ends[rel.target],
            }
        )
    return rels[:MAX_RELATIONSHIPS]


def relationship_of(r: Mapping[str, str]) -> Relationship:
    """A relationship in draft form (``from_type``/``to_id`` …) as stored."""
    return Relationship(
        type=r["type"],
        source_type=r["from_type"],
        source_id=r["from_id"],
        target_type=r["to_type"],
        target_id=r["to_id"],
    )


def derived_links(
    schema: MemorySchema, entity: EntityType, entity_id: str | None, attributes: Mapping[str, Any]
) -> list[Relationship]:
    """``derive_relationships`` in stored form."""
    return [relationship_of(r) for r in derive_relationships(schema, entity, entity_id, attributes)]


def mentions_of(schema: MemorySchema, entity: EntityType, attributes: Mapping[str, Any]) -> list[EntityRef]:
    """The entities a record names through its filled ref attributes (Order.user_id → User)."""
    out = []
    for a in entity.value_attributes:
        target = schema.entity_for_id_attribute(a.name) if a.kind == "ref" else None
        if target is not None and attributes.get(a.name) is not None:
            out.append(EntityRef(type=target.name, id=str(attributes[a.name])))
    return out


def days_of(schema: MemorySchema, rec: MemoryRecord) -> list[tuple[date, date, str]]:
    """The days a record is about: its message day, each date value it holds (an ISO day or
    month of a ``date``/``datetime`` attribute), and each date its text states (read against the
    message time), with where each came from. The text's own dates keep a record findable by
    day when extraction chose an entity without a date attribute ("we took the kids to Harewood
    House on April 5" stored as a place)."""
    out: list[tuple[date, date, str]] = [(rec.timestamp.date(), rec.timestamp.date(), "message")]
    for found in find_dates(schema.language, rec.source_text, rec.timestamp):
        rng = (found.first, found.last) if found.first and found.last else date_range(found.value or "")
        if rng is not None and (rng[0], rng[1]) not in {(a, b) for a, b, _ in out}:
            out.append((rng[0], rng[1], "text"))
    ent = schema.entity(rec.entity_type) if rec.entity_type in schema.entity_names else None
    if ent is None:
        return out
    for a in ent.attributes:
        value = rec.attributes.get(a.name)
        if a.kind in ("date", "datetime") and isinstance(value, str):
            rng = date_range(value[:10] if a.kind == "datetime" else value)
            if rng is not None:
                out.append((rng[0], rng[1], a.name))
    return out
