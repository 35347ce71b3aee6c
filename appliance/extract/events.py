"""Which event a message reports: evidence per event type, weighed with the model's choice.

Signals, each a number per event type (``EVENT_FEATURES``):

* ``lm`` — the model's log-probability of the event name after the record prompt, minus the
  same on a content-free message (contextual calibration, ``model/scoring.py``);
* ``lexical`` — overlap of the message with the event's description and examples;
* ``semantic`` — sentence-encoder similarity of the message to the description and examples;
* ``keyword`` — one of the event's optional keywords stands affirmed in the text;
* ``question`` — the message asks something and the event is marked ``question`` (−1 if not);
* ``correction`` — the message corrects an earlier record of this event type;
* ``support`` — the attributes the message fills belong to this event (its ``attributes``
  list): "3 tickets for the 8th" supports buying tickets over searching buses;
* ``fill`` — how much of the message the attributes of the event's entity take (the sum of
  their values' calibrated confidences), relative to the best entity: "叫一辆出租车，从A到B"
  fills the taxi's origin and destination, the hotel only a weak name. Constant, hence
  silent, in a schema with one entity type;
* ``entity`` — overlap of the message with the event's entity (name, description, aliases)
  when the schema has several entity types;
* ``named`` — how like the event's entity the thing the message names is: the sentence
  encoder's similarity between the name value filled ("梅兰芳大剧院", "满恒记火锅") and each
  entity's references, relative to the best entity. "梅兰芳大剧院周边有餐馆吗？" asks about
  the theatre, an attraction, though it says "餐馆"; 0 when the message names nothing or the
  schema has one entity type;
* ``continues`` — the session's previous record was this event (a user who is booking keeps
  booking: "How about Cafe Jolie?" continues the reservation);
* ``specific`` — the event asks for more than a sibling event about the same entity (a
  round trip declares a return date a one-way trip does not): +1 when the message or the
  session's earlier records fill one of those extra attributes, −1 when none is filled — the
  narrower event is the better guess until the extra information is given; 0 for events with
  no narrower sibling;
* ``commits`` — the event commits to something (a booking, a purchase): sessions search first,
  so committing takes clearer evidence;
* ``taught`` — the message's similarity to records people corrected to this event
  (``examples.py``).

The weights were set on the development sets (``bench/fit_weights.py`` reports how); keywords
are optional extras, not needed by any of the others.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..domain.schema import EntityType, EventType, MemorySchema, readable
from ..lang import Language, find_word
from ..model.embed import Embedder
from .candidates import lexical_similarity
from .evidence import Candidate, scorer

__all__ = [
    "entity_features",
    "entity_references",
    "named_features",
    "event_references",
    "EVENT_FEATURES",
    "EVENT_WEIGHTS",
    "EVENT_WEIGHTS_FILE",
    "ZERO_SHOT_WEIGHTS",
    "LM_WEIGHT_WITH_EXAMPLES",
    "EventEvidence",
    "event_similarities",
    "fill",
    "specific",
    "support",
    "weights_for",
    "without_sought_nearby",
]

EVENT_FEATURES = (
    "lm",
    "lexical",
    "semantic",
    "keyword",
    "question",
    "correction",
    "support",
    "fill",
    "entity",
    "named",
    "continues",
    "commits",
    "taught",
    "specific",
)
# Schemas that declare keywords or worked examples (the shipped customer-service and travel
# schemas): lm, lexical, semantic, support, continues, commits fitted (conditional logit,
# bench/fit_weights.py --events) on development dialogues of sgd-dev and crosswoz-dev with the
# single-network attribute scorer; keyword, question and correction (2 each) set on the shipped
# schemas' dev set; taught set with k = 5 corrected turns per schema; specific fitted alone (0.667);
# fill and entity fitted then gained nothing, so 0. Kept for these schemas: the refit below moved
# their held-out event accuracy 0.92 → 0.85 (customer service) and 0.94 → 0.90 (travel).
EVENT_WEIGHTS: dict[str, float] = {
    "lm": 0.063,
    "lexical": 4.213,
    "semantic": 4.441,
    "keyword": 2.0,
    "question": 2.0,
    "correction": 2.0,
    "support": 2.845,
    "fill": 0.0,
    "entity": 0.0,
    "named": 0.0,  # added after these were set; set for the zero-shot weights only
    "continues": 1.753,
    "commits": -0.799,
    "taught": 6.0,
    "specific": 0.667,
}
# Schemas with neither (a user's imported schema, personal_memory, a user's own schema): every
# weight but keyword, question, correction and taught is fitted by ``bench/fit_weights.py --events
# --write`` (conditional logit, teacher-forced, on the fit sets only) and shipped in
# ``event_weights.json`` with its provenance.
EVENT_WEIGHTS_FILE = Path(__file__).with_name("event_weights.json")
ZERO_SHOT_WEIGHTS: dict[str, float] = {
    **EVENT_WEIGHTS,
    **json.loads(EVENT_WEIGHTS_FILE.read_text(encoding="utf-8"))["zero_shot"],
}
# With worked examples in its prompt the model is few-shot and its likelihood carries real
# evidence: on the shipped schemas' dev set it is worth as much as each other signal (set there,
# before the rework). Zero-shot (no examples) it earned 0.063 and 0.137 above.
LM_WEIGHT_WITH_EXAMPLES = 1.0


def weights_for(schema: MemorySchema) -> dict[str, float]:
    """The event weights for ``schema``: the model's likelihood counts fully when the prompt
    shows the schema's worked examples; a schema with keywords keeps the weights its keyword
    weight was set beside; one with neither takes the weights fitted on imported schemas."""
    if schema.examples:
        return {**EVENT_WEIGHTS, "lm": LM_WEIGHT_WITH_EXAMPLES}
    if any(ev.keywords for ev in schema.event_types):
        return dict(EVENT_WEIGHTS)
    return dict(ZERO_SHOT_WEIGHTS)


def support(ev: EventType, filled: Mapping[str, Candidate]) -> float:
    """How much the filled attributes point at ``ev``: the share of them it declares, minus
    half the share it does not (0 when the event declares no attributes or nothing is filled)."""
    if not ev.attributes or not filled:
        return 0.0
    inside = sum(1 for a in filled if a in ev.attributes)
    outside = len(filled) - inside
    return (inside - 0.5 * outside) / len(filled)


def fill(schema: MemorySchema, confidences: Mapping[str, float]) -> np.ndarray:
    """Per event: the fill strength of its entity (``confidences``: entity → summed confidence
    of its filled values) minus the best entity's; 0 for events without an entity."""
    best = max(confidences.values(), default=0.0)
    return np.array([confidences.get(ev.entity, best) - best if ev.entity else 0.0 for ev in schema.event_types])


