"""The context block an agent reads: structured hits first, then other matches, then neighbours."""

from __future__ import annotations

from collections.abc import Sequence

from ..domain.records import MemoryRecord, RecallHit, SemanticHit

__all__ = ["summarise"]


def summarise(
    hits: Sequence[RecallHit], extra: Sequence[MemoryRecord] = (), semantic: Sequence[SemanticHit] = ()
) -> str:
    """A compact, structured context block for an agent's prompt."""
    if not hits and not extra and not semantic:
        return "No matching memories."
    lines = []
    for h in hits:
        e = h.entity
        attrs = ", ".join(f"{k}={v}" for k, v in e.attributes.items() if v is not None)
        lines.append(f"- {e.type} {e.id}" + (f" [{e.state}]" if e.state else "") + (f": {attrs}" if attrs else ""))
        for m in h.memories:
            lines.append(f'    {m.timestamp:%Y-%m-%d %H:%M} {m.event_type or "unparsed"}: "{m.source_text[:160]}"')
    for m in extra:
        lines.append(f'- memory {m.memory_id[:8]} {m.timestamp:%Y-%m-%d}: "{m.source_text[:160]}"')
    if semantic:
        lines.append("Related (semantic):")
        for s in semantic:
            when = f"{s.memory.timestamp:%Y-%m-%d}"
            lines.append(
                f'- [{s.score:.2f}] {when} {s.memory.event_type or "unparsed"}: "{s.memory.source_text[:160]}"'
            )
    return "\n".join(lines)
