"""Memory schemas: a domain declared as data, validated with pydantic.

A schema names entity types (typed attributes, optional enum states), relationships
between entity types and event types. Its content hash is its id: grammars and stored
records are keyed by it, so an edited schema can never be confused with the old one.
"""

from __future__ import annotations

import hashlib
import json
import re
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .errors import SchemaError

__all__ = [
    "Attribute",
    "Resolution",
    "Retention",
    "EntityType",
    "RelationshipType",
    "EventType",
    "MemorySchema",
    "load_schema",
    "parse_schema",
    "schema_problems",
    "ATTRIBUTE_KINDS",
]

IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
ATTRIBUTE_KINDS = ("string", "number", "date", "ref")
MAX_ENTITIES = 64
MAX_ATTRIBUTES = 48
MAX_ENUM = 64
MAX_EVENT_TYPES = 128
MAX_TEXT = 500
MAX_SCHEMA_BYTES = 1_000_000
_SHORTHAND = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*(?:\((ref)\)|:\s*(string|number|date))?$")


def _check_ident(value: str, what: str) -> str:
    if not IDENT.match(value):
        raise ValueError(f"{what} {value[:80]!r} must be an identifier (letters, digits, _)")
    return value


class Attribute(BaseModel):
    """One typed attribute; ``ref`` attributes point at another entity's id attribute."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    kind: Literal["string", "number", "date", "ref"] = "string"
    description: str = Field(default="", max_length=MAX_TEXT)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return _check_ident(v, "attribute name")

    @classmethod
    def parse(cls, raw: Any) -> Attribute:
        """Accept ``"user_id(ref)"`` / ``"amount:number"`` shorthand or an object."""
        if isinstance(raw, str):
            m = _SHORTHAND.match(raw.strip())
            if not m:
                raise ValueError(f"attribute {raw[:80]!r} is not 'name', 'name(ref)' or 'name:string|number|date'")
            kind: Any = m.group(2) or m.group(3) or "string"
            return cls(name=m.group(1), kind=kind)
        if isinstance(raw, dict):
            return cls.model_validate(raw)
        raise ValueError(f"attribute must be a string or an object, not {type(raw).__name__}")


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
    id_attribute: str = ""
    description: str = Field(default="", max_length=MAX_TEXT)
    aliases: tuple[str, ...] = Field(default=(), max_length=32)
    state_aliases: dict[str, tuple[str, ...]] = Field(default_factory=dict)  # state → words meaning it
    resolution: Resolution = Resolution()
    retention: Retention = Retention()

    def __hash__(self) -> int:  # dict field: hash the identity-defining parts
        return hash(
            (self.name, self.attributes, self.states, tuple(sorted(self.state_aliases.items())), self.resolution)
        )

    @property
    def keywords(self) -> tuple[str, ...]:
        """Words that name this entity in text: its name's parts, id stem and aliases."""
        parts = re.findall(r"[A-Z][a-z]+|[a-z]+", self.name)
        stem = self.id_attribute.lower().removesuffix("_id").replace("_", " ")
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
        return _check_ident(v, "relationship type")