def extra_attributes(schema: MemorySchema, ev: EventType) -> frozenset[str]:
    """What ``ev`` declares beyond its narrower siblings (events about the same entity whose
    attributes are a strict subset of its own); empty when it has none."""
    own = set(ev.attributes)
    narrower = [
        set(o.attributes)
        for o in schema.event_types
        if o.name != ev.name and o.entity == ev.entity and o.attributes and set(o.attributes) < own
    ]
    return frozenset(own - set().union(*narrower)) if narrower else frozenset()


def specific(schema: MemorySchema, told: Mapping[str, frozenset[str]]) -> np.ndarray:
    """Per event: +1 if an extra attribute of it (``extra_attributes``) is told (``told``: entity
    → attribute names the message or the session fills), −1 if none is, 0 without extras."""
    out = []
    for ev in schema.event_types:
        extra = extra_attributes(schema, ev)
        out.append(0.0 if not extra else (1.0 if extra & told.get(ev.entity, frozenset()) else -1.0))
    return np.array(out)


@dataclass
class EventEvidence:
    """Per-message evidence, one array per feature, aligned with ``schema.event_types``."""

    features: dict[str, np.ndarray]

    def scores(self, weights: Mapping[str, float] = EVENT_WEIGHTS) -> np.ndarray:
        total = np.zeros(len(next(iter(self.features.values()))))
        for name, values in self.features.items():
            total = total + weights.get(name, 0.0) * values
        return total


def cue_features(schema: MemorySchema, text: str) -> tuple[np.ndarray, np.ndarray]:
    """(keyword, question) per event: an affirmed keyword; the question form for events
    marked ``question`` (+1 if the message asks, −1 if it does not)."""
    lang = schema.language
    low = text.lower()
    asks = 1.0 if lang.is_question(text) else -1.0
    scope = scorer().negation_scope
    keyword = np.array(
        [
            float(any(find_word(low, k) >= 0 and lang.affirmed(low, k, scope) for k in ev.keywords))
            for ev in schema.event_types
        ]
    )
    question = np.array([asks if ev.question else 0.0 for ev in schema.event_types])
    return keyword, question


def event_references(schema: MemorySchema, ev: EventType) -> list[str]:
    """What a message reporting ``ev`` may resemble: its description, its readable name ("find
    restaurants") and its examples."""
    return [r for r in dict.fromkeys([ev.label, readable(ev.name), *ev.examples]) if r]


