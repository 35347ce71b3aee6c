"""Reading schema files: the file form (entities as an object, attribute shorthand) → ``MemorySchema``.

Every problem names its field (``entities.Order.attributes: …``) so a user can fix the file.
Shorthand attributes: ``"name"`` (string), ``"user_id(ref)"``, ``"amount:number"`` (any kind).
An entity's id attribute defaults to its first attribute (schemas written before natural keys
existed keep loading unchanged) unless it declares a ``key`` or ``"id_attribute": null``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..errors import SchemaError
from .drafts import draft_model
from .schema import (
    ATTRIBUTE_KINDS,
    MAX_ATTRIBUTES,
    MAX_ENTITIES,
    MAX_STATES,
    Attribute,
    MemorySchema,
    check_name,
    no_duplicates,
)

__all__ = ["load_schema", "parse_schema", "schema_problems", "parse_attribute", "MAX_SCHEMA_BYTES"]

MAX_SCHEMA_BYTES = 1_000_000
_SHORTHAND = re.compile(r"^(?P<name>[^\s:()]+)\s*(?:\((?P<ref>ref)\)|:\s*(?P<kind>[a-z]+))?$")
_ENTITY_FIELDS = {
    "attributes",
    "states",
    "is_root",
    "id_attribute",
    "key",
    "description",
    "aliases",
    "state_aliases",
    "resolution",
    "retention",
}


def parse_attribute(raw: Any) -> Attribute:
    """Accept ``"user_id(ref)"`` / ``"amount:number"`` shorthand or an object."""
    if isinstance(raw, str):
        m = _SHORTHAND.match(raw.strip())
        if not m or (m.group("kind") and m.group("kind") not in ATTRIBUTE_KINDS):
            kinds = "|".join(k for k in ATTRIBUTE_KINDS if k not in ("enum", "ref"))
            raise ValueError(f"attribute {raw[:80]!r} is not 'name', 'name(ref)' or 'name:{kinds}'")
        kind: Any = m.group("ref") or m.group("kind") or "string"
        if kind == "enum":
            raise ValueError(f"attribute {raw[:80]!r}: an enum needs its values (write it as an object)")
        return Attribute(name=m.group("name"), kind=kind)
    if isinstance(raw, dict):
        return Attribute.model_validate(raw)
    raise ValueError(f"attribute must be a string or an object, not {type(raw).__name__}")


def _short_strings(value: Any, limit: int = 40) -> bool:
    return isinstance(value, list) and all(isinstance(w, str) and 0 < len(w) <= limit for w in value)


def _entity(name: str, body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise ValueError(f"entities.{str(name)[:60]}: must be an object")
    check_name(str(name), "entity name")
    attrs_raw = body.get("attributes")
    if not isinstance(attrs_raw, list) or not attrs_raw:
        raise ValueError(f"entities.{name}.attributes: must be a non-empty list")
    if len(attrs_raw) > MAX_ATTRIBUTES:
        raise ValueError(f"entities.{name}.attributes: {len(attrs_raw)} attributes, at most {MAX_ATTRIBUTES}")
    attrs, wrong = [], []
    for a in attrs_raw:  # every attribute's problem, not only the first
        try:
            attrs.append(parse_attribute(a))
        except (ValueError, ValidationError) as exc:
            wrong.append(f"entities.{name}.attributes: {_first_line(exc)}")
    if wrong:
        raise ValueError("\n".join(wrong))
    no_duplicates([a.name for a in attrs], f"attribute in entities.{name}")
    states = body.get("states", [])
    if not _short_strings(states, 64):
        raise ValueError(f"entities.{name}.states: must be a list of short strings")
    if len(states) > MAX_STATES:
        raise ValueError(f"entities.{name}.states: {len(states)} states, at most {MAX_STATES}")
    no_duplicates(states, f"state in entities.{name}")
    key = body.get("key", [])
    if not _short_strings(key, 64):
        raise ValueError(f"entities.{name}.key: must be a list of attribute names")
    if "id_attribute" in body and body["id_attribute"] in (None, ""):
        id_attr = ""
    else:
        id_attr = body.get("id_attribute") or ("" if key else attrs[0].name)
    if id_attr and id_attr not in [a.name for a in attrs]:
        raise ValueError(f"entities.{name}.id_attribute: {id_attr!r} is not an attribute")
    if id_attr and next(a for a in attrs if a.name == id_attr).kind == "ref":
        raise ValueError(f"entities.{name}.id_attribute: the id cannot be a ref")
    aliases = body.get("aliases", [])
    if not _short_strings(aliases):
        raise ValueError(f"entities.{name}.aliases: must be a list of short strings")
    state_aliases = body.get("state_aliases", {})
    if not isinstance(state_aliases, dict) or not all(_short_strings(v) for v in state_aliases.values()):
        raise ValueError(f"entities.{name}.state_aliases: must map a state to a list of short strings")
    extra = set(body) - _ENTITY_FIELDS
    if extra:
        raise ValueError(f"entities.{name}: unknown field(s) {sorted(extra)}")
    return {
        "name": name,
        "attributes": attrs,
        "states": states,
        "is_root": bool(body.get("is_root", False)),
        "id_attribute": id_attr,
        "key": tuple(key),
        "description": body.get("description", ""),
        "aliases": aliases,
        "state_aliases": {k: tuple(v) for k, v in state_aliases.items()},
        **{k: body[k] for k in ("resolution", "retention") if k in body},
    }


def _normalise(raw: Any, problems: list[str] | None = None) -> dict[str, Any]:
    """Turn the file form (dict of entities, shorthand attributes) into model input. With
    ``problems``, an entity type's problems are added to it and that entity left out, so that the
    others are still checked; without, the first problem raises."""
    if not isinstance(raw, dict):
        raise ValueError(f"a schema must be a JSON object, not {type(raw).__name__}")
    data = dict(raw)
    ents = data.get("entities")
    if isinstance(ents, dict):
        if len(ents) > MAX_ENTITIES:
            raise ValueError(f"entities: {len(ents)} entity types, at most {MAX_ENTITIES}")
        data["entities"] = []
        for name, body in ents.items():
            try:
                data["entities"].append(_entity(name, body))
            except ValueError as exc:
                if problems is None:
                    raise
                problems.extend(str(exc).splitlines())
    evs = data.get("event_types")
    if isinstance(evs, list):
        data["event_types"] = [{"name": e} if isinstance(e, str) else e for e in evs]
    langs = data.get("languages")
    if langs is not None:
        from ..lang import PACKS

        if not _short_strings(langs, 8) or not langs:
            raise ValueError("languages: must be a non-empty list of language codes")
        unknown = [x for x in langs if x not in PACKS]
        if unknown:
            raise ValueError(f"languages: no language pack for {unknown} (shipped: {', '.join(PACKS)})")
    return data


def _first_line(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        return f"{loc}: {msg}" if loc else msg
    return str(exc).splitlines()[0]


def schema_problems(raw: Any) -> list[str]:
    """Every problem found in a raw schema, each naming its field; empty when valid."""
    problems: list[str] = []
    try:
        data = _normalise(raw, problems)
    except ValueError as exc:
        return [*problems, *str(exc).splitlines()]
    left_out: list[str] = []
    if isinstance(raw.get("entities"), dict):  # raw is a dict here: _normalise refused anything else
        kept = {e["name"] for e in data["entities"]}  # _normalise's own entity list
        left_out = [str(n) for n in raw["entities"] if str(n) not in kept]
    try:
        MemorySchema.model_validate(data)
    except ValidationError as exc:
        for err in exc.errors():
            loc = ".".join(str(p) for p in err["loc"])
            msg = err["msg"].removeprefix("Value error, ")
            if left_out and (loc == "entities" or any(repr(n) in msg or f" {n} " in f" {msg} " for n in left_out)):
                continue  # a consequence of an entity type already reported and left out
            problems.append(f"{loc}: {msg}" if loc else msg)
    return problems


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
