"""Bring the schemas users already have: SGD service schemas, JSON Schema, pydantic models.

Each importer writes a memory schema in the file form (``loading.parse_schema`` validates it),
mechanically, from the source's own names, descriptions and value lists:

* **SGD service** (``service_name``, ``slots``, ``intents``): one entity for the service (no code
  id; a dialogue fills it turn by turn: ``resolution.session_latest``), one attribute per slot,
  one event type per intent with its description, its required and optional slots, and
  ``commits`` for transactional intents.
* **JSON Schema** (an object schema, ``$defs``/``definitions`` objects as further entities):
  one attribute per property; ``id`` is the id attribute when present; one event type per
  entity ("<Entity>_noted").
* **pydantic** (``module:Class``): the model's JSON Schema, imported as above.

Attribute kinds: categorical value lists become ``enum`` (``boolean`` for True/False, ``number``
for numbers); JSON Schema types and formats map directly; free slots get the kind their name and
description point to through the language packs' ``kind_words`` ("Date of departure flight" →
date, "Price per night" → number, "Phone number of the hotel" → phone). The result is explicit
in the written schema, for the user to read and correct.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from ..errors import SchemaError
from ..lang import DEFAULT_LANGUAGES, Language, language_for
from .schema import MAX_TEXT, NAME

__all__ = ["import_schema", "from_sgd", "from_json_schema", "from_pydantic", "infer_kind", "detect_format", "FORMATS"]

FORMATS = ("auto", "sgd", "jsonschema", "pydantic")
_BOOL_VALUES = {"true", "false"}


def _name(raw: str, fallback: str) -> str:
    """A valid schema name from a source name (invalid characters become _)."""
    s = re.sub(r"[^\w\-]", "_", raw.strip())
    if not s or not NAME.match(s):
        s = f"{fallback}_{s}" if s else fallback
    return s[:64]


def _text(s: Any) -> str:
    return str(s or "")[:MAX_TEXT]


def infer_kind(name: str, description: str, lang: Language | None = None) -> tuple[str, str]:
    """(kind, format) a free slot's name and description point to, through the packs'
    ``kind_words``; ("string", "") when nothing does. Words in the name count double."""
    lang = lang or language_for(DEFAULT_LANGUAGES)
    kw = lang.lex.kind_words
    name_words = " " + re.sub(r"[_\-]+", " ", re.sub(r"(?<=[a-z])(?=[A-Z])", " ", name)).lower() + " "
    desc = " " + description.lower() + " "

    # an amount of money is a number ("Sum of money to be transferred"), and so is a count of
    # time units, said in the plural ("days_staying", "Time span … in days")
    counted = {w for w, unit in lang.lex.unit_words.items() if w != unit and w.startswith(unit)}
    extra = {"number": (*kw.get("money", ()), *sorted(counted))}

    def hits(kind: str) -> float:
        total = 0.0
        for w in dict.fromkeys((*kw.get(kind, ()), *extra.get(kind, ()))):
            w = w.lower()
            pattern = rf"(?<![a-z]){re.escape(w)}(?![a-z])" if w.isascii() else re.escape(w)
            total += 2 * len(re.findall(pattern, name_words)) + len(re.findall(pattern, desc))
        return total

    order = ("phone", "email", "address", "number", "date", "time", "code", "place", "name")
    scores = {k: hits(k) for k in order}
    # "Number of days" is a count, "Date of departure" a date: a description that opens with a
    # count word decides for number
    if re.match(r"\s*(" + "|".join(re.escape(w) for w in kw.get("number", ()) if w.isascii()) + r")\b", desc):
        scores["number"] += 3
    best = max(order, key=lambda k: (scores[k], -order.index(k)))
    if scores[best] == 0:
        return "string", ""
    if best in ("number", "date", "time"):
        return best, ""
    if best in ("phone", "email", "address", "code", "place", "name"):
        return "string", best
    return "string", ""


# --- SGD --------------------------------------------------------------------------------------
def from_sgd(service: dict[str, Any], languages: tuple[str, ...] = ()) -> dict[str, Any]:
    """One SGD service → a memory schema (file form)."""
    if not isinstance(service, dict) or "service_name" not in service:
        raise SchemaError("not an SGD service schema (no service_name)")
    lang = language_for(languages or DEFAULT_LANGUAGES)
    domain = _name(service["service_name"], "service")
    entity = _name(re.sub(r"_\d+$", "", service["service_name"]), "Entity")
    attributes = []
    for slot in service.get("slots", []):
        name = _name(slot["name"], "slot")
        desc = _text(slot.get("description"))
        values = [str(v) for v in slot.get("possible_values") or []]
        attr: dict[str, Any] = {"name": name, "description": desc}
        if slot.get("is_categorical") and values:
            if {v.lower() for v in values} <= _BOOL_VALUES:
                attr["kind"] = "boolean"
            elif all(re.fullmatch(r"-?\d+(?:\.\d+)?", v) for v in values):
                attr["kind"] = "number"
            else:
                attr["kind"] = "enum"
                attr["values"] = list(dict.fromkeys(values))
        else:
            kind, fmt = infer_kind(name, desc, lang)
            attr["kind"] = kind
            if fmt:
                attr["format"] = fmt
        attributes.append(attr)
    if not attributes:
        raise SchemaError(f"SGD service {domain} has no slots")
    slot_names = {a["name"] for a in attributes}
    events = []
    for intent in service.get("intents", []):
        used = [*intent.get("required_slots", []), *dict(intent.get("optional_slots") or {})]
        events.append(
            {
                "name": _name(intent["name"], "intent"),
                "description": _text(intent.get("description")),
                "entity": entity,
                "attributes": [_name(x, "slot") for x in dict.fromkeys(used) if _name(x, "slot") in slot_names],
                **({"commits": True} if intent.get("is_transactional") else {}),
            }
        )
    if not events:
        events = [{"name": f"{entity}_noted", "description": _text(service.get("description")), "entity": entity}]
    out: dict[str, Any] = {
        "schema_version": "1.0",
        "domain": domain,
        "description": _text(service.get("description")),
        "entities": {
            entity: {
                "description": _text(service.get("description")),
                "attributes": attributes,
                "id_attribute": None,
                "resolution": {"session_latest": True},
            }
        },
        "event_types": events,
    }
    if languages:
        out["languages"] = list(languages)
    return out


# --- JSON Schema / pydantic ----------------------------------------------------------------------
def _resolved(prop: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """``prop`` with a ``$ref`` to a non-object definition (a pydantic Enum: ``{"$ref":
    "#/$defs/Status"}``, or ``allOf: [{"$ref": …}]`` when it has a default) merged in."""
    ref = prop.get("$ref")
    if ref is None and isinstance(prop.get("allOf"), list) and len(prop["allOf"]) == 1:
        ref = prop["allOf"][0].get("$ref") if isinstance(prop["allOf"][0], dict) else None
    target = defs.get(str(ref).rsplit("/", 1)[-1]) if isinstance(ref, str) else None
    if not isinstance(target, dict) or target.get("type") == "object" or "properties" in target:
        return prop
    return {**target, **{k: v for k, v in prop.items() if k not in ("$ref", "allOf")}}


def _json_attr(name: str, prop: dict[str, Any], defs: dict[str, Any] | None = None) -> dict[str, Any] | None:
    prop = _resolved(prop, defs or {})
    desc = _text(prop.get("description") or prop.get("title"))
    if "anyOf" in prop:  # Optional[X] in pydantic: the non-null branch
        branches = [b for b in prop["anyOf"] if b.get("type") != "null"]
        if len(branches) == 1:
            merged = {**_resolved(branches[0], defs or {}), **{k: v for k, v in prop.items() if k != "anyOf"}}
            return _json_attr(name, merged, defs)
    attr: dict[str, Any] = {"name": _name(name, "field"), "description": desc}
    t = prop.get("type")
    fmt = prop.get("format", "")
    if "enum" in prop:
        values = [v for v in prop["enum"] if v is not None]
        if values and all(isinstance(v, bool) for v in values):
            attr["kind"] = "boolean"
        elif values and all(isinstance(v, (int, float)) for v in values):
            attr["kind"] = "number"
        elif values:
            attr["kind"] = "enum"
            attr["values"] = [str(v) for v in values]
        else:
            return None
    elif t == "boolean":
        attr["kind"] = "boolean"
    elif t in ("integer", "number"):
        attr["kind"] = "number"
    elif t == "array":
        attr["kind"] = "list"
    elif t == "string":
        kind = {"date": "date", "date-time": "datetime", "time": "time"}.get(fmt)
        if kind:
            attr["kind"] = kind
        else:
            attr["kind"] = "string"
            sfmt = {"email": "email", "uri": "url", "url": "url"}.get(fmt)
            if sfmt:
                attr["format"] = sfmt
    else:
        return None  # nested objects and references are not attributes
    return attr


def from_json_schema(js: dict[str, Any], domain: str | None = None, dropped: list[str] | None = None) -> dict[str, Any]:
    """An object JSON Schema (with its ``$defs`` objects) → a memory schema (file form).
    ``dropped`` collects each property that became no attribute, and why."""
    if not isinstance(js, dict):
        raise SchemaError("a JSON Schema must be an object")
    objects: dict[str, dict[str, Any]] = {}
    defs = {**js.get("definitions", {}), **js.get("$defs", {})}
    if js.get("type") == "object" or "properties" in js:
        objects[_name(js.get("title") or "Thing", "Entity")] = js
    for key, d in defs.items():
        if isinstance(d, dict) and (d.get("type") == "object" or "properties" in d):
            objects[_name(d.get("title") or key, "Entity")] = d
    if not objects:
        raise SchemaError("the JSON Schema declares no object with properties")
    entities: dict[str, Any] = {}
    events = []
    for ent, obj in objects.items():
        props = obj.get("properties") or {}
        attrs = [a for n, p in props.items() if isinstance(p, dict) and (a := _json_attr(n, p, defs))]
        if dropped is not None:
            kept = {a["name"] for a in attrs}
            dropped += [f"{ent}.{n}: {_why_not(p)}" for n, p in props.items() if _name(str(n), "field") not in kept]
        if not attrs:
            continue
        names = [a["name"] for a in attrs]
        entities[ent] = {
            "description": _text(obj.get("description")),
            "attributes": attrs,
            "id_attribute": "id" if "id" in names else None,
        }
        # without an id, the first required text field is what the thing is known by
        required = {_name(str(n), "field") for n in obj.get("required", []) if isinstance(n, str)}
        known_by = next((a["name"] for a in attrs if a["name"] in required and a["kind"] == "string"), None)
        if "id" not in names and known_by is not None:
            entities[ent]["key"] = [known_by]
        events.append(
            {
                "name": _name(f"{ent}_noted", "event"),
                "description": _text(obj.get("description")) or ent,
                "entity": ent,
                "attributes": [n for n in names if n != "id"],
            }
        )
    if not entities:
        raise SchemaError("no object in the JSON Schema has a usable property")
    first = next(iter(objects.values()))
    return {
        "schema_version": "1.0",
        "domain": _name(domain or js.get("title") or "imported", "imported"),
        "description": _text(first.get("description")),
        "entities": entities,
        "event_types": events,
    }


def _why_not(prop: Any) -> str:
    """Why a property is no attribute (said to the user, never silent)."""
    if not isinstance(prop, dict):
        return "not a property object"
    if prop.get("type") == "object" or "$ref" in prop or "allOf" in prop:
        return "a nested object (its own entity when it is one of the schema's definitions)"
    if "anyOf" in prop or "oneOf" in prop:
        return "a choice between several types"
    if "enum" in prop:
        return "an enum with no usable value"
    return f"type {prop.get('type', 'unknown')!r} has no attribute kind"


def from_pydantic(spec: str, dropped: list[str] | None = None) -> dict[str, Any]:
    """``module:Class`` of an importable pydantic model → a memory schema (file form)."""
    module, _, cls_name = spec.partition(":")
    if not module or not cls_name:
        raise SchemaError(f"{spec!r} is not module:Class", hint="e.g. myapp.models:Invoice")
    try:
        # importing runs the module's code: the command line may do it (the user names their
        # own module), no network edge ever does
        if os.getcwd() not in sys.path:  # "myapp.models" of the project the user runs it in
            sys.path.insert(0, os.getcwd())
        cls = getattr(importlib.import_module(module), cls_name)
        js = cls.model_json_schema()
    except Exception as exc:  # whatever the user's module raises on import is its problem to report
        raise SchemaError(
            f"cannot import {spec[:200]}: {type(exc).__name__}: {str(exc)[:300]}",
            hint="the module must be importable from here and the class a pydantic model",
        ) from None
    return from_json_schema(js, domain=cls_name, dropped=dropped)


def detect_format(source: Any) -> str:
    if isinstance(source, (list, dict)):
        items = source if isinstance(source, list) else [source]
        if items and all(isinstance(x, dict) and "service_name" in x for x in items):
            return "sgd"
        return "jsonschema"
    return "pydantic"


def import_schema(
    source: str | Path,
    fmt: str = "auto",
    service: str | None = None,
    languages: tuple[str, ...] = (),
    dropped: list[str] | None = None,
) -> list[dict[str, Any]]:
    """Memory schemas (file form) from a file (SGD / JSON Schema) or a ``module:Class``;
    ``dropped`` collects what a JSON Schema or pydantic model held that became no attribute."""
    if fmt not in FORMATS:
        raise SchemaError(f"unknown import format {fmt!r}", hint=f"use one of {', '.join(FORMATS)}")
    p = Path(source)
    if fmt == "pydantic" or (fmt == "auto" and not p.exists() and ":" in str(source)):
        return [from_pydantic(str(source), dropped)]
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SchemaError(f"cannot read {p}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise SchemaError(f"{p.name} is not valid JSON: {exc}") from None
    except RecursionError:
        raise SchemaError(f"{p.name} is nested too deeply to read") from None
    kind = detect_format(data) if fmt == "auto" else fmt
    try:
        if kind == "sgd":
            services = data if isinstance(data, list) else [data]
            if service is not None:
                services = [s for s in services if s.get("service_name") == service]
                if not services:
                    raise SchemaError(f"no service {service!r} in {p.name}")
            return [from_sgd(s, languages) for s in services]
        return [from_json_schema(data, dropped=dropped)]
    except RecursionError:  # anyOf inside anyOf … thousands deep
        raise SchemaError(f"{p.name} is nested too deeply to import", hint="flatten the schema") from None
