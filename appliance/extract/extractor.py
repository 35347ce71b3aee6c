"""(text, schema, engine) → a validated record draft, grounded in the text.

Why field by field: a grammar makes a record *valid*, not *true* — tiny models copy ids from the
examples ("777") and pick enums by their first greedy token. The grounded decoder therefore
writes the record JSON itself, in schema order, and at each value only *chooses*:

* values come from evidence first (``evidence.py``): every candidate span of the text
  (``spans.py``: typed numbers/dates/times/codes, names, phrases, CJK pieces) is scored for every
  attribute its kind admits, and each attribute takes at most one span above the threshold —
  a value not in the text cannot be emitted; enum values and booleans come from the schema;
* the event type: the model's calibrated likelihood of each option plus the evidence in
  ``events.py`` (descriptions, examples, keywords, question form, which attributes the text
  fills, the session's previous event);
* ids and references: codes found in the text, tagged to an entity by a keyword before them or
  their declared shape; states: the event's declared effect or affirmed state words.

The assembled JSON must match the compiled record grammar and validate against the schema's
pydantic model before it is returned. ``mode="greedy"`` decodes the whole record under the
grammar instead (the baseline the benchmark compares against).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

import numpy as np
from pydantic import ValidationError

from ..domain.drafts import draft_model
from ..domain.links import derive_relationships
from ..domain.records import RecordDraft
from ..domain.schema import Attribute, EntityType, MemorySchema
from ..errors import GrammarError
from ..lang import alternation
from ..lang.segment import load_segmenter
from ..model.decode import choose, constrained_greedy, llguidance_greedy
from ..model.engine import Engine
from ..model.grammar import CompiledGrammar, GrammarCache
from ..model.prompt import PromptParts, record_prompt
from ..model.scoring import PriorCache, best_of, decisive_prefixes, geometric_confidence, softmax
from .candidates import Candidate as Code
from .candidates import candidates_for, find_candidates, tag_codes
from .events import (
    EVENT_FEATURES,
    EventEvidence,
    cue_features,
    entity_features,
    event_similarities,
    fill,
    lexical_features,
    named_features,
    specific,
    support,
    weights_for,
    without_sought_nearby,
)
from .evidence import Candidate, SchemaEvidence, scorer
from .examples import ExampleBank
from .review import review_features, review_model
from .spans import find_spans

__all__ = ["Extraction", "Extractor", "ExtractMode", "SessionHint"]

ExtractMode = Literal["grounded", "greedy"]
MAX_RECORD_TOKENS = 320
# With worked examples in the prompt the event scores spread more (the model's likelihood counts
# fully): on the shipped schemas' dev set 0.5 flags 11 % and leaves 4 % silently wrong. Schemas
# without examples are flagged by the fitted review model (``review.py``).
CLOSE_CALL_WITH_EXAMPLES = 0.5


@dataclass
class SessionHint:
    """What the caller knows about the session a message belongs to, and what people taught."""

    previous_event: str | None = None  # the event of the session's latest record
    corrects: str | None = None  # the event of an earlier record this message corrects
    examples: ExampleBank | None = None  # reviewed records of this schema
    told: frozenset[str] = frozenset()  # attributes the session's earlier records of this schema hold
    # per entity type, the keys of the session's entities of it ("Biscuit", "spay"): a note that
    # names one again is about it
    known: Mapping[str, frozenset[str]] = field(default_factory=dict)


def keys_besides(known: Mapping[str, frozenset[str]], entity: str) -> frozenset[str]:
    """The keys ``known`` holds of entity types other than ``entity`` (the other things a note
    may speak of: the bike a service was done on)."""
    return frozenset().union(*(v for k, v in known.items() if k != entity))


@dataclass
class Extraction:
    draft: RecordDraft | None
    raw_output: str
    confidence: float
    note: str = ""
    attempts: int = 1
    field_confidence: dict[str, float] = field(default_factory=dict)
    truncated_input: bool = False
    spans: dict[str, str] = field(default_factory=dict)  # attribute → the text its value came from
    review: str = ""  # why the record needs a person's review ("" when it does not)
    evidence: dict[str, Any] = field(default_factory=dict)  # scores behind the choices (benchmarks)


def _j(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class _Trace(list[str]):
    """The record being written; reports each new piece so the panel can stream it."""

    def __init__(self, callback: Callable[[str], None] | None) -> None:
        super().__init__()
        self.callback = callback

    def append(self, piece: str) -> None:
        super().append(piece)
        if self.callback is not None:
            self.callback("".join(self))


def assign(
    cands: Mapping[str, list[Candidate]],
    threshold: float | None = None,
    keys: frozenset[str] = frozenset(),
    key_threshold: float | None = None,
) -> dict[str, Candidate]:
    """Each attribute takes its best candidate above ``threshold``; a piece of text fills one
    attribute (best pairs first). A key attribute (``keys``) left empty then takes its best free
    candidate above the scorer's lower ``key_threshold``: a note is about something, and the name
    it goes by is nearly always said even when nothing marks it as the value ("Lent Azul to Priya")."""
    limit = scorer().threshold if threshold is None else threshold
    pool = sorted(
        ((c.score, name, c) for name, cs in cands.items() for c in cs if c.score > limit),
        key=lambda x: -x[0],
    )
    chosen: dict[str, Candidate] = {}
    used: list[tuple[int, int]] = []
    for _, name, c in pool:
        if name in chosen or _overlaps(c, used):
            continue
        chosen[name] = c
        used.append((c.start, c.end))
    key_limit = scorer().key_threshold if key_threshold is None else key_threshold
    for name in sorted(keys - chosen.keys()):
        free = (c for c in cands.get(name, []) if not _overlaps(c, used))
        best = max(free, key=lambda c: c.score, default=None)
        if best is not None and best.score > key_limit:
            chosen[name] = best
            used.append((best.start, best.end))
    return chosen


def _overlaps(c: Candidate, used: list[tuple[int, int]]) -> bool:
    """Whether ``c``'s piece of text overlaps one already taken."""
    return any(a < c.end and c.start < b for a, b in used)


