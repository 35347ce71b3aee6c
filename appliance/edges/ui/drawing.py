"""Pictures for the panel, drawn as inline SVG (no script, font or file from anywhere): a session's
entity graph (entities as nodes, relationships as labelled edges; each node carries
``data-entity`` so a click can open its memories) and a timeline of the session's records.
Every text is escaped: names come from what users said."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime
from html import escape

from ...domain.records import Entity, MemoryRecord, Relationship

__all__ = ["entity_key", "graph_svg", "timeline_svg"]

PALETTE = ("#2563eb", "#16a34a", "#d97706", "#9333ea", "#dc2626", "#0891b2", "#4d7c0f", "#be185d")
SEP = "\u241f"  # joins type and id in data-entity (cannot occur in a cleaned id)


def entity_key(etype: str, eid: str) -> str:
    return f"{etype}{SEP}{eid}"


def _colour(kinds: list[str], kind: str) -> str:
    return PALETTE[kinds.index(kind) % len(PALETTE)] if kind in kinds else "#6b7280"


def _short(text: str, n: int = 22) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def graph_svg(entities: Sequence[Entity], relationships: Sequence[Relationship], width: int = 760) -> str:
    """Nodes on a circle (few) or concentric rings (many), edges as lines with their type."""
    nodes = [(e.type, e.id) for e in entities]
    for r in relationships:  # an edge may reach an entity the listing left out
        for key in ((r.source_type, r.source_id), (r.target_type, r.target_id)):
            if key not in nodes:
                nodes.append(key)
    if not nodes:
        return '<p id="graph-empty">No entities in this session yet.</p>'
    nodes = nodes[:60]
    kinds = sorted({t for t, _ in nodes})
    height = 520 if len(nodes) > 8 else 380
    cx, cy = width / 2, height / 2
    # rings of 8, 18, 28… nodes from the inside out; one node sits in the middle
    sizes: list[int] = []
    while sum(sizes) < len(nodes):
        sizes.append(min(8 + 10 * len(sizes), len(nodes) - sum(sizes)))
    outer = min(cx, cy) - 50
    pos: dict[tuple[str, str], tuple[float, float]] = {}
    placed = 0
    for ring, size in enumerate(sizes):
        radius = 0.0 if len(nodes) == 1 else outer * (ring + 1) / len(sizes)
        for i, key in enumerate(nodes[placed : placed + size]):
            angle = 2 * math.pi * i / size + ring * 0.4
            pos[key] = (cx + radius * math.cos(angle), cy + radius * math.sin(angle))
        placed += size
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="100%" '
        f'role="img" aria-label="entity graph" style="font: 12px ui-sans-serif, system-ui, sans-serif">'
    ]
    for r in relationships:
        a, b = pos.get((r.source_type, r.source_id)), pos.get((r.target_type, r.target_id))
        if a is None or b is None:
            continue
        parts.append(
            f'<line x1="{a[0]:.0f}" y1="{a[1]:.0f}" x2="{b[0]:.0f}" y2="{b[1]:.0f}" stroke="#9ca3af" '
            'stroke-width="1.5"/>'
            f'<text x="{(a[0] + b[0]) / 2:.0f}" y="{(a[1] + b[1]) / 2 - 4:.0f}" fill="#6b7280" '
            f'text-anchor="middle" class="edge-label">{escape(_short(r.type, 18))}</text>'
        )
    for (etype, eid), (x, y) in pos.items():
        colour = _colour(kinds, etype)
        data_key = escape(entity_key(etype, eid), quote=True)
        parts.append(
            f'<g class="entity-node" data-entity="{data_key}" style="cursor:pointer">'
            f"<title>{escape(etype)} {escape(eid)} — click for its memories</title>"
            f'<circle cx="{x:.0f}" cy="{y:.0f}" r="20" fill="{colour}" fill-opacity="0.15" stroke="{colour}" '
            'stroke-width="2"/>'
            f'<text x="{x:.0f}" y="{y + 4:.0f}" text-anchor="middle" fill="{colour}">{escape(_short(etype, 10))}</text>'
            f'<text x="{x:.0f}" y="{y + 36:.0f}" text-anchor="middle" fill="#111827">{escape(_short(eid))}</text>'
            "</g>"
        )
    legend_x = 10
    for kind in kinds:
        parts.append(f'<text x="{legend_x}" y="16" fill="{_colour(kinds, kind)}">● {escape(_short(kind, 16))}</text>')
        legend_x += 14 + 8 * min(len(kind), 16)
    parts.append("</svg>")
    return "".join(parts)


def timeline_svg(records: Sequence[MemoryRecord], width: int = 760) -> str:
    """One row per record, oldest first, placed by message time on a shared axis."""
    recs = sorted(records, key=lambda r: r.timestamp)[-80:]
    if not recs:
        return '<p id="timeline-empty">No records in this session yet.</p>'
    kinds = sorted({r.event_type or "unparsed" for r in recs})
    start, end = recs[0].timestamp, recs[-1].timestamp
    span = max((end - start).total_seconds(), 1.0)
    left, right, row = 120, width - 20, 22
    height = 40 + row * len(recs)

    def x_of(t: datetime) -> float:
        return left + (right - left) * (t - start).total_seconds() / span

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="100%" role="img" '
        f'aria-label="timeline" style="font: 12px ui-sans-serif, system-ui, sans-serif">',
        f'<line x1="{left}" y1="24" x2="{right}" y2="24" stroke="#d1d5db"/>',
        f'<text x="{left}" y="16" fill="#6b7280">{escape(start.strftime("%Y-%m-%d %H:%M"))}</text>',
        f'<text x="{right}" y="16" fill="#6b7280" text-anchor="end">{escape(end.strftime("%Y-%m-%d %H:%M"))}</text>',
    ]
    for i, r in enumerate(recs):
        y = 40 + row * i
        kind = r.event_type or "unparsed"
        colour = _colour(kinds, kind)
        x = x_of(r.timestamp)
        parts.append(
            f'<g class="timeline-record"><title>{escape(r.timestamp.isoformat())}: {escape(r.source_text[:200])}</title>'
            f'<text x="4" y="{y + 4}" fill="{colour}">{escape(_short(kind, 16))}</text>'
            f'<line x1="{left}" y1="{y}" x2="{right}" y2="{y}" stroke="#f3f4f6"/>'
            f'<circle cx="{x:.0f}" cy="{y}" r="5" fill="{colour}"/>'
            f'<text x="{min(x + 9, right - 200):.0f}" y="{y + 4}" fill="#111827">{escape(_short(r.summary(), 48))}</text>'
            "</g>"
        )
    parts.append("</svg>")
    return "".join(parts)
