"""A first schema from a few answers (``appliance schema new``): the domain, each entity with
its attributes, the events. Attribute kinds are guessed from their names by the packs'
``kind_words`` (as the importers do) unless given; the first attribute is what the thing is
known by unless another is starred. The result loads (``loading.parse_schema``); its
descriptions are the names' own words, placeholders the user should rewrite in their own
language, because the extraction scorer reads them.

Entity spec: ``Plant: name*, species, height (number), room (enum: kitchen | living room)``.
Event spec: ``watered`` (about the first entity) or ``watered: Plant``.
"""

from __future__ import annotations

import re
from typing import Any

from ..errors import SchemaError
from ..lang import DEFAULT_LANGUAGES, language_for
from .importers import infer_kind
from .schema import ATTRIBUTE_KINDS, NAME

__all__ = ["scaffold", "parse_entity", "parse_event"]

_ATTR = re.compile(r"^\s*(?P<name>[^\s(*]+)\s*(?P<key>\*)?\s*(?:\((?P<kind>[^:)]+)(?::(?P<values>[^)]*))?\))?\s*$")


def _checked(name: str, what: str) -> str:
    if not NAME.match(name):
        raise SchemaError(
            f"{what} {name!r} is not a name",
            hint="a letter or _ first, then letters, digits, _ or - (in any script)",
        )
    return name


def parse_entity(spec: str, languages: tuple[str, ...] = ()) -> tuple[str, dict[str, Any]]:
    """``Plant: name*, species, height (number)`` → (entity name, its file form)."""
    head, sep, rest = spec.partition(":")
    if not sep or not rest.strip():
        raise SchemaError(f"entity {spec.strip()[:60]!r} lists no attributes", hint="write it as Plant: name, species")
    entity = _checked(head.strip(), "entity")
    lang = language_for(languages or DEFAULT_LANGUAGES)
    attrs: list[dict[str, Any]] = []
    key = ""
    for part in _split(rest):
        m = _ATTR.match(part)
        if m is None:
            raise SchemaError(f"attribute {part.strip()[:60]!r} of {entity} is not name [*] [(kind)]")
        name = _checked(m["name"], "attribute")
        attr: dict[str, Any] = {"name": name, "description": _words(name)}
        kind = (m["kind"] or "").strip()
        if kind:
            if kind not in ATTRIBUTE_KINDS:
                raise SchemaError(
                    f"{entity}.{name}: unknown kind {kind!r}", hint=f"one of {', '.join(ATTRIBUTE_KINDS)}"
                )
            attr["kind"] = kind
            if kind == "enum":
                values = [v.strip() for v in (m["values"] or "").split("|") if v.strip()]
                if not values:
                    raise SchemaError(
                        f"{entity}.{name}: an enum needs its values", hint="(enum: kitchen | living room)"
                    )
                attr["values"] = [{"value": v} for v in values]
        else:
            guessed, fmt = infer_kind(name, "", lang)
            attr["kind"] = guessed
            if fmt:
                attr["format"] = fmt
        if m["key"]:
            key = name
        attrs.append(attr)
    key = key or attrs[0]["name"]
    return entity, {
        "description": _words(entity),
        "key": [key],
        "attributes": attrs,
    }


def _words(name: str) -> str:
    """A placeholder description: the name's own words (the user says more; the scorer reads it)."""
    return re.sub(r"(?<=[a-z])(?=[A-Z])", " ", name).replace("_", " ").replace("-", " ").lower()


def _split(rest: str) -> list[str]:
    """Comma-separated attributes; commas inside an enum's parentheses stay."""
    parts, depth, current = [], 0, ""
    for ch in rest:
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch in ",，" and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    return [p for p in [*parts, current] if p.strip()]


def parse_event(spec: str, entities: list[str]) -> dict[str, Any]:
    """``watered`` or ``watered: Plant`` → an event type about that entity."""
    name, _, entity = (x.strip() for x in spec.partition(":"))
    entity = entity or entities[0]
    if entity not in entities:
        raise SchemaError(f"event {name!r} is about {entity!r}, which is no entity here", hint=", ".join(entities))
    return {"name": _checked(name, "event"), "entity": entity, "description": _words(name)}


def scaffold(
    domain: str, description: str, entities: list[str], events: list[str], languages: tuple[str, ...] = ()
) -> dict[str, Any]:
    """The file form of a new schema from the answers (see the module note)."""
    if not entities:
        raise SchemaError("a schema needs at least one entity", hint="--entity 'Plant: name, species'")
    parsed = dict(parse_entity(e, languages) for e in entities)
    names = list(parsed)
    return {
        "schema_version": "1.0",
        "domain": _checked(domain.strip(), "domain"),
        "description": description.strip() or _words(domain),
        **({"languages": list(languages)} if languages else {}),
        "entities": parsed,
        "event_types": [parse_event(e, names) for e in events]
        or [{"name": f"{n}_noted", "entity": n, "description": _words(n)} for n in names],
    }