class EventType(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    description: str = Field(default="", max_length=MAX_TEXT)
    entity: str = ""  # the entity type this event is usually about (optional hint)
    sets_state: str = ""  # the state this event puts its entity in (e.g. payment_received → paid)
    examples: tuple[str, ...] = Field(default=(), max_length=32)
    keywords: tuple[str, ...] = Field(default=(), max_length=32)  # words that signal it ("complain", "投诉")
    # The event *is* the user asking something (user_inquiry): a message's question form
    # ("?", "where…", "吗", "请问") counts for it, and its absence against it.
    question: bool = False
    importance: float = Field(default=0.5, ge=0, le=1)  # feeds the forgetting score of its records
    retention: Retention = Retention()

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return _check_ident(v, "event type")

    @field_validator("keywords")
    @classmethod
    def _keywords(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        if not all(0 < len(w.strip()) <= 40 for w in v):
            raise ValueError("keywords must be short non-empty strings")
        return tuple(w.strip().lower() for w in v)

    @property
    def cues(self) -> tuple[str, ...]:
        """Word stems that name this event in text: its keywords and its name's long parts."""
        stems = [p[:6] for p in self.name.split("_") if len(p) >= 5]
        return tuple(dict.fromkeys([*self.keywords, *stems]))


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
    """A validated memory domain. Build with :func:`parse_schema`, not directly."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: str = Field(min_length=1, max_length=32)
    domain: str
    description: str = Field(default="", max_length=MAX_TEXT)
    entities: tuple[EntityType, ...] = Field(min_length=1, max_length=MAX_ENTITIES)
    relationships: tuple[RelationshipType, ...] = ()
    event_types: tuple[EventType, ...] = Field(min_length=1, max_length=MAX_EVENT_TYPES)
    examples: tuple[SchemaExample, ...] = Field(default=(), max_length=8)

    @field_validator("domain")
    @classmethod
    def _domain(cls, v: str) -> str:
        return _check_ident(v, "domain")

    @model_validator(mode="after")
    def _consistent(self) -> MemorySchema:
        names = [e.name for e in self.entities]
        _no_duplicates(names, "entity")
        _no_duplicates([e.name for e in self.event_types], "event type")
        ids = {e.name: e.id_attribute for e in self.entities}
        for ent in self.entities:
            for a in ent.attributes:
                if a.kind == "ref" and not any(a.name == idattr for n, idattr in ids.items() if n != ent.name):
                    raise ValueError(
                        f"entities.{ent.name}.attributes: {a.name}(ref) refers to no entity "
                        f"(no other entity has {a.name!r} as its id attribute)"
                    )
        for i, rel in enumerate(self.relationships):
            for end, value in (("from", rel.source), ("to", rel.target)):
                if value not in names:
                    raise ValueError(
                        f"relationships[{i}].{end}: {value!r} is not a declared entity (declared: {', '.join(names)})"
                    )
        for ev in self.event_types:
            if ev.entity and ev.entity not in names:
                raise ValueError(f"event_types.{ev.name}.entity: {ev.entity!r} is not an entity")
            if ev.sets_state:
                owner = next((e for e in self.entities if e.name == ev.entity), None)
                if owner is None or ev.sets_state not in owner.states:
                    raise ValueError(
                        f"event_types.{ev.name}.sets_state: {ev.sets_state!r} is not a state of {ev.entity or '(no entity)'}"
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
        return next((e for e in self.entities if e.id_attribute == attribute), None)

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

    def to_json_dict(self) -> dict[str, Any]:
        """The schema in its file form (objects, not shorthand)."""
        return {
            "schema_version": self.schema_version,
            "domain": self.domain,
            "description": self.description,
            "entities": {
                e.name: {
                    "attributes": [a.model_dump() for a in e.attributes],
                    "states": list(e.states),
                    "is_root": e.is_root,
                    "id_attribute": e.id_attribute,
                    "description": e.description,
                    "aliases": list(e.aliases),
                    "state_aliases": {k: list(v) for k, v in e.state_aliases.items()},
                    "resolution": e.resolution.model_dump(),
                    "retention": e.retention.model_dump(),
                }
                for e in self.entities
            },
            "relationships": [r.model_dump(by_alias=True) for r in self.relationships],
            "event_types": [
                {
                    **ev.model_dump(),
                    "examples": list(ev.examples),
                    "keywords": list(ev.keywords),
                    "retention": ev.retention.model_dump(),
                }
                for ev in self.event_types
            ],
            "examples": [{"text": x.text, "record": json.loads(x.record)} for x in self.examples],
        }


def _no_duplicates(values: list[str], what: str) -> None:
    seen: set[str] = set()
    for v in values:
        if v in seen:
            raise ValueError(f"duplicate {what} {v!r}")
        seen.add(v)


def _normalise(raw: Any) -> dict[str, Any]:
    """Turn the file form (dict of entities, shorthand attributes) into model input."""
    if not isinstance(raw, dict):
        raise ValueError(f"a schema must be a JSON object, not {type(raw).__name__}")
    data = dict(raw)
    ents = data.get("entities")
    if isinstance(ents, dict):
        if len(ents) > MAX_ENTITIES:
            raise ValueError(f"entities: {len(ents)} entity types, at most {MAX_ENTITIES}")
        out = []
        for name, body in ents.items():
            if not isinstance(body, dict):
                raise ValueError(f"entities.{str(name)[:60]}: must be an object")
            _check_ident(str(name), "entity name")
            attrs_raw = body.get("attributes")
            if not isinstance(attrs_raw, list) or not attrs_raw:
                raise ValueError(f"entities.{name}.attributes: must be a non-empty list")
            if len(attrs_raw) > MAX_ATTRIBUTES:
                raise ValueError(f"entities.{name}.attributes: at most {MAX_ATTRIBUTES}")
            try:
                attrs = [Attribute.parse(a) for a in attrs_raw]
            except (ValueError, ValidationError) as exc:
                raise ValueError(f"entities.{name}.attributes: {_first_line(exc)}") from None
            _no_duplicates([a.name for a in attrs], f"attribute in entities.{name}")
            states = body.get("states", [])
            if not isinstance(states, list) or not all(isinstance(s, str) and 0 < len(s) <= 64 for s in states):
                raise ValueError(f"entities.{name}.states: must be a list of short strings")
            if len(states) > MAX_ENUM:
                raise ValueError(f"entities.{name}.states: {len(states)} states, at most {MAX_ENUM}")
            _no_duplicates(states, f"state in entities.{name}")
            id_attr = body.get("id_attribute") or attrs[0].name
            if id_attr not in [a.name for a in attrs]:
                raise ValueError(f"entities.{name}.id_attribute: {id_attr!r} is not an attribute")
            if next(a for a in attrs if a.name == id_attr).kind == "ref":
                raise ValueError(f"entities.{name}.id_attribute: the id cannot be a ref")
            aliases = body.get("aliases", [])
            if not isinstance(aliases, list) or not all(isinstance(a, str) and 0 < len(a) <= 40 for a in aliases):
                raise ValueError(f"entities.{name}.aliases: must be a list of short strings")
            state_aliases = body.get("state_aliases", {})
            if not isinstance(state_aliases, dict) or not all(
                isinstance(v, list) and all(isinstance(w, str) and 0 < len(w) <= 40 for w in v)
                for v in state_aliases.values()
            ):
                raise ValueError(f"entities.{name}.state_aliases: must map a state to a list of short strings")
            extra = set(body) - {
                "attributes",
                "states",
                "is_root",
                "id_attribute",
                "description",
                "aliases",
                "state_aliases",
                "resolution",
                "retention",
            }
            if extra:
                raise ValueError(f"entities.{name}: unknown field(s) {sorted(extra)}")
            out.append(
                {
                    "name": name,
                    "attributes": attrs,
                    "states": states,
                    "is_root": bool(body.get("is_root", False)),
                    "id_attribute": id_attr,
                    "description": body.get("description", ""),
                    "aliases": aliases,
                    "state_aliases": {k: tuple(v) for k, v in state_aliases.items()},
                    **{k: body[k] for k in ("resolution", "retention") if k in body},
                }
            )
        data["entities"] = out
    evs = data.get("event_types")
    if isinstance(evs, list):
        data["event_types"] = [{"name": e} if isinstance(e, str) else e for e in evs]
    return data


def _first_line(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        return f"{loc}: {err['msg']}" if loc else err["msg"]
    return str(exc).splitlines()[0]


def schema_problems(raw: Any) -> list[str]:
    """Every problem found in a raw schema, each naming its field; empty when valid."""
    try:
        data = _normalise(raw)
    except ValueError as exc:
        return [str(exc)]
    try:
        MemorySchema.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = ".".join(str(p) for p in err["loc"])
            msg = err["msg"].removeprefix("Value error, ")
            problems.append(f"{loc}: {msg}" if loc else msg)
        return problems
    return []


def parse_schema(raw: Any) -> MemorySchema:
    """Validate a decoded schema (dict) or its JSON text; raise SchemaError naming the field."""
    if isinstance(raw, (str, bytes)):
        if len(raw) > MAX_SCHEMA_BYTES:
            raise SchemaError(f"schema is {len(raw)} bytes, at most {MAX_SCHEMA_BYTES}")
        try:
            raw = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise SchemaError(f"schema is not valid JSON: {exc}") from None
    problems = schema_problems(raw)
    if problems:
        raise SchemaError("invalid schema: " + "; ".join(problems[:5]))
    schema = MemorySchema.model_validate(_normalise(raw))
    from .memory import draft_model  # late: memory imports this module

    for i, ex in enumerate(schema.examples):
        try:
            draft_model(schema).model_validate_json(ex.record)
        except ValidationError as exc:
            raise SchemaError(f"invalid schema: examples[{i}].record: {_first_line(exc)}") from None
    return schema


def load_schema(path: str | Path) -> MemorySchema:
    """Load and validate a schema file."""
    p = Path(path)
    try:
        text = p.read_bytes()
    except OSError as exc:
        raise SchemaError(f"cannot read schema {p}: {exc.strerror}") from None
    try:
        return parse_schema(text)
    except SchemaError as exc:
        raise SchemaError(f"{p.name}: {exc.message}") from None
