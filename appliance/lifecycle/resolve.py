"""Entity resolution and corrections: which stored entity a new record is about.

Only the schema's rules merge anything (``EntityType.resolution``):

* ``id_suffix_digits: N`` — an id the text marks as a suffix ("订单尾号2345", "ending in
  2345") of ≥ N digits resolves to the one stored id ending in it, when exactly one does.
  With none, it is stored as given and remembered as partial: a later full id that ends in
  it ("order 12345") merges the two.
* ``match_on: [attr, …]`` — a mention without an id ("my complaint about order 1001") is the
  newest stored entity with the same values of those attributes; with none it gets a system
  key (``auto-…``) so it can be linked, updated and found.

A correction ("not 12345, I meant 12354") re-points the session's latest record about the
negated id to the new one. Every decision is written into the record's note and, for
merges and corrections, into the store's merge log.
"""

from __future__ import annotations

from typing import Any

from ..domain.links import derived_links, mentions_of
from ..domain.records import MemoryRecord, RecordWrite
from ..domain.schema import EntityType, MemorySchema
from ..store import MemoryStore

__all__ = ["Resolver"]


class Resolver:
    """Reads the store to decide a record's entity; writes nothing (the plan it returns is
    stored in one transaction by ``MemoryStore.write``)."""

    def __init__(self, schema: MemorySchema, store: MemoryStore) -> None:
        self.schema = schema
        self.store = store
        self.lang = schema.language

    def resolve(self, rec: MemoryRecord) -> RecordWrite:
        res = RecordWrite(record=rec)
        if rec.status == "unparsed" or not rec.entity_type or rec.entity_type not in self.schema.entity_names:
            return res
        ent = self.schema.entity(rec.entity_type)
        attrs = dict(rec.attributes)
        entity_id = rec.entity_id
        # refs first: "投诉订单尾号2345" names order 12345 when the rule allows it
        for a in ent.value_attributes:
            target = self.schema.entity_for_id_attribute(a.name) if a.kind == "ref" else None
            value = attrs.get(a.name)
            if target is not None and value is not None:
                attrs[a.name] = self._by_suffix(res, rec, target, str(value))
        if entity_id is not None:
            entity_id = self._by_suffix(res, rec, ent, entity_id)
        elif ent.key:
            entity_id = self._by_key(ent, attrs)
        elif ent.resolution.match_on:
            entity_id = self._by_values(res, rec, ent, attrs)
        elif ent.resolution.session_latest:
            entity_id = self._session_latest(res, rec, ent)
        res.record = self._rebuilt(rec, ent, entity_id, attrs)
        if entity_id is not None:
            self._correction(res, rec, ent, entity_id)
        if res.notes:
            note = "; ".join(res.notes)
            res.record = res.record.model_copy(update={"note": f"{rec.note} | {note}".strip(" |")})
        return res

    def _by_suffix(self, res: RecordWrite, rec: MemoryRecord, ent: EntityType, value: str) -> str:
        n = ent.resolution.id_suffix_digits
        if not n or not value.isdigit() or len(value) < n:
            return value
        if self.lang.suffix_marked(rec.source_text, value):
            found = self.store.entities.ids_ending_with(rec.session_id, ent.name, value)
            if len(found) == 1:
                res.notes.append(f"resolved {ent.name} …{value} → {found[0]} (id_suffix_digits={n})")
                return found[0]
            if len(found) > 1:
                res.notes.append(f"{ent.name} …{value} matches {len(found)} ids ({', '.join(found[:3])}): not merged")
            res.partial_ids.append((ent.name, value))
            return value
        for partial in self.store.merges.partial_ids_of(rec.session_id, ent.name, value):
            res.merges.append((ent.name, partial, value, f"id_suffix_digits={n}"))
            res.notes.append(f"merges {ent.name} …{partial} into {value} (id_suffix_digits={n})")
        return value

    def _by_values(self, res: RecordWrite, rec: MemoryRecord, ent: EntityType, attrs: dict[str, Any]) -> str | None:
        keys = ent.resolution.match_on
        values = {k: str(attrs[k]) for k in keys if attrs.get(k) is not None}
        if len(values) != len(keys):
            return None  # nothing to match on: the record stays without an entity
        found = self.store.entities.with_values(rec.session_id, ent.name, values)
        shown = ", ".join(f"{k}={v}" for k, v in values.items())
        if found is not None:
            res.notes.append(f"resolved {ent.name} by {shown} → {found}")
            return found
        minted = f"auto-{rec.memory_id[:8]}"
        res.notes.append(f"new {ent.name} {minted} (system key; {shown})")
        return minted

    @staticmethod
    def _by_key(ent: EntityType, attrs: dict[str, Any]) -> str | None:
        """An entity known by its natural key: the key values, joined, are its id ("Alice");
        without all of them the record names no entity."""
        values = [attrs.get(k) for k in ent.key]
        if any(v is None or str(v).strip() == "" for v in values):
            return None
        return " / ".join(str(v).strip() for v in values)

    def _session_latest(self, res: RecordWrite, rec: MemoryRecord, ent: EntityType) -> str:
        """``session_latest``: the session's latest entity of this type, else a new one."""
        found = self.store.entities.latest_of_type(rec.session_id, ent.name)
        if found is not None:
            return found
        minted = f"auto-{rec.memory_id[:8]}"
        res.notes.append(f"new {ent.name} {minted} (the session's first)")
        return minted

    def corrected_event(self, text: str, session_id: str) -> str | None:
        """The event type of the session's latest record about an id ``text`` rules out
        ("Sorry, not 12345, I meant 12354" restates that record; it names no event itself)."""
        for wrong in sorted(self.lang.ruled_out(text, self.schema.entity_nouns)):
            earlier = self._latest_about(session_id, wrong)
            if earlier is not None and earlier.event_type in self.schema.event_names:
                return earlier.event_type
        return None

    def _correction(self, res: RecordWrite, rec: MemoryRecord, ent: EntityType, entity_id: str) -> None:
        for wrong in self.lang.ruled_out(rec.source_text, self.schema.entity_nouns) - {entity_id}:
            earlier = self._latest_about(rec.session_id, wrong, ent.name, besides=rec.memory_id)
            if earlier is not None:
                res.correction = (earlier.memory_id, ent.name, wrong, entity_id)
                res.notes.append(f"corrects memory {earlier.memory_id[:8]}: {ent.name} {wrong} → {entity_id}")
                return

    def _latest_about(
        self, session_id: str, entity_id: str, entity_type: str | None = None, besides: str | None = None
    ) -> MemoryRecord | None:
        """The session's newest record about ``entity_id`` (of ``entity_type``; not ``besides``)."""
        return self.store.records.latest_about(session_id, entity_id, entity_type, besides)

    def _rebuilt(
        self, rec: MemoryRecord, ent: EntityType, entity_id: str | None, attrs: dict[str, Any]
    ) -> MemoryRecord:
        if entity_id == rec.entity_id and attrs == rec.attributes:
            return rec
        return rec.model_copy(
            update={
                "entity_id": entity_id,
                "attributes": attrs,
                "relationships": derived_links(self.schema, ent, entity_id, attrs),
                "mentions": mentions_of(self.schema, ent, attrs),
            }
        )
