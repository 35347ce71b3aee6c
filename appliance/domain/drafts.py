"""The shape of a record draft, written once: the JSON Schema the grammar compiles and the
pydantic model that validates, both derived from the same per-attribute value types.

A record draft is ``{"event_type", "entity": {"type", "id", "state", "attributes"},
"relationships": [...]}``; attribute values are typed by their kind (numbers, booleans, enum
values, lists of strings, ISO dates/times, strings). Number attributes also accept a range or a
comparison written as text ("100-150", ">=4.5", "<200"), so "50-100元" or "4.5分以上" is kept as
such instead of losing one end.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, create_model

from .records import FILTER_OPS, MAX_FILTERS, MAX_HOPS, MAX_RELATIONSHIPS
from .schema import Attribute, MemorySchema

__all__ = [
    "draft_model",
    "record_json_schema",
    "query_json_schema",
    "query_fields",
    "value_schema",
    "QUERY_LIMITS",
    "RANGE_PATTERN",
    "DATE_PATTERN",
    "TIME_PATTERN",
    "DATETIME_PATTERN",
]

QUERY_LIMITS = (1, 3, 5, 10, 20, 50, 100)
_NULL = {"type": "null"}
# A number that is a range or a bound: "100-150", ">=4.5", "<200".
RANGE_PATTERN = r"^(?:[<>]=?-?\d+(?:\.\d+)?|-?\d+(?:\.\d+)?--?\d+(?:\.\d+)?)$"
DATE_PATTERN = r"^\d{4}-\d{2}(?:-\d{2})?$"  # a day, or a month ("2023-05")
TIME_PATTERN = r"^\d{2}:\d{2}$"
DATETIME_PATTERN = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}$"
_PATTERNS = {"date": DATE_PATTERN, "time": TIME_PATTERN, "datetime": DATETIME_PATTERN}


def value_schema(a: Attribute) -> dict[str, Any]:
    """The JSON Schema of one attribute's (non-null) value."""
    if a.kind == "number":
        return {"anyOf": [{"type": "number"}, {"type": "string", "pattern": RANGE_PATTERN}]}
    if a.kind == "boolean":
        return {"type": "boolean"}
    if a.kind == "enum":
        return {"enum": list(a.enum_values)}
    if a.kind == "list":
        return {"type": "array", "items": {"type": "string"}, "maxItems": 20}
    if a.kind in _PATTERNS:
        return {"type": "string", "pattern": _PATTERNS[a.kind]}
    return {"type": "string"}


def _value_type(a: Attribute) -> Any:
    """The pydantic type of one attribute's (non-null) value: the twin of ``value_schema``."""
    if a.kind == "number":
        # strict and finite: true, 1e400 (inf) and NaN are no amounts
        number = Annotated[float, Field(strict=True, allow_inf_nan=False)]
        return Union[number, Annotated[str, StringConstraints(pattern=RANGE_PATTERN)]]
    if a.kind == "boolean":
        return bool
    if a.kind == "enum":
        return _literal(*a.enum_values)
    if a.kind == "list":
        return Annotated[list[str], Field(max_length=20)]
    if a.kind in _PATTERNS:
        return Annotated[str, StringConstraints(pattern=_PATTERNS[a.kind])]
    return str


def _nullable(s: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [s, _NULL]}


