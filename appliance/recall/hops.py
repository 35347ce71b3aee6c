"""Plan a multi-hop recall query from a question that names several related entity types.

"Users who complained about logistics on orders over 1000" names User, Order and (through
the event "complain") ServiceTicket. The answer is made of the type the wording asks for
("users who …"; in Chinese the head noun comes last: "…的用户"); the conditions sit on the
other types. The plan starts at the farthest named type, carries its conditions, and hops
along the schema's declared relationships to the answer type, each step keeping its own
conditions. Everything here is deterministic text and graph work: which value belongs to
which step is decided by where it stands in the question, never invented.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Any

from ..domain.records import MAX_FILTERS
from ..domain.schema import MemorySchema
from ..extract.candidates import Candidate, candidates_for, tag_codes, value_role
from ..lang import find_word

__all__ = ["PathPlan", "StepFilters", "plan_path", "filters_by_step", "entity_mentions", "event_mentions"]


def entity_mentions(schema: MemorySchema, question: str) -> dict[str, int]:
    """Entity type → position of its first keyword in the question."""
    low = question.lower()
    found: dict[str, int] = {}
    for ent in schema.entities:
        positions = [p for k in ent.keywords if (p := find_word(low, k)) >= 0]
        if positions:
            found[ent.name] = min(positions)
    return found


def event_mentions(schema: MemorySchema, question: str) -> dict[str, int]:
    """Event type → position of its first cue word ("complained" → complaint_registered)."""
    low = question.lower()
    keywords = [k for words in schema.entity_keywords.values() for k in words]
    found: dict[str, int] = {}
    for ev in schema.event_types:
        # a stem that also names an entity ("order" of order_created) is not an event cue
        cues = [c for c in ev.cues if not any(k.startswith(c) if c.isascii() else k == c for k in keywords)]
        positions = [p for c in cues if (p := find_word(low, c)) >= 0]
        if positions:
            found[ev.name] = min(positions)
    return found


def _graph(schema: MemorySchema) -> dict[str, list[tuple[str, str]]]:
    g: dict[str, list[tuple[str, str]]] = {e: [] for e in schema.entity_names}
    for r in schema.relationships:
        g[r.source].append((r.type, r.target))
        if r.target != r.source:
            g[r.target].append((r.type, r.source))
    return g


@dataclass(frozen=True)
class PathPlan:
    """Which types the question names, which it asks for, and the path to it."""

    mentions: dict[str, int]  # entity type → position in the question
    events: dict[str, int]  # event type → position
    target: str | None  # the type the answer is made of (None: wording did not say)
    path: tuple[str, ...] = ()  # start … target
    relationships: tuple[str, ...] = ()  # one per hop

    def towards(self, schema: MemorySchema, target: str) -> PathPlan:
        """This plan with ``target`` as the answer type and the path to it."""
        parents = _bfs(schema, target)
        reachable = [m for m in self.mentions if m != target and m in parents]
        if not reachable:
            return replace(self, target=target, path=(target,), relationships=())
        # the farthest named type starts the path; ties go to the one named first
        start = max(reachable, key=lambda m: (_depth(parents, m), -self.mentions[m]))
        path, rels = [start], []
        while path[-1] != target:
            rel, parent = parents[path[-1]]
            rels.append(rel)
            path.append(parent)
        return replace(self, target=target, path=tuple(path), relationships=tuple(rels))


def _bfs(schema: MemorySchema, root: str) -> dict[str, tuple[str, str]]:
    """Node → (relationship, parent towards ``root``), for every node reachable from root."""
    g = _graph(schema)
    parents: dict[str, tuple[str, str]] = {root: ("", "")}
    todo = deque([root])
    while todo:
        node = todo.popleft()
        for rel, other in g.get(node, []):
            if other not in parents:
                parents[other] = (rel, node)
                todo.append(other)
    return parents


def _depth(parents: dict[str, tuple[str, str]], node: str) -> int:
    d = 0
    while parents[node][1]:
        node = parents[node][1]
        d += 1
    return d


def _asked_for(schema: MemorySchema, question: str, mentions: dict[str, int]) -> str | None:
    """The one named type the wording asks for ("users who …", "哪些用户"): strong cues
    first, weak ones only when the strong ones name none or several."""
    low = question.lower().strip()
    lang = schema.language
    for strength in ("asked_strong", "asked_weak"):
        asked = []
        for name in mentions:
            for kw in schema.entity(name).keywords:
                patterns = [p.patterns[strength] for p in lang.pack_for(kw) if strength in p.patterns]
                if any(re.search(pat.format(kw=re.escape(kw)), low) for pat in patterns):
                    asked.append(name)
                    break
        if len(asked) == 1:
            return asked[0]
    return None


def plan_path(schema: MemorySchema, question: str) -> PathPlan | None:
    """A hop plan when the question names two or more types joined by relationships."""
    mentions = entity_mentions(schema, question)
    events = event_mentions(schema, question)
    for ev, pos in events.items():
        owner = ev_type.entity if (ev_type := schema.event_type(ev)) else ""
        if owner and owner not in mentions:
            mentions[owner] = pos
    if len(mentions) < 2:
        return None
    plan = PathPlan(mentions=mentions, events=events, target=None)
    target = _asked_for(schema, question, mentions)
    if target is None:
        return plan  # the caller lets the model choose the answer type among the mentions
    planned = plan.towards(schema, target)
    return planned if len(planned.path) > 1 else None


@dataclass
class StepFilters:
    """Conditions per path step; numeric ones wait for the attribute to be chosen."""

    fixed: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    numeric: dict[str, list[tuple[str, float]]] = field(default_factory=dict)  # entity → (op, value)
    numeric_fields: dict[str, list[str]] = field(default_factory=dict)  # entity → numeric attributes

    def render(self, entity: str, numeric_choice: dict[str, str]) -> list[dict[str, Any]]:
        out = list(self.fixed.get(entity, []))
        for op, value in self.numeric.get(entity, []):
            out.append({"field": numeric_choice[entity], "op": op, "value": value})
        return out[:MAX_FILTERS]


def _nearest_before(mentions: dict[str, int], pos: int, allowed: list[str]) -> str | None:
    """The allowed type named closest before ``pos`` (else closest after)."""
    before = [(pos - p, m) for m, p in mentions.items() if m in allowed and p <= pos]
    after = [(p - pos, m) for m, p in mentions.items() if m in allowed and p > pos]
    pool = sorted(before) or sorted(after)
    return pool[0][1] if pool else None


def filters_by_step(schema: MemorySchema, question: str, plan: PathPlan, cands: list[Candidate]) -> StepFilters:
    """Assign each grounded condition of the question to the path step it is about."""
    low = question.lower()
    lang = schema.language
    steps = StepFilters()
    on_path = list(plan.path)
    mentions = {m: p for m, p in plan.mentions.items() if m in on_path}

    def add(entity: str | None, f: dict[str, Any]) -> None:
        if entity is not None and f not in steps.fixed.setdefault(entity, []):
            steps.fixed[entity].append(f)

    compared: dict[str, str] = {}
    for c in candidates_for("number", cands):
        op = lang.comparison_before(low, c.surface)
        if op:
            compared[c.surface.strip()] = op
    codes = [c for c in candidates_for("code", cands) if c.surface.strip() not in compared]
    tags = tag_codes(question, codes, schema.entity_keywords, schema.entity_id_patterns)
    for c in codes:
        owner = tags.get(str(c.value))
        pos = low.find(c.surface.lower())
        owner = owner if owner in on_path else _nearest_before(mentions, pos, on_path)
        add(owner, {"field": "id", "op": "contains", "value": str(c.value)})
    numeric_attrs = {
        m: names
        for m in on_path
        if (names := [a.name for a in schema.entity(m).value_attributes if value_role(a) == "number"])
    }
    numeric_owners = list(numeric_attrs)
    for c in candidates_for("number", cands):
        op = compared.get(c.surface.strip())
        if op is None:
            continue
        owner = _nearest_before(mentions, low.find(c.surface.strip().lower()), numeric_owners)
        owner = owner or (numeric_owners[0] if numeric_owners else None)
        if owner is None:
            continue
        steps.numeric.setdefault(owner, []).append((op, float(c.value)))
        steps.numeric_fields[owner] = numeric_attrs[owner]
    event_owner: str | None = None
    for ev_name in sorted(plan.events, key=plan.events.__getitem__):
        ev = schema.event_type(ev_name)
        if ev is not None and ev.entity in on_path:
            add(ev.entity, {"field": "event_type", "op": "eq", "value": ev.name})
            event_owner = event_owner or ev.entity
    keywords = {k for words in schema.entity_keywords.values() for k in words}
    topics = sorted((m for rx in lang.pattern("topic") for m in re.finditer(rx, low)), key=lambda m: m.start())
    for m in topics:
        topic = next(g for g in m.groups() if g)
        if topic in keywords or any(topic.startswith(k) for k in keywords if k.isascii()):
            continue
        owner = event_owner or _nearest_before(mentions, m.start(), on_path)
        add(owner, {"field": "text", "op": "contains", "value": topic})
    for ent_name in on_path:
        for st in schema.entity(ent_name).states:
            at = find_word(low, st.lower())
            if at >= 0 and at not in plan.events.values():  # "booked" already read as an event
                add(ent_name, {"field": "state", "op": "eq", "value": st})
    return steps
