"""Memory schemas: a domain declared as data, validated with pydantic.

A schema names entity types (typed attributes, optional enum states), relationships between
entity types and event types. Its content hash is its id: grammars and stored records are keyed
by it, so an edited schema can never be confused with the old one.

Names may be written in any script (a Chinese user names attributes in Chinese); they may not
hold quotes, backslashes, dots or control characters, because they travel into JSON keys, JSON
paths and grammar keys (always as bound values or escaped literals, never as SQL identifiers).
Each attribute declares its *kind* (and for strings an optional *format*): extraction decides
which spans an attribute may take from the kind alone, never from its name.
"""

from __future__ import annotations

import hashlib
import json
import re
from functools import cached_property
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..lang import DEFAULT_LANGUAGES, Language, language_for

__all__ = [
    "Attribute",
    "AttributeKind",
    "EnumValue",
    "Resolution",
    "Retention",
    "EntityType",
    "RelationshipType",
    "EventType",
    "SchemaExample",
    "MemorySchema",
    "ATTRIBUTE_KINDS",
    "STRING_FORMATS",
    "check_name",
    "MAX_ATTRIBUTES",
    "MAX_STATES",
    "no_duplicates",
]

NAME = re.compile(r"^(?:[^\W\d]|_)[\w\-]*$")
ATTRIBUTE_KINDS = ("string", "number", "date", "time", "datetime", "boolean", "enum", "list", "ref")
AttributeKind = Literal["string", "number", "date", "time", "datetime", "boolean", "enum", "list", "ref"]
# What a string attribute holds; decides which spans it may take ("" = any text span).
STRING_FORMATS = ("", "code", "phone", "email", "contact", "name", "place", "address", "url")
MAX_NAME = 64
MAX_ENTITIES = 64
MAX_ATTRIBUTES = 128
MAX_ENUM = 256  # values of an enum attribute
MAX_STATES = 64
MAX_EVENT_TYPES = 128
MAX_TEXT = 500


def check_name(value: str, what: str) -> str:
    """A name usable as a JSON key and grammar key: letters of any script, digits, _ and -."""
    if not isinstance(value, str) or not value or len(value) > MAX_NAME or not NAME.match(value):
        raise ValueError(
            f"{what} {str(value)[:80]!r} must be an identifier: a letter or _ first, then letters, digits, "
            f"_ or - (any script, at most {MAX_NAME} characters)"
        )
    return value


class EnumValue(BaseModel):
    """One allowed value of an ``enum`` attribute and the words that also mean it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    value: str = Field(min_length=1, max_length=120)
    aliases: tuple[str, ...] = Field(default=(), max_length=32)


class Attribute(BaseModel):
    """One typed attribute; ``ref`` attributes point at another entity's id attribute."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    kind: AttributeKind = "string"
    description: str = Field(default="", max_length=MAX_TEXT)
    format: Literal["", "code", "phone", "email", "contact", "name", "place", "address", "url"] = ""
    values: tuple[EnumValue, ...] = Field(default=(), max_length=MAX_ENUM)  # enum kind only
    unit: tuple[str, ...] = Field(default=(), max_length=16)  # number kind: words of its unit
    aliases: tuple[str, ...] = Field(default=(), max_length=16)  # other words for it ("生日", "phone")
    # the value is taken only from a message saying one of its words (name, aliases): a birthday,
    # not any date told about a person
    needs_word: bool = False

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return check_name(v, "attribute name")

    @field_validator("values", mode="before")
    @classmethod
    def _values(cls, v: Any) -> Any:
        if isinstance(v, (list, tuple)):
            return tuple({"value": x} if isinstance(x, str) else x for x in v)
        return v

    @model_validator(mode="after")
    def _kind_fits(self) -> Attribute:
        if self.kind == "enum" and not self.values:
            raise ValueError(f"attribute {self.name}: kind enum needs values")
        if self.values and self.kind != "enum":
            raise ValueError(f"attribute {self.name}: values are only for kind enum")
        if self.format and self.kind != "string":
            raise ValueError(f"attribute {self.name}: format is only for kind string")
        if self.unit and self.kind != "number":
            raise ValueError(f"attribute {self.name}: unit is only for kind number")
        seen: set[str] = set()
        for ev in self.values:
            if ev.value in seen:
                raise ValueError(f"attribute {self.name}: duplicate value {ev.value!r}")
            seen.add(ev.value)
        return self

    @property
    def enum_values(self) -> tuple[str, ...]:
        return tuple(v.value for v in self.values)

    @property
    def label(self) -> str:
        """What the attribute is, in words: its description, else its name made readable."""
        return self.description or self.name.replace("_", " ")