def _rivals(
    cands: Mapping[str, list[Candidate]], chosen: Mapping[str, Candidate], listed: frozenset[str] = frozenset()
) -> dict[str, tuple[str, float]]:
    """Per filled attribute: the other attribute the same words would fill next best, and by how
    much less it scores ("Michael Chaves" as director or as starring). ``listed``: attributes whose
    values come from a list (enum, boolean) — two attributes sharing one list tie on every value,
    so they are not rivals."""
    out: dict[str, tuple[str, float]] = {}
    for name, c in chosen.items():
        if name in listed:
            continue
        best: tuple[str, float] | None = None
        for other, cs in cands.items():
            if other == name or other in chosen or other in listed:
                continue
            for c2 in cs:
                if (c2.start, c2.end) == (c.start, c.end) and (best is None or c.score - c2.score < best[1]):
                    best = (other, c.score - c2.score)
        if best is not None:
            out[name] = best
    return out


class Extractor:
    """Turns utterances into record drafts for one schema on one engine."""

    def __init__(
        self,
        schema: MemorySchema,
        engine: Engine,
        grammars: GrammarCache,
        mode: ExtractMode = "grounded",
        calibrate: bool = True,
        lexical: bool = True,
        backend: str = "outlines_core",
        embedder: Any = None,
        event_weights: Mapping[str, float] | None = None,
    ) -> None:
        self.embedder = embedder  # sentence encoder for similarity evidence (optional)
        if backend not in ("outlines_core", "llguidance"):
            raise GrammarError(f"unknown grammar backend {backend!r}", hint="use outlines_core or llguidance")
        self.backend = backend  # llguidance when the engine supports it, else outlines_core
        self.on_progress: Callable[[str], None] | None = None  # sees the record JSON grow, field by field
        self.calibrate = calibrate  # subtract the content-free prior from event scores
        self.lexical = lexical  # evidence beyond the model (False: the likelihood-only ablation)
        self.schema = schema
        self.engine = engine
        self.mode = mode
        self.grammars = grammars
        self.compiled: CompiledGrammar = grammars.compile(schema)
        self._regex = re.compile(self.compiled.record_regex)
        self._prompt: PromptParts = record_prompt(schema, engine)
        self._model = draft_model(schema)
        self._priors = PriorCache()
        self.lang = schema.language
        self.evidence = SchemaEvidence(schema, embedder)
        self.event_weights = dict(event_weights or weights_for(schema))

    def prepare(self) -> None:
        """Evaluate the prompt prefix and the content-free event prior (cached afterwards), and
        load the CJK segmenter's dictionary (a second) before the first message needs it."""
        if self.mode == "grounded" and self.calibrate:
            self._prior([_j(n) for n in self.schema.event_names])
        if self.lang.lex.verbal_tags:
            load_segmenter()

    # ---------------------------------------------------------------------------------
    def extract(
        self,
        text: str,
        now: datetime,
        mode: ExtractMode | None = None,
        retry: bool = True,
        corrects: str | None = None,
        hint: SessionHint | None = None,
    ) -> Extraction:
        """Extract one record; on an invalid result retry once in the other mode.

        ``hint`` carries what the session knows (the previous event; the event of a record
        this message corrects — "not 12345, I meant 12354" alone names no event)."""
        hint = hint or SessionHint(corrects=corrects)
        if corrects is not None:
            hint.corrects = corrects
        first = mode or self.mode
        result = self._attempt(text, now, first, hint)
        if result.draft is None and retry:
            other: ExtractMode = "greedy" if first == "grounded" else "grounded"
            second = self._attempt(text, now, other, hint)
            second.attempts = 2
            second.note = "; ".join(n for n in (result.note, second.note) if n)
            if second.draft is not None:  # a second try is a guess at best: a person looks
                second.review = "; ".join(r for r in (second.review, f"written by the {other} decoder on a retry") if r)
            return second
        return result

    def _attempt(self, text: str, now: datetime, mode: ExtractMode, hint: SessionHint) -> Extraction:
        tokens, truncated = self._prompt.tokens(self.engine, text)
        if mode == "grounded" and self.calibrate:
            self._prior([_j(n) for n in self.schema.event_names])
        self.engine.start(tokens)
        found = _Found()
        if mode == "grounded":
            raw, conf, fields = self._grounded(text, now, hint, found)
        else:
            make = getattr(self.engine, "llguidance_matcher", None)
            if self.backend == "llguidance" and make is not None:
                res = llguidance_greedy(self.engine, make(self.compiled.record_schema), MAX_RECORD_TOKENS)
            else:
                res = constrained_greedy(self.engine, self._index(), MAX_RECORD_TOKENS)
            raw, conf, fields = res.text, res.confidence, {}
            if not res.finished:
                return Extraction(
                    None, raw, 0.0, note=f"output cut at {MAX_RECORD_TOKENS} tokens", truncated_input=truncated
                )
        draft, problem = self.validate(raw)
        note = "input truncated to fit the context" if truncated else ""
        if draft is None:
            return Extraction(None, raw, 0.0, note=problem, truncated_input=truncated)
        review = found.review
        if mode == "greedy":  # free decoding may write what the message never said ("9034")
            draft, dropped = ungrounded_dropped(draft, self.schema.entity(draft.entity.type), text)
            if dropped:
                review = "; ".join(r for r in (review, f"not in the message, dropped: {', '.join(dropped)}") if r)
        return Extraction(
            draft,
            raw,
            conf,
            note=note,
            field_confidence=fields,
            truncated_input=truncated,
            spans=found.spans,
            review=review,
            evidence=found.evidence,
        )

    def _index(self) -> Any:
        return self.grammars.index(self.compiled, "record", self.engine.vocabulary(), self.engine.tokenizer_id)

    def validate(self, raw: str) -> tuple[RecordDraft | None, str]:
        """Grammar check, then pydantic against the schema; returns (draft, problem)."""
        if not self._regex.fullmatch(raw):
            return None, "output does not match the record grammar"
        try:
            typed = self._model.model_validate_json(raw)
        except ValidationError as exc:
            return None, f"output fails schema validation: {exc.errors()[0]['msg']}"
        return RecordDraft.model_validate(typed.model_dump(by_alias=True)), ""

    # --- grounded decoding ------------------------------------------------------------
    def _grounded(
        self, text: str, now: datetime, hint: SessionHint, found: _Found
    ) -> tuple[str, float, dict[str, float]]:
        e = self.engine
        s = self.schema
        out: list[str] = _Trace(self.on_progress)
        conf: dict[str, float] = {}

        def force(piece: str) -> None:
            e.extend(e.tokenize(piece))
            out.append(piece)

        def pick(name: str, options: list[str], per_token: bool = False) -> str:
            c = choose(e, options, per_token=per_token)
            conf[name] = c.probability
            out.append(options[c.index])
            return options[c.index]

        codes = candidates_for("code", find_candidates(self.lang, text, now, s.entity_nouns))
        tags = tag_codes(text, codes, s.entity_keywords, s.entity_id_patterns)
        spans = find_spans(self.lang, text, now) if self.lexical else []
        # values each entity type would take from this message (refs and ids are codes: below)
        filled: dict[str, dict[str, Candidate]] = {}
        near: dict[str, float] = {}
        candidates: dict[str, dict[str, list[Candidate]]] = {}
        for ent in s.entities:
            cands = (
                self.evidence.candidates(
                    ent.name,
                    text,
                    spans,
                    bank=hint.examples,
                    known=hint.known.get(ent.name),
                    known_other=keys_besides(hint.known, ent.name),
                )
                if self.lexical
                else {}
            )
            cands = {k: v for k, v in cands.items() if (a := ent.attribute(k)) is not None and a.kind != "ref"}
            candidates[ent.name] = cands
            filled[ent.name] = assign(cands, keys=frozenset(ent.key))
            near[ent.name] = max((c.score for cs in cands.values() for c in cs), default=-99.0)
        force('{"event_type":')
        event_opts = [_j(n) for n in s.event_names]
        ev_features = self._event_features(text, event_opts, filled, hint)
        adjusted = ev_features.scores(self.event_weights)
        chosen = best_of(adjusted)
        conf["event_type"] = chosen.probability
        e.extend(e.tokenize(event_opts[chosen.index]))
        out.append(event_opts[chosen.index])
        event = s.event_names[chosen.index]
        found.evidence["event_scores"] = dict(zip(s.event_names, (round(float(x), 3) for x in adjusted)))
        found.evidence["event_features"] = {k: [round(float(x), 3) for x in v] for k, v in ev_features.features.items()}
        force(',"entity":{"type":')
        hinted = ev.entity if (ev := s.event_type(event)) else ""
        if hinted and self.lexical:
            # The schema says which entity this event is about, unless the message names an
            # id of another entity that the declared one cannot hold as a reference
            # ("when does flight BK-5 leave?" is about the Booking, not the Trip).
            ent_name = self._entity_from_ids(codes, tags, hinted)
            force(_j(ent_name))
        elif len(s.entities) == 1:
            ent_name = s.entities[0].name
            force(_j(ent_name))
        else:
            ent_name = self._pick_entity(conf, filled)
            out.append(_j(ent_name))
        ent = s.entity(ent_name)
        force(',"id":')
        entity_id = self._write_id(ent, codes, tags, force, pick)
        force(',"state":')
        self._state(text, event, ent, force, pick)
        force(',"attributes":{')
        chosen_values = filled.get(ent.name, {})
        attributes: dict[str, Any] = {}
        for i, a in enumerate(ent.value_attributes):
            force(("," if i else "") + _j(a.name) + ":")
            if a.kind == "ref":
                attributes[a.name] = self._ref(a, codes, tags, entity_id, pick)
                continue
            c = chosen_values.get(a.name)
            value = _json_value(a, c) if c is not None else None
            if value is not None and c is not None:
                found.spans[a.name] = c.surface
                conf[a.name] = float(1 / (1 + np.exp(-(c.score - scorer().threshold))))
            force(_j(value))
            attributes[a.name] = value
        rels = derive_relationships(s, ent, entity_id, attributes)
        out.append("}}," + '"relationships":' + _j(rels) + "}")
        listed = frozenset(a.name for a in ent.attributes if a.kind in ("enum", "boolean"))
        rivals = _rivals(candidates.get(ent.name, {}), chosen_values, listed)
        close = {a: r for a, r in rivals.items() if attributes.get(a) is not None}
        reasons = (
            self._review(conf, ent, attributes, near.get(ent.name, -99.0), entity_id, close, found),
            self._beside(text, ent, hint, [(c.start, c.end) for c in chosen_values.values()]),
            self._agreed(text, ent, attributes),
        )
        found.review = "; ".join(r for r in reasons if r)
        found.evidence["filled"] = {a: (c.surface, round(c.score, 3)) for a, c in chosen_values.items()}
        found.evidence["rivals"] = {a: (b, round(m, 3)) for a, (b, m) in close.items()}
        return "".join(out), geometric_confidence(list(conf.values())), conf

    def _event_features(
        self, text: str, event_opts: list[str], filled: dict[str, dict[str, Candidate]], hint: SessionHint
    ) -> EventEvidence:
        e, s = self.engine, self.schema
        n = len(s.event_types)
        lm = np.array(e.score(self._scored_options(event_opts)))
        if self.calibrate:
            lm = lm - np.array(self._prior(event_opts))
        features: dict[str, np.ndarray] = {"lm": lm}
        if self.lexical:
            keyword, question = cue_features(s, text)
            told = without_sought_nearby(
                self.lang, text, [(c.start, c.end) for v in filled.values() for c in v.values()]
            )
            features["lexical"] = lexical_features(s, told)
            features["semantic"] = self._semantic(told)
            features["keyword"] = keyword
            features["question"] = question
            features["correction"] = np.array([float(x == hint.corrects) for x in s.event_names])
            best_fill = max(filled.values(), key=len) if filled else {}
            features["support"] = np.array(
                [support(ev, filled.get(ev.entity, best_fill) if ev.entity else best_fill) for ev in s.event_types]
            )
            threshold = scorer().threshold
            strength = {
                ent: sum(float(1 / (1 + np.exp(-(c.score - threshold)))) for c in values.values())
                for ent, values in filled.items()
            }
            features["fill"] = fill(s, strength)
            features["entity"] = entity_features(s, told)
            features["named"] = self._named(filled)
            features["continues"] = np.array([float(x == hint.previous_event) for x in s.event_names])
            features["commits"] = np.array([float(ev.commits) for ev in s.event_types])
            features["taught"] = self._taught(text, hint.examples)
            told_attributes = {ent: frozenset(values) | hint.told for ent, values in filled.items()}
            features["specific"] = specific(s, told_attributes)
        else:
            features.update({k: np.zeros(n) for k in EVENT_FEATURES if k != "lm"})
        return EventEvidence(features)

    def _semantic(self, text: str) -> np.ndarray:
        """Best cosine between the message and each event type's description/examples."""
        n = len(self.schema.event_types)
        if self.embedder is None or not any(ch.isalnum() for ch in text):
            return np.zeros(n)
        try:
            return event_similarities(self.schema, self.embedder, text)
        except Exception:  # noqa: BLE001 - an optional signal; the lexical one still stands
            return np.zeros(n)

    def _named(self, filled: dict[str, dict[str, Candidate]]) -> np.ndarray:
        """The ``named`` feature for the best-scored name value any entity type fills."""
        names = [
            c
            for ent, values in filled.items()
            for a, c in values.items()
            if (attr := self.schema.entity(ent).attribute(a)) is not None and attr.format == "name"
        ]
        if self.embedder is None or not names:
            return np.zeros(len(self.schema.event_types))
        try:
            return named_features(self.schema, self.embedder, max(names, key=lambda c: c.score).surface)
        except Exception:  # noqa: BLE001 - an optional signal, like the semantic one
            return np.zeros(len(self.schema.event_types))

    def _taught(self, text: str, bank: ExampleBank | None) -> np.ndarray:
        """Per event: the message's best similarity to the corrected examples of that event."""
        if bank is None or not len(bank) or self.embedder is None:
            return np.zeros(len(self.schema.event_types))
        return bank.event_similarity(self.embedder.encode([text])[0])

    def _pick_entity(self, conf: dict[str, float], filled: dict[str, dict[str, Candidate]]) -> str:
        """No event names the entity: the model's choice plus how much of each entity's
        attributes the message fills."""
        e, s = self.engine, self.schema
        options = [_j(n) for n in s.entity_names]
        lm = np.array(e.score([e.tokenize(o) for o in options]))
        fill = np.array([sum(c.score for c in filled.get(n, {}).values()) for n in s.entity_names])
        scores = lm + (fill if self.lexical else 0.0)
        best = int(np.argmax(scores))
        conf["entity_type"] = float(softmax(scores)[best])
        e.extend(e.tokenize(options[best]))
        return s.entity_names[best]

    def _write_id(self, ent: EntityType, codes: list[Code], tags: dict[str, str], force: Any, pick: Any) -> str | None:
        """The entity's code: one of the codes tagged to it, else an untagged one or null.
        Entities without an id attribute take none here (a key or the session identifies them)."""
        if not ent.id_attribute:
            force("null")
            return None
        own = [c for c in codes if tags.get(str(c.value)) == ent.name]
        untagged = [c for c in codes if str(c.value) not in tags]
        id_options = [_j(str(c.value)) for c in (own or untagged)]
        return json.loads(pick("id", id_options if own else id_options + ["null"], True))

    def _ref(self, a: Attribute, codes: list[Code], tags: dict[str, str], entity_id: str | None, pick: Any) -> Any:
        """A reference: a code tagged to the referenced entity, else an untagged code or null."""
        pool = [c for c in codes if c.value != entity_id]
        target = self.schema.entity_for_id_attribute(a.name)
        tagged = [c for c in pool if target and tags.get(str(c.value)) == target.name]
        pool = tagged or [c for c in pool if str(c.value) not in tags]
        options = [_j(c.value) for c in pool] + ([] if tagged else ["null"])
        if len(options) == 1:  # forced, but its value still counts (relationships derive from it)
            return json.loads(pick(a.name, options))
        return json.loads(pick(a.name, options, True))

    def _review(
        self,
        conf: dict[str, float],
        ent: EntityType,
        attributes: dict[str, Any],
        near: float,
        entity_id: str | None,
        rivals: Mapping[str, tuple[str, float]],
        found: _Found,
    ) -> str:
        """Why a person should look at this record ("" when nothing calls for it): the fitted
        review model's reason (``review.py``); schemas with worked examples keep the rule
        measured on them (their event scores spread more)."""
        offered = near > -99.0  # the message offered candidate values (it is not mere small talk)
        features = review_features(conf, ent, attributes, entity_id, rivals, offered)
        found.evidence["review_features"] = features
        if not self.schema.examples:
            return review_model().reason(features)
        if conf.get("event_type", 1.0) < CLOSE_CALL_WITH_EXAMPLES:
            return f"event choice was close (p={conf['event_type']:.2f})"
        if features["offered_unused"] and ent.value_attributes:
            return "the message seems to state values, but none was recognised"
        return ""

    def _beside(self, text: str, ent: EntityType, hint: SessionHint, values: list[tuple[int, int]]) -> str:
        """Why the entity type is in doubt when the message names it only after a word of
        nearness while the session was about another type: "北京邮电会议中心周边有哪些餐馆？" after
        a hotel was chosen asks about the hotel's surroundings, and the restaurants are what is
        near it — or a new restaurant search. Which one the message is about, the words do not say
        (CrossWOZ sample: 18 records, 9 each way) unless a value of the record stands after the
        word of nearness ("附近有没有400-500元的酒店？" seeks a hotel at that price)."""
        previous = self.schema.event_type(hint.previous_event) if hint.previous_event else None
        if previous is None or previous.entity in ("", ent.name) or not self.lang.lex.nearby_words:
            return ""
        low = text.lower()
        near = re.search(alternation(self.lang.lex.nearby_words), low)
        if near is None:
            return ""
        named = [m.start() for m in re.finditer(alternation(ent.keywords), low)]
        if not named or min(named) < near.start() or any(end > near.start() for _, end in values):
            return ""
        return f"{ent.name} is named after {near.group(0)!r}: what is near, or what the message is about?"

    def _agreed(self, text: str, ent: EntityType, attributes: Mapping[str, Any]) -> str:
        """Why a bare agreement ("Yes, that's fine.") is in doubt when the entity has yes/no
        attributes: it may answer a question about one of them ("Is a shared ride ok?"), which
        the message does not show, and the record holds no value for it (SGD, all turns: 33
        such records were stored ``ok`` and each had lost a yes/no value)."""
        yes_no = [a.name for a in ent.value_attributes if a.kind == "boolean"]
        if not yes_no or any(v is not None for v in attributes.values()) or not self.lang.bare_agreement(text):
            return ""
        return f"a bare agreement: what it agrees to is not in the message ({', '.join(yes_no[:3])}?)"

    def _entity_from_ids(self, codes: list[Code], tags: dict[str, str], declared: str) -> str:
        named = [tags[str(c.value)] for c in codes if str(c.value) in tags]
        if not named or declared in named:
            return declared
        decl = self.schema.entity(declared)
        refs = {
            t.name
            for a in decl.value_attributes
            if a.kind == "ref" and (t := self.schema.entity_for_id_attribute(a.name)) is not None
        }
        others = [n for n in named if n not in refs]
        return others[0] if others else declared

    def _state(self, text: str, event: str, ent: EntityType, force: Any, pick: Any) -> None:
        """The entity's state: implied by the event, else evidenced by the text, else null.

        Without ``lexical`` (the ablation) every state plus null is scored by likelihood.
        """
        if not ent.states:
            force("null")
            return
        if not self.lexical:
            pick("state", [_j(s) for s in ent.states] + ["null"])
            return
        ev = self.schema.event_type(event)
        if ev is not None and ev.sets_state and ev.entity == ent.name:
            force(_j(ev.sets_state))  # declared effect of the event: no model call
            return
        low = text.lower()
        evidenced = [
            st
            for st in ent.states
            if any(
                self.lang.affirmed(low, w.lower(), self.evidence.negation_scope)
                for w in (st.replace("_", " "), *ent.state_aliases.get(st, ()))
            )
        ]
        if not evidenced:
            force("null")
            return
        pick("state", [_j(s) for s in evidenced])

    def _scored_options(self, options: list[str]) -> list[list[int]]:
        """The event options as the model scores them. Zero-shot, the likelihood earns little
        weight (``EVENT_WEIGHTS["lm"]``) and the part of each option that tells it apart is
        enough (CrossWOZ records ~0.1 s faster); with worked examples the whole option's
        likelihood counts fully, so it is scored whole."""
        tokens = [self.engine.tokenize(o) for o in options]
        return tokens if self.schema.examples else decisive_prefixes(tokens)

    def _prior(self, options: list[str]) -> list[float]:
        """Log-probabilities of the event options for a content-free message.

        Subtracting them (contextual calibration) removes the prompt's bias towards some
        options (measured: SmolLM2 otherwise picks one event type for almost everything).
        The prior depends only on the schema prompt, so it is computed once.
        """

        def compute() -> list[float]:
            tokens, _ = self._prompt.tokens(self.engine, "N/A")
            self.engine.start(tokens + self.engine.tokenize('{"event_type":'))
            return self.engine.score(self._scored_options(options))

        return list(self._priors.get(tuple(options), compute))


