"""Learning from corrections: records a person corrected or marked reviewed teach extraction.

Every record with status ``reviewed`` under a schema is an example of that schema: its text,
its event, and for each value the text it was read from. A new message then borrows from its
nearest examples:

* ``event_similarity`` — per event type, how far the message's best similarity to the examples
  of that event rises above a floor (an event feature, ``taught``): near paraphrases teach, the
  likeness every message of a service shares does not;
* ``attribute_evidence`` — per candidate span, how like the examples' value contexts for that
  attribute its own context is ("I need *3 tickets*" after a corrected "*2 tickets* please"),
  and whether its value is one a person already gave for that attribute;
* ``cue_share`` — per candidate span, the share of the examples' values after the same word
  ("from", "to", "从") that filled the attribute.

Nothing is trained: the examples are read from the store when they change, and their vectors
come from the sentence encoder the product ships. Offline and per database, like everything else.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..domain.records import MemoryRecord
from ..domain.schema import MemorySchema
from ..lang import has_cjk
from ..model.embed import Embedder
from .spans import taught_cue

__all__ = ["ExampleBank", "MAX_EXAMPLES"]

MAX_EXAMPLES = 500  # the newest reviewed records of a schema that teach it
# An example teaches an event only to messages nearer to it than this (USE v3 cosine): every
# message of a service is somewhat like every other (sgd-dev, a turn's best similarity to five
# corrected turns of another intent: median 0.25, 90th percentile 0.45; of its own intent 0.45),
# so the raw similarity pulled every turn towards whichever events happened to be corrected —
# five corrected rentals took Media_2's search turns from 0.93 to 0.72 intent on all turns.
TAUGHT_FLOOR = 0.45
# The word before a value, learned per attribute from the examples: corrected turns show that
# this schema's "from X" is an origin *city* and "to the savings account" the recipient's account,
# which the descriptions alone leave open (sgd-dev, 5 corrected turns per service, slot F1 over
# all turns 0.841 → 0.856; seeds 3 and 11 alike; CrossWOZ unchanged). One value is no rule:
# three unseen values join each cue's count, so with the weight in ``evidence.TAUGHT_CUE`` one
# example adds 1.5 and three that agree add 3 — "Lock in *Kokkari*" alone must not make "a Thai
# place *in Oakland*" a restaurant's name (zero-shot margin 1.8), three corrected "from X" cities
# must overturn "from Phoenix" as a station (margin 2.4). Prior 1 with weight 4 measured 0.858.
CUE_PRIOR = 3.0


def _context(text: str, surface: str, pos: int, width: int = 3) -> str:
    """The surface (found at ``pos``, -1 when not found) with a few words before it, as a
    candidate span's context is built."""
    if pos < 0:
        return surface
    before = text[max(0, pos - 40) : pos]
    if has_cjk(surface + before[-1:]):
        return before[-6:] + text[pos : pos + len(surface)]
    words = before.split()[-width:]
    return " ".join([*words, text[pos : pos + len(surface)]])


@dataclass
class ExampleBank:
    """The reviewed records of one schema, with their vectors."""

    schema: MemorySchema
    events: list[str] = field(default_factory=list)
    vectors: np.ndarray | None = None
    contexts: dict[str, list[tuple[np.ndarray, str]]] = field(default_factory=dict)  # attr → (ctx vector, value)
    cues: dict[str, Counter[str]] = field(default_factory=dict)  # cue word → attributes of the values after it

    @classmethod
    def build(cls, schema: MemorySchema, records: Sequence[MemoryRecord], embedder: Embedder | None) -> ExampleBank:
        bank = cls(schema)
        usable = [r for r in records if r.event_type in schema.event_names][:MAX_EXAMPLES]
        pending: list[tuple[str, str, str]] = []
        for r in usable:
            for name, value in r.attributes.items():
                if value is None:
                    continue
                surface = r.spans.get(name) or str(value)
                pos = r.source_text.lower().find(surface.lower())
                if pos >= 0 and (cue := taught_cue(schema.language, r.source_text, pos)):
                    bank.cues.setdefault(cue, Counter())[name] += 1
                pending.append((name, _context(r.source_text, surface, pos), _norm(value)))
        if embedder is None or not usable:
            return bank  # the cues need no encoder
        bank.events = [r.event_type or "" for r in usable]
        bank.vectors = embedder.encode([r.source_text for r in usable])
        if pending:
            vecs = embedder.encode([ctx for _, ctx, _ in pending])
            for (name, _, value), vec in zip(pending, vecs):
                bank.contexts.setdefault(name, []).append((vec, value))
        return bank

    def __len__(self) -> int:
        return len(self.events)

    def event_similarity(self, text_vec: np.ndarray) -> np.ndarray:
        """Per event type: how far the message's best similarity to its examples rises above
        TAUGHT_FLOOR, on [0, 1] (0: no example that near, or none)."""
        out = np.zeros(len(self.schema.event_types))
        if self.vectors is None or not len(self.events):
            return out
        sims = self.vectors @ text_vec
        index = {n: i for i, n in enumerate(self.schema.event_names)}
        for ev, sim in zip(self.events, sims):
            i = index[ev]
            out[i] = max(out[i], (float(sim) - TAUGHT_FLOOR) / (1.0 - TAUGHT_FLOOR))
        return out

    def attribute_evidence(self, attribute: str, ctx_vec: Any, value: Any) -> tuple[float, float]:
        """(best context similarity, 1 if a person gave this value for this attribute)."""
        known = self.contexts.get(attribute)
        if not known:
            return 0.0, 0.0
        sim = max(float(np.dot(vec, ctx_vec)) for vec, _ in known) if ctx_vec is not None else 0.0
        same = float(any(v == _norm(value) for _, v in known))
        return sim, same

    def cue_share(self, attribute: str, cue: str) -> float:
        """Of the example values that stood after ``cue``, the share that filled ``attribute``
        (``CUE_PRIOR`` unseen values added to the count: a cue seen once is no rule)."""
        seen = self.cues.get(cue)
        if not seen:
            return 0.0
        return seen[attribute] / (sum(seen.values()) + CUE_PRIOR)


def _norm(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value).strip().lower()