class Resolution(BaseModel):
    """When two mentions are the same entity. Nothing merges unless a rule here says so."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # A mention without an id is the newest stored entity with these attribute values
    # (a complaint about order 1001 is that order's open ticket); else it gets a system key.
    match_on: tuple[str, ...] = ()
    # An id written as a suffix ("尾号2345", "ending in 2345") of at least this many digits
    # is the one stored id ending in it (0: never).
    id_suffix_digits: int = Field(default=0, ge=0, le=12)
    # Ids of this entity have this shape (a regex for the whole id, e.g. "BK-\\d+"): a code
    # that no keyword attributes ("cancel BK-44") goes to the one entity whose shape it has.
    id_pattern: str = Field(default="", max_length=200)
    # A mention with neither id nor key continues the session's latest entity of this type
    # (a dialogue filling one booking turn by turn); else it is stored without an entity.
    session_latest: bool = False

    @field_validator("id_pattern")
    @classmethod
    def _id_pattern(cls, v: str) -> str:
        try:
            re.compile(v)
        except re.error as exc:
            raise ValueError(f"id_pattern is not a valid regular expression: {exc}") from None
        return v


class Retention(BaseModel):
    """When memories may be forgotten. Without a policy nothing is ever deleted."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_age_days: float | None = Field(default=None, gt=0)
    min_importance: float | None = Field(default=None, ge=0, le=1)  # forget records scoring below
    forget_on_session_end: bool = False
    forget_after_compaction: bool = False  # once a summary covers a record, the record may go
    compact_after: int | None = Field(default=None, ge=2, le=1000)  # summarise once an entity has this many


class EntityType(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    attributes: tuple[Attribute, ...]
    states: tuple[str, ...] = ()
    is_root: bool = False
    id_attribute: str = ""  # a code that identifies it ("" = none: a key or the session identifies it)
    key: tuple[str, ...] = ()  # natural key: these attribute values, joined, are its id ("Alice")
    description: str = Field(default="", max_length=MAX_TEXT)
    aliases: tuple[str, ...] = Field(default=(), max_length=32)
    state_aliases: dict[str, tuple[str, ...]] = Field(default_factory=dict)  # state → words meaning it
    resolution: Resolution = Resolution()
    retention: Retention = Retention()

    def __hash__(self) -> int:  # dict field: hash the identity-defining parts
        return hash(
            (
                self.name,
                self.attributes,
                self.states,
                self.key,
                tuple(sorted(self.state_aliases.items())),
                self.resolution,
            )
        )

    @property
    def keywords(self) -> tuple[str, ...]:
        """Words that name this entity in text: its name's parts, id stem and aliases."""
        parts = re.findall(r"[A-Z][a-z]+|[a-z]+", self.name) if self.name.isascii() else [self.name]
        stem = self.id_attribute.lower().removesuffix("_id").replace("_", " ") if self.id_attribute else ""
        words = [w.lower() for w in parts] + [stem] + [a.lower() for a in self.aliases]
        return tuple(dict.fromkeys(w for w in words if w))

    @property
    def attribute_names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.attributes)

    def attribute(self, name: str) -> Attribute | None:
        return next((a for a in self.attributes if a.name == name), None)

    @property
    def value_attributes(self) -> tuple[Attribute, ...]:
        """Attributes other than the id (the id is stored as the entity key)."""
        return tuple(a for a in self.attributes if a.name != self.id_attribute)


