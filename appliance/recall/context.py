"""The context block an agent reads: the answer first, then the evidence, then neighbours.

* a question whose key (a name, a code) or asked attribute nothing stored holds opens with
  "Not found: …" — and then everything below is labelled a neighbour, never an answer;
* **Answer**: the entities the question names or its structured query reached — type, id,
  state, values — each with its latest memories;
* **Evidence**: the fused ranking, best first, each memory once with its date and the paths
  that found it; the dates a memory states relative to when it was said are resolved beside it
  ("I ran 8 km yesterday" said on 2026-03-07: "yesterday = 2026-03-06"), so an agent asked
  "when" need not count days itself;
* **Related**: memories only the semantic side found, labelled as related.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..domain.records import Entity, MemoryRecord, RankedMemory, RecallHit
from ..lang import Language
from ..lang.dates import find_dates

__all__ = ["summarise", "compose", "NOT_FOUND", "WEAK_PATH"]

NOT_FOUND = "Not found:"
WEAK_PATH = "semantic (weak)"  # a neighbour below the fusion threshold, listed after the rest
MAX_TEXT = 160


def _entity_line(e: Entity) -> str:
    attrs = ", ".join(f"{k}={v}" for k, v in e.attributes.items() if v is not None)
    return f"- {e.type} {e.id}" + (f" [{e.state}]" if e.state else "") + (f": {attrs}" if attrs else "")


def _memory_line(m: MemoryRecord, lang: Language | None = None) -> str:
    line = f'{m.timestamp:%Y-%m-%d %H:%M} {m.event_type or "unparsed"}: "{m.source_text[:MAX_TEXT]}"'
    return line + _stated_days(m, lang) if lang is not None else line


def _stated_days(m: MemoryRecord, lang: Language) -> str:
    """The days the memory's own words name, read against when it was said."""
    said = [
        f"{d.surface} = {d.first.isoformat()}" + (f"…{d.last.isoformat()}" if d.last and d.last != d.first else "")
        for d in find_dates(lang, m.source_text[:MAX_TEXT], m.timestamp)
        if d.first is not None
    ]
    return f" ({'; '.join(said)})" if said else ""


def summarise(hits: Sequence[RecallHit], extra: Sequence[MemoryRecord] = ()) -> str:
    """The context of a structured query (no fusion): entities with their latest memories."""
    if not hits and not extra:
        return "No matching memories."
    lines = []
    for h in hits:
        lines.append(_entity_line(h.entity))
        lines += [f"    {_memory_line(m)}" for m in h.memories]
    lines += [f"- memory {m.memory_id[:8]} {_memory_line(m)}" for m in extra]
    return "\n".join(lines)


def compose(
    answer: Sequence[RecallHit], ranked: Sequence[RankedMemory], not_found: str = "", lang: Language | None = None
) -> str:
    """The context of a recall: not-found statement, answer, evidence, related memories (with
    the days each states, read in ``lang``)."""
    lines: list[str] = []
    if not_found:
        lines.append(f"{NOT_FOUND} {not_found}")
    if answer and not not_found:
        lines.append("Answer:")
        for h in answer:
            lines.append(_entity_line(h.entity))
            lines += [f"    {_memory_line(m, lang)}" for m in h.memories]
    neighbours_only = {"semantic", WEAK_PATH}
    evidence = [r for r in ranked if not set(r.paths) <= neighbours_only]
    related = [r for r in ranked if set(r.paths) <= neighbours_only]
    if not_found:
        if ranked:
            lines.append("Neighbours (related memories, not an answer):")
            lines += [f"- {_memory_line(r.memory, lang)}" for r in ranked]
    else:
        if evidence:
            lines.append("Evidence (best first):")
            lines += [f"{i}. {_memory_line(r.memory, lang)} [{', '.join(r.paths)}]" for i, r in enumerate(evidence, 1)]
        if related:
            lines.append("Related (semantic neighbours):")
            lines += [f"- {_memory_line(r.memory, lang)}" for r in related]
    return "\n".join(lines) if lines else "No matching memories."
