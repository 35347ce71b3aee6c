"""Compaction: many fine-grained memories about one entity → one summary record.

A summary has two parts. The *facts* are written deterministically from what the store
already holds: the entity's current state and attributes, how many memories of each event
type, and the time span. The *sentence* is model-written under a grammar
(``{"summary":"…"}``), then validated with pydantic, and kept only if every number or
code in it occurs in the originals — a 135M model readily invents figures, and a summary
must not be less true than what it replaces. Otherwise the summary is the facts alone and
its note says why. The originals stay, linked to the summary (``memory_links``); deleting
them is the forgetting policies' business, never compaction's.
"""

from __future__ import annotations

import json
import re
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..domain.records import SUMMARY_EVENT, Entity, MemoryRecord
from ..domain.schema import MemorySchema
from ..model.decode import constrained_greedy
from ..model.engine import Engine
from ..model.grammar import GrammarCache
from ..model.prompt import PROMPTS

__all__ = ["Compactor", "SummaryDraft", "SUMMARY_REGEX", "facts_line", "grounded_sentence"]

# No length bound in the regex (it would grow the Index per character): max_tokens bounds it.
SUMMARY_REGEX = r'\{"summary":"[^"\\\x00-\x1f.;!?。；！？]{8,}[.!?。！？]"\}'  # one sentence: no stop inside
SUMMARY_MAX_TOKENS = 80
MAX_SOURCES_IN_PROMPT = 12
_FIGURE = re.compile(r"\d[\d.,:-]*\d|\d")


class SummaryDraft(BaseModel):
    model_config = ConfigDict(extra="forbid")

    summary: str = Field(min_length=8, max_length=600)


def facts_line(entity: Entity | None, etype: str, eid: str, originals: Sequence[MemoryRecord]) -> str:
    """What the store knows, stated plainly (no model involved)."""
    counts = Counter(m.event_type or "unparsed" for m in originals)
    when = sorted(m.timestamp for m in originals)
    span = f"{when[0]:%Y-%m-%d} – {when[-1]:%Y-%m-%d}" if when else ""
    head = f"{etype} {eid}"
    if entity is not None:
        if entity.state:
            head += f" [{entity.state}]"
        attrs = ", ".join(f"{k}={v}" for k, v in entity.attributes.items() if v is not None)
        head += f" {attrs}" if attrs else ""
    events = ", ".join(f"{k}×{n}" for k, n in counts.most_common())
    return f"{head}. {len(originals)} memories {span}: {events}."


def grounded_sentence(sentence: str, originals: Sequence[MemoryRecord]) -> list[str]:
    """Figures in ``sentence`` that no original contains (empty: the sentence is grounded)."""
    corpus = " ".join(m.source_text for m in originals) + " " + json.dumps([m.attributes for m in originals])
    return [f for f in _FIGURE.findall(sentence) if f not in corpus]


@dataclass
class CompactionResult:
    summary: MemoryRecord
    originals: list[str]


class Compactor:
    def __init__(self, schema: MemorySchema, engine: Engine | None, grammars: GrammarCache) -> None:
        self.schema = schema
        self.engine = engine
        self.grammars = grammars

    def summarise(
        self, session: str, entity: Entity | None, etype: str, eid: str, originals: Sequence[MemoryRecord]
    ) -> CompactionResult:
        facts = facts_line(entity, etype, eid, originals)
        sentence, raw, note = self._sentence(etype, eid, originals)
        text = facts if not sentence else f"{facts}\n{sentence}"
        record = MemoryRecord(
            memory_id=uuid.uuid4().hex,
            session_id=session,
            timestamp=max(m.timestamp for m in originals) if originals else datetime.now(UTC),
            schema_id=self.schema.schema_id,
            status="ok",
            confidence=1.0 if not sentence else 0.9,
            source_text=text,
            event_type=SUMMARY_EVENT,
            entity_type=etype,
            entity_id=eid,
            raw_output=raw,
            note=f"summary of {len(originals)} memories" + (f"; {note}" if note else ""),
        )
        return CompactionResult(summary=record, originals=[m.memory_id for m in originals])

    def _sentence(self, etype: str, eid: str, originals: Sequence[MemoryRecord]) -> tuple[str, str, str]:
        """(sentence or "", raw model output, note)."""
        e = self.engine
        if e is None:
            return "", "", "no model: facts only"
        shown = list(originals)[-MAX_SOURCES_IN_PROMPT:]
        lines = "\n".join(f"- {m.source_text[:200]}" for m in shown)
        fmt = e.chat_format()
        prompt = fmt.wrap(
            PROMPTS["summary_system"],
            PROMPTS["summary_example"].format() + PROMPTS["summary_notes"].format(entity=f"{etype} {eid}", lines=lines),
        )
        index = self.grammars.regex_index("summary", SUMMARY_REGEX, e.vocabulary(), e.tokenizer_id)
        e.start(e.bos() + e.tokenize(prompt))
        res = constrained_greedy(e, index, SUMMARY_MAX_TOKENS)
        raw = res.text
        if not res.finished:
            return "", raw[:2000], "model summary cut at the token limit: facts only"
        try:
            sentence = SummaryDraft.model_validate_json(raw).summary.strip()
        except ValidationError as exc:
            return "", raw[:2000], f"model summary invalid ({exc.errors()[0]['msg']}): facts only"
        invented = grounded_sentence(sentence, originals)
        if invented:
            return "", raw, f"model summary dropped: {', '.join(invented[:3])} not in the originals"
        return sentence, raw, ""