class RelationshipType(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    source: str = Field(alias="from")
    type: str
    target: str = Field(alias="to")
    description: str = Field(default="", max_length=MAX_TEXT)

    @field_validator("type")
    @classmethod
    def _type(cls, v: str) -> str:
        return check_name(v, "relationship type")


class EventType(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    description: str = Field(default="", max_length=MAX_TEXT)
    entity: str = ""  # the entity type this event is usually about (optional hint)
    sets_state: str = ""  # the state this event puts its entity in (e.g. payment_received → paid)
    attributes: tuple[str, ...] = ()  # attributes of its entity this event informs (optional hint)
    examples: tuple[str, ...] = Field(default=(), max_length=32)
    keywords: tuple[str, ...] = Field(default=(), max_length=32)  # words that signal it ("complain", "投诉")
    # The event *is* the user asking something (user_inquiry): a message's question form
    # ("?", "where…", "吗", "请问") counts for it, and its absence against it.
    question: bool = False
    # The event commits to something (a purchase, a booking, a transfer) rather than looking for
    # it: a session usually searches before it commits, so it takes clearer evidence.
    commits: bool = False
    importance: float = Field(default=0.5, ge=0, le=1)  # feeds the forgetting score of its records
    retention: Retention = Retention()

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return check_name(v, "event type")

    @field_validator("keywords")
    @classmethod
    def _keywords(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        if not all(0 < len(w.strip()) <= 40 for w in v):
            raise ValueError("keywords must be short non-empty strings")
        return tuple(w.strip().lower() for w in v)

    @property
    def cues(self) -> tuple[str, ...]:
        """Word stems that name this event in text: its keywords and its name's long parts."""
        stems = [p[:6] for p in self.name.split("_") if len(p) >= 5] if self.name.isascii() else []
        return tuple(dict.fromkeys([*self.keywords, *stems]))

    @property
    def label(self) -> str:
        return self.description or readable(self.name)


def readable(name: str) -> str:
    """ "SearchOnewayFlight" / "user_inquiry" → "search oneway flight" / "user inquiry"."""
    if not name.isascii():
        return name
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name).replace("_", " ")
    return spaced.lower().strip()


class SchemaExample(BaseModel):
    """A worked example for the prompt: a message and the record it should produce."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    text: str = Field(min_length=1, max_length=MAX_TEXT)
    record: str  # canonical JSON of the record draft (a string keeps the model hashable)

    @field_validator("record", mode="before")
    @classmethod
    def _canonical(cls, v: Any) -> str:
        return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, separators=(",", ":"))


class MemorySchema(BaseModel):
    """A validated memory domain. Build with :func:`~appliance.domain.loading.parse_schema`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: str = Field(min_length=1, max_length=32)
    domain: str
    description: str = Field(default="", max_length=MAX_TEXT)
    languages: tuple[str, ...] = ()  # language packs to read messages with (empty: every shipped pack)
    entities: tuple[EntityType, ...] = Field(min_length=1, max_length=MAX_ENTITIES)
    relationships: tuple[RelationshipType, ...] = ()
    event_types: tuple[EventType, ...] = Field(min_length=1, max_length=MAX_EVENT_TYPES)
    examples: tuple[SchemaExample, ...] = Field(default=(), max_length=8)

    @field_validator("domain")
    @classmethod
    def _domain(cls, v: str) -> str:
        return check_name(v, "domain")

    @model_validator(mode="after")
    def _consistent(self) -> MemorySchema:
        names = [e.name for e in self.entities]
        no_duplicates(names, "entity")
        no_duplicates([e.name for e in self.event_types], "event type")
        ids = {e.name: e.id_attribute for e in self.entities}
        for ent in self.entities:
            for a in ent.attributes:
                if a.kind == "ref" and not any(
                    a.name == idattr for n, idattr in ids.items() if n != ent.name and idattr
                ):
                    raise ValueError(
                        f"entities.{ent.name}.attributes: {a.name}(ref) refers to no entity "
                        f"(no other entity has {a.name!r} as its id attribute)"
                    )
            for k in ent.key:
                if k not in ent.attribute_names or k == ent.id_attribute:
                    raise ValueError(f"entities.{ent.name}.key: {k!r} is not a non-id attribute")
        for i, rel in enumerate(self.relationships):
            for end, value in (("from", rel.source), ("to", rel.target)):
                if value not in names:
                    raise ValueError(
                        f"relationships[{i}].{end}: {value!r} is not a declared entity (declared: {', '.join(names)})"
                    )
        for ev in self.event_types:
            if ev.entity and ev.entity not in names:
                raise ValueError(f"event_types.{ev.name}.entity: {ev.entity!r} is not an entity")
            owner = next((e for e in self.entities if e.name == ev.entity), None)
            if ev.sets_state and (owner is None or ev.sets_state not in owner.states):
                raise ValueError(
                    f"event_types.{ev.name}.sets_state: {ev.sets_state!r} is not a state of {ev.entity or '(no entity)'}"
                )
            pool = set(owner.attribute_names) if owner else {x for e in self.entities for x in e.attribute_names}
            for name in ev.attributes:
                if name not in pool:
                    raise ValueError(
                        f"event_types.{ev.name}.attributes: {name!r} is not an attribute of {ev.entity or 'any entity'}"
                    )
        for ent in self.entities:
            for attr in ent.resolution.match_on:
                if attr not in ent.attribute_names or attr == ent.id_attribute:
                    raise ValueError(f"entities.{ent.name}.resolution.match_on: {attr!r} is not a non-id attribute")
            for state in ent.state_aliases:
                if state not in ent.states:
                    raise ValueError(f"entities.{ent.name}.state_aliases: {state!r} is not one of its states")
        return self

    # --- lookups -----------------------------------------------------------------
    @cached_property
    def language(self) -> Language:
        """The language packs messages under this schema are read with."""
        return language_for(self.languages or DEFAULT_LANGUAGES)

    @cached_property
    def entity_nouns(self) -> tuple[str, ...]:
        """Every word that names one of its entity types (names' parts and aliases)."""
        return tuple(dict.fromkeys(k for e in self.entities for k in e.keywords))

    @property
    def entity_names(self) -> tuple[str, ...]:
        return tuple(e.name for e in self.entities)

    @property
    def event_names(self) -> tuple[str, ...]:
        return tuple(e.name for e in self.event_types)

    @property
    def relationship_names(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(r.type for r in self.relationships))

    def entity(self, name: str) -> EntityType:
        for e in self.entities:
            if e.name == name:
                return e
        raise KeyError(name)

    @cached_property
    def _events_by_name(self) -> dict[str, EventType]:
        return {e.name: e for e in self.event_types}

    def event_type(self, name: str | None) -> EventType | None:
        """The declared event type called ``name`` (None when there is none)."""
        return self._events_by_name.get(name) if name is not None else None

    @cached_property
    def entity_keywords(self) -> dict[str, tuple[str, ...]]:
        """Entity name → words that name it in text (for tagging ids like "order 12345")."""
        return {e.name: e.keywords for e in self.entities}

    @cached_property
    def entity_id_patterns(self) -> dict[str, re.Pattern[str]]:
        """Entity name → the declared shape of its ids (entities that declare one)."""
        return {e.name: re.compile(e.resolution.id_pattern) for e in self.entities if e.resolution.id_pattern}

    def entity_for_id_attribute(self, attribute: str) -> EntityType | None:
        return next((e for e in self.entities if e.id_attribute and e.id_attribute == attribute), None)

    def relationship_between(self, a: str, b: str) -> RelationshipType | None:
        """The declared relationship joining entity types a and b, either direction."""
        for r in self.relationships:
            if {r.source, r.target} == {a, b}:
                return r
        return None

    @property
    def schema_id(self) -> str:
        """Content hash: equal for equal schemas, different after any edit."""
        canonical = json.dumps(self.to_json_dict(), sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]

    @property
    def slug(self) -> str:
        """The domain as a file-name-safe word (grammar directories)."""
        return re.sub(r"[^A-Za-z0-9_-]", "_", self.domain) if not self.domain.isascii() else self.domain

    def to_json_dict(self) -> dict[str, Any]:
        """The schema in its file form (objects, not shorthand)."""
        return {
            "schema_version": self.schema_version,
            "domain": self.domain,
            "description": self.description,
            **({"languages": list(self.languages)} if self.languages else {}),
            "entities": {
                e.name: {
                    "attributes": [_attribute_dict(a) for a in e.attributes],
                    "states": list(e.states),
                    "is_root": e.is_root,
                    "id_attribute": e.id_attribute or None,
                    **({"key": list(e.key)} if e.key else {}),
                    "description": e.description,
                    "aliases": list(e.aliases),
                    "state_aliases": {k: list(v) for k, v in e.state_aliases.items()},
                    "resolution": _resolution_dict(e.resolution),
                    "retention": e.retention.model_dump(),
                }
                for e in self.entities
            },
            "relationships": [r.model_dump(by_alias=True) for r in self.relationships],
            "event_types": [
                {
                    **{k: v for k, v in ev.model_dump().items() if k not in ("attributes", "commits")},
                    **({"commits": True} if ev.commits else {}),
                    **({"attributes": list(ev.attributes)} if ev.attributes else {}),
                    "examples": list(ev.examples),
                    "keywords": list(ev.keywords),
                    "retention": ev.retention.model_dump(),
                }
                for ev in self.event_types
            ],
            "examples": [{"text": x.text, "record": json.loads(x.record)} for x in self.examples],
        }


def _attribute_dict(a: Attribute) -> dict[str, Any]:
    """An attribute in file form; fields at their default are left out (so schemas written
    before a field existed keep their content hash)."""
    out: dict[str, Any] = {"name": a.name, "kind": a.kind, "description": a.description}
    if a.format:
        out["format"] = a.format
    if a.values:
        out["values"] = [{"value": v.value, "aliases": list(v.aliases)} if v.aliases else v.value for v in a.values]
    if a.unit:
        out["unit"] = list(a.unit)
    if a.aliases:
        out["aliases"] = list(a.aliases)
    if a.needs_word:
        out["needs_word"] = True
    return out


def _resolution_dict(r: Resolution) -> dict[str, Any]:
    out = r.model_dump()
    if not r.session_latest:
        out.pop("session_latest")
    return out


def no_duplicates(values: list[str], what: str) -> None:
    """Refuse a list that names something twice."""
    seen: set[str] = set()
    for v in values:
        if v in seen:
            raise ValueError(f"duplicate {what} {v!r}")
        seen.add(v)
