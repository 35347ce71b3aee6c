"""A natural-language question → a structured ``RecallQuery``, decoded under a grammar.

Grounded like extraction: entity and event type are chosen by likelihood among the
schema's options (or null); filter values are spans found in the question (ids, numbers,
state names), and the model picks which field each value constrains. Comparison words
("over", "超过") fix the operator deterministically. The assembled JSON must match the
compiled query grammar and validate as a ``RecallQuery``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from pydantic import ValidationError

from ..domain.records import MAX_FILTERS, RecallQuery
from ..domain.schema import MemorySchema
from ..extract.candidates import Candidate, candidates_for, find_candidates, tag_codes, value_role
from ..model.decode import choose, constrained_greedy
from ..model.engine import Engine
from ..model.grammar import CompiledGrammar, GrammarCache
from ..model.prompt import PromptParts, query_prompt
from ..model.scoring import geometric_confidence
from .hops import PathPlan, filters_by_step, plan_path

__all__ = ["QuestionParser", "ParsedQuestion"]


@dataclass
class ParsedQuestion:
    query: RecallQuery | None
    raw_output: str
    confidence: float
    problem: str = ""


def _j(v: Any) -> str:
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"))


class QuestionParser:
    def __init__(self, schema: MemorySchema, engine: Engine, grammars: GrammarCache) -> None:
        self.schema = schema
        self.engine = engine
        self.grammars = grammars
        self.compiled: CompiledGrammar = grammars.compile(schema)
        self._regex = re.compile(self.compiled.query_regex)
        self._prompt: PromptParts = query_prompt(schema, engine)
        self.lang = schema.language

    def prepare(self) -> None:
        """Evaluate the query prompt prefix once (its KV state is kept for the first question)."""
        tokens, _ = self._prompt.tokens(self.engine, "")
        self.engine.start(tokens)

    def parse(self, question: str, now: datetime, mode: Literal["grounded", "greedy"] = "grounded") -> ParsedQuestion:
        if mode == "greedy":
            self.engine.start(self._prompt.tokens(self.engine, question)[0])
            index = self.grammars.index(self.compiled, "query", self.engine.vocabulary(), self.engine.tokenizer_id)
            res = constrained_greedy(self.engine, index, 200)
            raw, conf = res.text, res.confidence
        else:
            cands = find_candidates(self.lang, question, now, self.schema.entity_nouns)
            plan = plan_path(self.schema, question)
            plain = self._without_model(question, cands, plan)
            if plain is not None:
                return plain
            self.engine.start(self._prompt.tokens(self.engine, question)[0])
            raw, conf = self._grounded(question, cands, plan)
        if not self._regex.fullmatch(raw):
            return ParsedQuestion(None, raw, 0.0, "output does not match the query grammar")
        try:
            q = RecallQuery.model_validate_json(raw)
        except ValidationError as exc:
            return ParsedQuestion(None, raw, 0.0, f"invalid query: {exc.errors()[0]['msg']}")
        if self.lang.asks_all_sessions(question):
            q = q.model_copy(update={"all_sessions": True})
        return ParsedQuestion(q, raw, conf)

    def _without_model(self, question: str, cands: list[Candidate], plan: PathPlan | None) -> ParsedQuestion | None:
        """The query of a question that gives the model nothing to decide: no code, number or
        state word to filter on, no path through related types, no request for recent things.
        Its query constrains nothing, so recall does not run it and the model's guess of an
        entity type would change no result — the model is skipped (most conversational
        questions; it saves the question's prompt evaluation). None: the model is needed."""
        s, low = self.schema, question.lower()
        if plan is not None or self.lang.asks_recent(question):
            return None
        if candidates_for("code", cands) or candidates_for("number", cands):
            return None
        if any(st.lower() in low for ent in s.entities for st in ent.states):
            return None
        named, mentioned = self._named_types(low), self._mentioned_events(low)
        q = RecallQuery(
            entity_type=named[0] if len(named) == 1 else None,
            event_type=mentioned[0] if mentioned else None,
            limit=5,  # as the grounded query
        )
        if self.lang.asks_all_sessions(question):
            q = q.model_copy(update={"all_sessions": True})
        return ParsedQuestion(q, q.model_dump_json(), 1.0)

    def _named_types(self, low: str) -> list[str]:
        """The entity types the (lower-cased) question names by one of their words."""
        return [x.name for x in self.schema.entities if any(k in low for k in x.keywords)]

    def _mentioned_events(self, low: str) -> list[str]:
        """The event types the (lower-cased) question names outright ("order cancelled")."""
        return [ev.name for ev in self.schema.event_types if ev.name.replace("_", " ") in low]

    def _grounded(self, question: str, cands: list[Candidate], plan: PathPlan | None) -> tuple[str, float]:
        e, s = self.engine, self.schema
        out: list[str] = []
        probs: list[float] = []

        def force(text: str) -> None:
            e.extend(e.tokenize(text))
            out.append(text)

        def pick(options: list[str], per_token: bool = False) -> str:
            c = choose(e, options, per_token=per_token)
            probs.append(c.probability)
            out.append(options[c.index])
            return options[c.index]

        if plan is not None:
            return self._grounded_hops(question, plan, cands, force, out, probs)
        compared = {c.surface for c in cands if self.lang.comparison_before(question.lower(), c.surface)}
        codes = [c for c in candidates_for("code", cands) if c.surface not in compared]
        tags = tag_codes(question, codes, s.entity_keywords, s.entity_id_patterns)
        low = question.lower()
        named = self._named_types(low)
        force('{"entity_type":')
        if len(named) == 1 or (named and codes and tags.get(str(codes[0].value)) in named):
            chosen = tags.get(str(codes[0].value)) if codes and tags.get(str(codes[0].value)) else named[0]
            force(_j(chosen))  # the question names the entity type outright
            entity_type: str | None = chosen
        else:
            entity_type = json.loads(pick([_j(n) for n in s.entity_names] + ["null"]))
        ent = s.entity(entity_type) if entity_type else None
        force(',"event_type":')
        mentioned_events = self._mentioned_events(low)
        force(_j(mentioned_events[0]) if mentioned_events else "null")
        force(',"filters":[')
        filters: list[str] = []
        for c in codes[:MAX_FILTERS]:
            target = tags.get(str(c.value))
            if ent is not None and (target is None or target == ent.name):
                field = "id"
            elif ent is not None and target is not None:
                ref = next(
                    (
                        a.name
                        for a in ent.value_attributes
                        if a.kind == "ref" and s.entity_for_id_attribute(a.name) == s.entity(target)
                    ),
                    None,
                )
                field = ref or "id"
            else:
                field = "id"
            filters.append(_j({"field": field, "op": "contains", "value": str(c.value)}))
        if ent is not None:
            for st in ent.states:
                if st.lower() in low and len(filters) < MAX_FILTERS:
                    filters.append(_j({"field": "state", "op": "eq", "value": st}))
            numeric = [a.name for a in ent.value_attributes if value_role(a) == "number"]
            for c in candidates_for("number", cands):
                if len(filters) >= MAX_FILTERS or not numeric or any(str(c.value) in f for f in filters):
                    continue
                if c.surface.strip() in {x.surface for x in codes}:
                    continue
                op = self.lang.any_comparison(question) or "eq"
                field = (
                    numeric[0] if len(numeric) == 1 else json.loads(_pick_silent(e, [_j(n) for n in numeric], probs))
                )
                filters.append(_j({"field": field, "op": op, "value": c.value}))
        force(",".join(filters))
        force('],"sort":null,"limit":')
        force("5")
        force(',"hops":[]}')
        return "".join(out), geometric_confidence(probs)

    def _grounded_hops(
        self,
        question: str,
        plan: PathPlan,
        cands: list[Candidate],
        force: Callable[[str], None],
        out: list[str],
        probs: list[float],
    ) -> tuple[str, float]:
        """A question naming several related entity types ("users who complained about
        logistics on orders over 1000"): start where the conditions are, hop to the answer."""
        e, s = self.engine, self.schema
        force('{"entity_type":')
        if plan.target is None:  # the wording did not say which type is asked for: the model picks
            named = sorted(plan.mentions, key=plan.mentions.__getitem__)
            target = json.loads(_pick_silent(e, [_j(n) for n in named], probs))
            plan = plan.towards(s, target)
        assert plan.target is not None
        steps = filters_by_step(s, question, plan, cands)
        numeric_choice = {
            ent: json.loads(_pick_silent(e, [_j(a) for a in attrs], probs)) if len(attrs) > 1 else attrs[0]
            for ent, attrs in steps.numeric_fields.items()
        }
        start = plan.path[0]
        force(_j(start))
        force(',"event_type":null,"filters":[')
        force(",".join(_j(f) for f in steps.render(start, numeric_choice)))
        force('],"sort":null,"limit":10,"hops":[')
        hops = [
            _j({"relationship": rel, "target_type": nxt, "filters": steps.render(nxt, numeric_choice)})
            for rel, nxt in zip(plan.relationships, plan.path[1:])
        ]
        force(",".join(hops) + "]}")
        return "".join(out), geometric_confidence(probs)


def _pick_silent(e: Engine, options: list[str], probs: list[float]) -> str:
    c = choose(e, options, commit=False)
    probs.append(c.probability)
    return options[c.index]