@dataclass
class _Found:
    spans: dict[str, str] = field(default_factory=dict)
    review: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)


def _said(value: Any, low: str, digits: str) -> bool:
    """Whether ``value`` stands in the message (``low``: lower-cased; ``digits``: its digits)."""
    if isinstance(value, bool) or value is None:
        return True  # yes/no is a decision about the message, not a quote of it
    if isinstance(value, (int, float)):
        whole = str(int(value)) if float(value).is_integer() else str(value).replace(".", "")
        return whole in digits
    if isinstance(value, list):
        return all(_said(v, low, digits) for v in value)
    return str(value).strip().lower() in low


def ungrounded_dropped(draft: RecordDraft, ent: EntityType, text: str) -> tuple[RecordDraft, list[str]]:
    """``draft`` without the id, the free-text and reference values and the relationships whose
    ids the message does not contain, and the names of what was dropped. Enums, yes/no, dates,
    times and numbers are the schema's or normalised (2026-03-07, "two" → 2), not quotes."""
    low = text.lower()
    digits = re.sub(r"\D", "", text)
    quoted = {a.name for a in ent.attributes if a.kind in ("string", "list", "ref")}
    dropped: list[str] = []
    entity_id = draft.entity.id
    if entity_id is not None and not _said(entity_id, low, digits):
        dropped.append("id")
        entity_id = None
    attributes = dict(draft.entity.attributes)
    for name in sorted(quoted & attributes.keys()):
        if attributes[name] is not None and not _said(attributes[name], low, digits):
            dropped.append(name)
            attributes[name] = None
    rels = [r for r in draft.relationships if _said(r.from_id, low, digits) and _said(r.to_id, low, digits)]
    if len(rels) < len(draft.relationships):
        dropped.append("relationships")
    entity = draft.entity.model_copy(update={"id": entity_id, "attributes": attributes})
    return draft.model_copy(update={"entity": entity, "relationships": rels}), dropped


def _json_value(a: Attribute, c: Candidate) -> Any:
    """A candidate's value in the JSON type the attribute's kind declares (free strings keep
    the text as written: "¥1,299", not the number it normalises to)."""
    value = c.value
    if value is None:
        return None
    if a.kind in ("string", "list") and not isinstance(value, str):
        value = c.surface
    if a.kind == "number":
        if isinstance(value, str):
            return value  # a range or bound kept as text ("100-150", ">=4.5")
        v = float(value)
        if not math.isfinite(v):
            return None  # "$999…9" (400 digits) is no number JSON can hold
        return int(v) if v.is_integer() and abs(v) < 2**53 else v
    if a.kind == "boolean":
        return bool(value)
    if a.kind == "list":
        return [str(value)]
    return str(value)
