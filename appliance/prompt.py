"""Prompts generated from the schema: descriptions, event hints and worked examples.

The instruction prefix depends only on the schema, so it is identical across calls and its
KV state is reused (see ``engine.start``). The utterance is tokenized separately with
special-token parsing off: text such as ``<|im_end|>`` in a message cannot end the turn.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from .engine import Engine
from .schema import MemorySchema

__all__ = ["PromptParts", "record_prompt", "query_prompt", "example_records", "open_turn"]

MAX_UTTERANCE_TOKENS = 384


@dataclass(frozen=True)
class PromptParts:
    head: str  # fixed: chat opening, instructions, examples, "Message: "
    tail: str  # fixed: closes the user turn and opens the assistant turn

    def tokens(self, engine: Engine, text: str, limit: int = MAX_UTTERANCE_TOKENS) -> tuple[list[int], bool]:
        """Token ids for head + text + tail; the text is cut to ``limit`` tokens (returns truncated?)."""
        body = engine.tokenize_plain(text)
        truncated = len(body) > limit
        body = body[:limit]
        return engine.bos() + engine.tokenize(self.head) + body + engine.tokenize(self.tail), truncated


def open_turn(engine: Engine, system: str, user: str, label: str) -> PromptParts:
    """A chat prompt whose user turn stays open after ``user`` (the message goes there) and
    whose tail opens the assistant turn with ``label`` ("Record: ")."""
    fmt = engine.chat_format()
    head = fmt.wrap(system, user)
    head = head[: head.rindex(fmt.turn_close)] if fmt.turn_close else head
    return PromptParts(
        head=head.removesuffix(fmt.assistant_open), tail=f"\n{fmt.turn_close}{fmt.assistant_open}{label}"
    )


def _schema_text(schema: MemorySchema) -> str:
    lines = [f"Domain: {schema.domain}. {schema.description}".strip(), "Event types:"]
    for ev in schema.event_types:
        about = f" (about {ev.entity})" if ev.entity else ""
        desc = f": {ev.description}" if ev.description else ""
        eg = f' e.g. "{ev.examples[0]}"' if ev.examples else ""
        lines.append(f"- {ev.name}{about}{desc}{eg}")
    lines.append("Entity types:")
    for ent in schema.entities:
        attrs = ", ".join(a.name for a in ent.value_attributes) or "none"
        states = f"; states: {'|'.join(ent.states)}" if ent.states else ""
        desc = f" - {ent.description}" if ent.description else ""
        lines.append(f"- {ent.name} (id: {ent.id_attribute}; attributes: {attrs}{states}){desc}")
    if schema.relationships:
        rels = "; ".join(f"{r.source} {r.type} {r.target}" for r in schema.relationships)
        lines.append(f"Relationships: {rels}")
    return "\n".join(lines)


def example_records(schema: MemorySchema) -> list[tuple[str, dict[str, object]]]:
    """The schema's own examples; else one made from the schema with placeholder values.

    Its values are deliberately unlike real ids ("X-0") so a copied value is easy to spot,
    and grounded decoding cannot copy them at all (they are not in the message).
    """
    if schema.examples:
        return [(x.text, json.loads(x.record)) for x in schema.examples]
    ent = next((e for e in schema.entities if e.states), schema.entities[0])
    ev = next((e for e in schema.event_types if e.entity == ent.name), schema.event_types[0])
    attrs: dict[str, object] = {a.name: None for a in ent.value_attributes}
    state = ent.states[0] if ent.states else None
    text = f"{ent.name} X-0 is {state}." if state else f"{ent.name} X-0 was mentioned."
    record: dict[str, object] = {
        "event_type": ev.name,
        "entity": {"type": ent.name, "id": "X-0", "state": state, "attributes": attrs},
        "relationships": [],
    }
    return [(text, record)]


SYSTEM = "You convert a message into one JSON memory record that follows the schema."


def record_prompt(schema: MemorySchema, engine: Engine) -> PromptParts:
    """Prompt for turning one message into a memory record."""
    examples = "\n".join(
        f"Message: {t}\nRecord: {json.dumps(r, ensure_ascii=False, separators=(',', ':'))}"
        for t, r in example_records(schema)
    )
    user = (
        f"{_schema_text(schema)}\n\n"
        "Pick the event type that best describes the message and the entity it is about. "
        "Copy ids and values exactly from the message; use null when the message does not say.\n\n"
        f"{examples}\n\nMessage: "
    )
    return open_turn(engine, SYSTEM, user, "Record: ")


QUERY_SYSTEM = "You convert a question into one JSON query over stored memories."


def query_prompt(schema: MemorySchema, engine: Engine) -> PromptParts:
    """Prompt for turning a question into a structured recall query."""
    ent = schema.entities[0] if len(schema.entities) == 1 else schema.entities[1]
    eg = {
        "entity_type": ent.name,
        "event_type": None,
        "filters": [{"field": "id", "op": "contains", "value": "X-0"}],
        "sort": None,
        "limit": 5,
        "hops": [],
    }
    user = (
        f"{_schema_text(schema)}\n\n"
        "Fields: id, state, event_type or an attribute. Ops: eq, contains, gt, lt, in. "
        "Copy values exactly from the question.\n\n"
        f"Question: what about {ent.name.lower()} X-0?\n"
        f"Query: {json.dumps(eg, separators=(',', ':'))}\n\nQuestion: "
    )
    return open_turn(engine, QUERY_SYSTEM, user, "Query: ")
