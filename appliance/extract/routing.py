"""Choosing the schema an utterance belongs to when several are loaded.

A constrained choice among the loaded domain names, like every enum the appliance fills:
the model scores each complete name after a prompt listing the domains, calibrated by
its score on an empty message (a small model prefers some names regardless of input),
plus lexical evidence — the schema's own words (entity keywords and aliases, event cues,
event examples) found in the message — plus, with the sentence encoder, the message's
likeness to the schema's event descriptions, and the session's previous record: a user
renting a car who says "Until the 14th." is still renting the car. The caller can always
name the schema instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..domain.schema import MemorySchema
from ..lang import find_word
from ..model.embed import Embedder
from ..model.engine import Engine
from ..model.prompt import PROMPTS, open_turn
from ..model.scoring import PriorCache, best_of
from .candidates import lexical_similarity
from .events import event_similarities

__all__ = ["SchemaChoice", "choose_schema", "schema_evidence"]

LEXICAL_WEIGHT = 6.0  # the same weight extraction gives lexical evidence for event types
KEYWORD_WEIGHT = 2.0  # per schema keyword found in the message (capped)
# Fitted on half of sgd-dev's multi-service dialogues (a grid, bench/routing.py --fit; two or
# three imported services loaded, every user turn in order): turns routed to their labelled
# service 0.70 → 0.97 on the other half, the encoder alone 0.82, the session alone 0.68 —
# "Until the 14th." and "Just the 1." name no schema, and were routed by the model's whim.
SEMANTIC_WEIGHT = 25.0  # per unit of cosine to the schema's nearest event description (USE v3)
CONTINUES_WEIGHT = 4.0  # the schema of the session's previous record in the same conversation
# A categorical value of the schema named in the message ("premium economy", "checking"): fitted
# after the two above on the same half (grid 0–6): 0.971 → 0.978, held-out half 0.969 → 0.977.
VALUE_WEIGHT = 6.0
_PRIORS = PriorCache()  # model score on an empty message, per engine and domain list


@dataclass(frozen=True)
class SchemaChoice:
    domain: str
    probability: float
    scores: dict[str, float]


def _hits(schema: MemorySchema, low: str) -> int:
    words = {k for ks in schema.entity_keywords.values() for k in ks}
    words |= {c for ev in schema.event_types for c in ev.cues}
    n = 0
    for w in words:
        if len(w) < 2:
            continue
        n += find_word(low, w) >= 0
    return min(n, 3)


def names_a_value(schema: MemorySchema, low: str) -> bool:
    """Whether the (lower-cased) message names one of the schema's categorical values or their
    aliases as a word: "premium economy" is a flight class of a flights schema. Values of one or
    two letters ("no", "2") say nothing of the schema."""
    for ent in schema.entities:
        for a in ent.attributes:
            for v in a.values:
                for word in (v.value, *v.aliases):
                    if len(word) > 2 and find_word(low, word.lower()) >= 0:
                        return True
    return False


def schema_evidence(schema: MemorySchema, text: str) -> float:
    """Lexical fit of ``text`` to ``schema`` (its examples, its keywords, its categorical values)."""
    refs = [x for ev in schema.event_types for x in (ev.description, *ev.examples)] + [x.text for x in schema.examples]
    low = text.lower()
    return (
        LEXICAL_WEIGHT * lexical_similarity(text, refs)
        + KEYWORD_WEIGHT * _hits(schema, low)
        + VALUE_WEIGHT * names_a_value(schema, low)
    )


def _prompt(schemas: Sequence[MemorySchema], engine: Engine, text: str) -> list[int]:
    listing = "\n".join(f"- {s.domain}: {s.description or ', '.join(s.entity_names)}" for s in schemas)
    parts = open_turn(
        engine,
        PROMPTS["route_system"],
        f"{PROMPTS['domains']}\n{listing}\n\n{PROMPTS['message']}",
        PROMPTS["domain"],
    )
    return parts.tokens(engine, text, limit=256)[0]


def semantic_fit(schemas: Sequence[MemorySchema], embedder: Embedder, text: str) -> np.ndarray:
    """Per schema: the best cosine between ``text`` and its event types' descriptions, readable
    names and examples (the references event choice compares a message with)."""
    return np.array([float(np.max(event_similarities(s, embedder, text))) for s in schemas])


def choose_schema(
    schemas: Sequence[MemorySchema],
    engine: Engine | None,
    text: str,
    previous: str | None = None,
    embedder: Embedder | None = None,
) -> SchemaChoice:
    """The loaded schema that fits ``text`` best, with the probability of the choice;
    ``previous`` is the domain of the session's previous record, if any."""
    if len(schemas) == 1:
        return SchemaChoice(schemas[0].domain, 1.0, {schemas[0].domain: 0.0})
    names = [s.domain for s in schemas]
    scores = np.array([schema_evidence(s, text) for s in schemas], dtype=float)
    if embedder is not None:
        try:
            scores = scores + SEMANTIC_WEIGHT * semantic_fit(schemas, embedder, text)
        except Exception:  # noqa: BLE001 - an optional signal; the others still choose
            pass
    if previous in names:
        scores[names.index(previous)] += CONTINUES_WEIGHT
    if engine is not None:
        options = [engine.tokenize(n) for n in names]
        engine.start(_prompt(schemas, engine, text))
        model = np.array(engine.score(options))

        def content_free() -> list[float]:
            engine.start(_prompt(schemas, engine, ""))
            return engine.score(options)

        scores = scores + (model - _PRIORS.get((id(engine), tuple(names)), content_free))
    chosen = best_of(scores)
    return SchemaChoice(names[chosen.index], chosen.probability, {n: round(float(v), 3) for n, v in zip(names, scores)})
