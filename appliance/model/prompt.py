"""Prompts generated from the schema: descriptions, event hints and worked examples.

The instruction prefix depends only on the schema, so it is identical across calls and its
KV state is reused (see ``engine.start``). The utterance is tokenized separately with
special-token parsing off: text such as ``<|im_end|>`` in a message cannot end the turn.
The instructions are English (the small models follow English best) and come from the
English pack's ``prompts``; the message itself may be in any language.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from ..domain.schema import MemorySchema
from ..lang import PACKS
from .engine import Engine

__all__ = ["PromptParts", "record_prompt", "query_prompt", "example_records", "open_turn", "PROMPTS"]

MAX_UTTERANCE_TOKENS = 384
PROMPTS = PACKS["en"].prompts


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


def schema_text(schema: MemorySchema) -> str:
    """The schema as the model reads it: event types, entity types, relationships."""
    p = PROMPTS
    lines = [
        p["schema_domain"].format(domain=schema.domain, description=schema.description).strip(),
        p["schema_events"],
    ]
    for ev in schema.event_types:
        lines.append(
            p["schema_event"].format(
                name=ev.name,
                about=p["about"].format(entity=ev.entity) if ev.entity else "",
                desc=f": {ev.description}" if ev.description else "",
                eg=p["eg"].format(example=ev.examples[0]) if ev.examples else "",
            )
        )
    lines.append(p["schema_entities"])
    for ent in schema.entities:
        lines.append(
            p["schema_entity"].format(
                name=ent.name,
                id=ent.id_attribute,
                attrs=", ".join(a.name for a in ent.value_attributes) or p["none"],
                states=p["states"].format(states="|".join(ent.states)) if ent.states else "",
                desc=f" - {ent.description}" if ent.description else "",
            )
        )
    if schema.relationships:
        rels = "; ".join(f"{r.source} {r.type} {r.target}" for r in schema.relationships)
        lines.append(p["relationships"].format(rels=rels))
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
    if state:
        text = PROMPTS["example_state"].format(entity=ent.name, state=state)
    else:
        text = PROMPTS["example_mentioned"].format(entity=ent.name)
    record: dict[str, object] = {
        "event_type": ev.name,
        "entity": {"type": ent.name, "id": "X-0", "state": state, "attributes": attrs},
        "relationships": [],
    }
    return [(text, record)]


def record_prompt(schema: MemorySchema, engine: Engine) -> PromptParts:
    """Prompt for turning one message into a memory record."""
    p = PROMPTS
    examples = "\n".join(
        f"{p['message']}{t}\n{p['record']}{json.dumps(r, ensure_ascii=False, separators=(',', ':'))}"
        for t, r in example_records(schema)
    )
    user = f"{schema_text(schema)}\n\n{p['record_instruction']}\n\n{examples}\n\n{p['message']}"
    return open_turn(engine, p["record_system"], user, p["record"])


def query_prompt(schema: MemorySchema, engine: Engine) -> PromptParts:
    """Prompt for turning a question into a structured recall query."""
    p = PROMPTS
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
        f"{schema_text(schema)}\n\n{p['query_instruction']}\n\n"
        f"{p['question']}{p['query_example'].format(entity=ent.name.lower())}\n"
        f"{p['query']}{json.dumps(eg, separators=(',', ':'))}\n\n{p['question']}"
    )
    return open_turn(engine, p["query_system"], user, p["query"])
