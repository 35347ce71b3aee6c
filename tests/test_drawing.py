from __future__ import annotations

from datetime import UTC, datetime, timedelta

from appliance.domain.records import Entity, Relationship
from appliance.edges.ui.drawing import SEP, graph_svg, timeline_svg

from .conftest import make_record


def test_graph_draws_every_entity_and_edge_and_escapes_names() -> None:
    ents = [Entity(type="Person", id="<script>alert(1)</script>"), Entity(type="Order", id="4567")]
    rels = [
        Relationship(type="placed", source_type="Person", source_id=ents[0].id, target_type="Order", target_id="4567")
    ]
    svg = graph_svg(ents, rels)
    assert svg.count('class="entity-node"') == 2 and svg.count("<line") == 1
    assert "<script>" not in svg and "&lt;script&gt;" in svg
    assert f'data-entity="Order{SEP}4567"' in svg


def test_graph_of_many_entities_stays_inside_the_picture() -> None:
    ents = [Entity(type=f"T{i % 3}", id=str(i)) for i in range(45)]
    svg = graph_svg(ents, [])
    assert svg.count('class="entity-node"') == 45
    import re

    xs = [float(x) for x in re.findall(r'<circle cx="([\d.]+)"', svg)]
    assert min(xs) >= 0 and max(xs) <= 760


def test_timeline_orders_records_by_message_time() -> None:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    recs = [make_record(source_text=f"m{i}", timestamp=t0 + timedelta(days=3 - i)) for i in range(3)]
    svg = timeline_svg(recs)
    assert svg.index("m2") < svg.index("m1") < svg.index("m0")
    assert graph_svg([], []).startswith("<p") and timeline_svg([]).startswith("<p")