def _obj(props: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


def record_json_schema(schema: MemorySchema) -> dict[str, Any]:
    """The JSON Schema every memory record extracted under ``schema`` satisfies."""
    entities = []
    for ent in schema.entities:
        attrs = {a.name: _nullable(value_schema(a)) for a in ent.value_attributes}
        entities.append(
            _obj(
                {
                    "type": {"const": ent.name},
                    "id": _nullable({"type": "string"}),
                    "state": _nullable({"enum": list(ent.states)}) if ent.states else _NULL,
                    "attributes": _obj(attrs),
                }
            )
        )
    rels = [
        _obj(
            {
                "type": {"const": r.type},
                "from_type": {"const": r.source},
                "from_id": {"type": "string"},
                "to_type": {"const": r.target},
                "to_id": {"type": "string"},
            }
        )
        for r in schema.relationships
    ]
    return _obj(
        {
            "event_type": {"enum": list(schema.event_names)},
            "entity": {"anyOf": entities} if len(entities) > 1 else entities[0],
            "relationships": {
                "type": "array",
                "items": {"anyOf": rels} if rels else _NULL,
                "maxItems": MAX_RELATIONSHIPS if rels else 0,
            },
        }
    )


def _literal(*values: str) -> Any:
    """``Literal[values]`` built at run time (mypy cannot type a dynamic Literal)."""
    return Literal.__getitem__(values)  # type: ignore[attr-defined]


def _union(types: list[Any]) -> Any:
    return types[0] if len(types) == 1 else Union.__getitem__(tuple(types))  # type: ignore[attr-defined]


@lru_cache(maxsize=64)
def draft_model(schema: MemorySchema) -> type[BaseModel]:
    """A pydantic model admitting exactly the drafts ``record_json_schema`` describes."""
    make: Any = create_model
    forbid = ConfigDict(extra="forbid")
    entity_models = []
    for i, ent in enumerate(schema.entities):
        # Attribute names may be any script: pydantic fields get safe names, the JSON key is the alias.
        attr_fields: dict[str, Any] = {
            f"a{j}": (Optional[_value_type(a)], Field(..., alias=a.name)) for j, a in enumerate(ent.value_attributes)
        }
        attrs = make(f"E{i}Attributes", __config__=ConfigDict(extra="forbid", populate_by_name=False), **attr_fields)
        state_t: Any = Optional[_literal(*ent.states)] if ent.states else type(None)
        entity_models.append(
            make(
                f"E{i}Entity",
                __config__=forbid,
                type=(_literal(ent.name), ...),
                id=(Optional[str], ...),
                state=(state_t, ...),
                attributes=(attrs, ...),
            )
        )
    rel_models = [
        make(
            f"R{i}",
            __config__=forbid,
            type=(_literal(r.type), ...),
            from_type=(_literal(r.source), ...),
            from_id=(str, ...),
            to_type=(_literal(r.target), ...),
            to_id=(str, ...),
        )
        for i, r in enumerate(schema.relationships)
    ]
    rel_item: Any = _union(rel_models) if rel_models else type(None)
    model: type[BaseModel] = make(
        "Record",
        __config__=forbid,
        event_type=(_literal(*schema.event_names), ...),
        entity=(_union(entity_models), ...),
        relationships=(list[rel_item], Field(default_factory=list, max_length=MAX_RELATIONSHIPS)),
    )
    return model


def query_fields(schema: MemorySchema) -> list[str]:
    """Field names a recall filter may use: id, state, event_type, text and every attribute."""
    names = ["id", "state", "event_type", "text"]
    for ent in schema.entities:
        names += [a.name for a in ent.value_attributes]
    return list(dict.fromkeys(names))


def query_json_schema(schema: MemorySchema) -> dict[str, Any]:
    """The JSON Schema of a recall query over ``schema``."""
    fields = query_fields(schema)
    value = {"anyOf": [{"type": "string"}, {"type": "number"}]}
    filt = _obj({"field": {"enum": fields}, "op": {"enum": list(FILTER_OPS)}, "value": value})
    filters = {"type": "array", "items": filt, "maxItems": MAX_FILTERS}
    hops = [
        _obj({"relationship": {"const": r.type}, "target_type": {"const": t}, "filters": filters})
        for r in schema.relationships
        for t in dict.fromkeys((r.source, r.target))
    ]
    return _obj(
        {
            "entity_type": _nullable({"enum": list(schema.entity_names)}),
            "event_type": _nullable({"enum": list(schema.event_names)}),
            "filters": filters,
            "sort": _nullable(_obj({"field": {"enum": fields}, "descending": {"type": "boolean"}})),
            "limit": {"enum": list(QUERY_LIMITS)},
            "hops": {"type": "array", "items": {"anyOf": hops} if hops else _NULL, "maxItems": MAX_HOPS if hops else 0},
        }
    )