_VectorCache = dict[tuple[str, str], list[np.ndarray]]  # (encoder, schema id) → one matrix per item
_REFERENCE_VECTORS: _VectorCache = {}  # per event type
_ENTITY_VECTORS: _VectorCache = {}  # per entity type


def _encoded(
    cache: _VectorCache, embedder: Embedder, schema: MemorySchema, references: Callable[[], list[list[str]]]
) -> list[np.ndarray]:
    """The ``references`` (texts per item) encoded, once per encoder and schema."""
    key = (embedder.name, schema.schema_id)
    if key not in cache:
        if len(cache) > 256:  # schemas come and go in a long-lived process
            cache.clear()
        cache[key] = [embedder.encode(texts) for texts in references()]
    return cache[key]


def event_similarities(schema: MemorySchema, embedder: Embedder, text: str) -> np.ndarray:
    """Per event type: the best cosine between ``text`` and the event's references. Their
    vectors are encoded once per encoder and schema, for extraction and routing alike."""
    vectors = _encoded(
        _REFERENCE_VECTORS, embedder, schema, lambda: [event_references(schema, ev) for ev in schema.event_types]
    )
    vec = embedder.encode([text])[0]
    return np.array([float(np.max(refs @ vec)) for refs in vectors])


def entity_references(schema: MemorySchema, ev: EventType) -> list[str]:
    """The entity ``ev`` is about, when the schema has several: its name, description and
    aliases ("叫一辆出租车" is about the 出租车 even if the event says "打车"). A separate
    feature from the event's own references, so that naming an order in a complaint does not
    count as much as saying what happened to it."""
    ent = schema.entity(ev.entity) if ev.entity and len(schema.entities) > 1 else None
    return _entity_texts(ent) if ent is not None else []


def _entity_texts(ent: EntityType) -> list[str]:
    """An entity type's readable name, description and aliases."""
    return [r for r in dict.fromkeys([readable(ent.name), ent.description, *ent.aliases]) if r]


def named_features(schema: MemorySchema, embedder: Embedder, name: str) -> np.ndarray:
    """Per event: the best cosine between ``name`` (a name value the message fills) and the
    references of the event's entity, minus the best entity's (0 for events without one)."""
    ents = list(schema.entities)
    if not name or len(ents) < 2:
        return np.zeros(len(schema.event_types))
    vectors = _encoded(_ENTITY_VECTORS, embedder, schema, lambda: [_entity_texts(e) for e in ents])
    vec = embedder.encode([name])[0]
    like = {e.name: float(np.max(v @ vec)) for e, v in zip(ents, vectors)}
    best = max(like.values())
    return np.array([like[ev.entity] - best if ev.entity in like else 0.0 for ev in schema.event_types])


def entity_features(schema: MemorySchema, text: str) -> np.ndarray:
    return np.array(
        [
            lexical_similarity(text, refs) if (refs := entity_references(schema, ev)) else 0.0
            for ev in schema.event_types
        ]
    )


def lexical_features(schema: MemorySchema, text: str) -> np.ndarray:
    return np.array([lexical_similarity(text, event_references(schema, ev)) for ev in schema.event_types])


def without_sought_nearby(lang: Language, text: str, values: Sequence[tuple[int, int]]) -> str:
    """``text`` without the clauses that only list what is sought near something: in
    "故宫周边有什么餐馆？" the restaurants are what is asked for around the palace the message
    names, so "餐馆" is no evidence that the message tells of a restaurant. A clause whose
    sentence holds one of the ``values`` (start, end) after the word of nearness tells of what it
    seeks ("在这些周边的餐馆里，有人均50-100元的吗？") and stays (CrossWOZ-dev, all turns: the
    type sought is the one the turn is labelled with in 37 of 40 such sentences); so does one
    asking for *other* things of a kind ("周边还有其他餐馆吗？" says the place named is a
    restaurant too: labelled with the type it names in 47 of 49 such clauses)."""

    def told_after(a: int, b: int) -> bool:
        clause = text[a:b].lower()
        if any(find_word(clause, w) >= 0 for w in lang.lex.other_words):
            return True
        finish = lang.sentence_bounds(text, a, b)[1]
        return any(end > a and start < finish for start, end in values)

    cut = [(a, b) for a, b in lang.nearby_clauses(text) if not told_after(a, b)]
    for a, b in reversed(cut):
        text = text[:a] + " " + text[b:]
    return text
