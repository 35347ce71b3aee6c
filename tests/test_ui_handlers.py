from __future__ import annotations

import json

from appliance.api import Appliance
from appliance.edges.ui.panel import build_ui, chat_turn, is_question, records_table, validate_schema_text
from appliance.testing import FakeEngine

from .conftest import SCHEMAS


def test_question_routing(fake_app: Appliance) -> None:
    assert is_question(fake_app, "where is my order?")
    assert is_question(fake_app, "我的订单怎么样了")
    assert is_question(fake_app, "show my orders")  # a lookup is recalled too
    assert not is_question(fake_app, "I bought a phone, order 4567")


def test_schema_text_validation_messages() -> None:
    assert validate_schema_text((SCHEMAS / "customer_service.json").read_text()).startswith("✓")
    assert "line 1" in validate_schema_text("{oops")
    bad = json.loads((SCHEMAS / "customer_service.json").read_text())
    bad["relationships"].append({"from": "User", "type": "X", "to": "Ghost"})
    assert "relationships[2].to" in validate_schema_text(json.dumps(bad))


def test_chat_turn_records_then_table_shows_it(settings) -> None:  # type: ignore[no-untyped-def]
    app = Appliance(db=settings.home / "m.duckdb", model=FakeEngine(), settings=settings)
    history, details, status = chat_turn(app, "order 4567 is late", [], "s", "auto")
    assert history[-1]["role"] == "assistant" and "record" in json.loads(details)
    rows = records_table(app, search="4567")
    assert rows and rows[0][-1] == "order 4567 is late"
    history, details, _ = chat_turn(app, "where is order 4567?", history, "s", "auto")
    assert "sql" in json.loads(details)
    build_ui(app)  # wiring builds without a browser or network


def test_stream_shows_partial_record_then_final(settings) -> None:  # type: ignore[no-untyped-def]
    from appliance.edges.ui.panel import chat_stream

    app = Appliance(db=settings.home / "m.duckdb", model=FakeEngine(), settings=settings)
    steps = list(chat_stream(app, "order 4567 is late", [], "s", "record"))
    assert len(steps) >= 3  # several partial states before the final answer
    partials = [d for _, d, st in steps if st.startswith("…")]
    assert partials and partials[0].startswith('{"event_type":')
    assert json.loads(steps[-1][1])["record"]["source_text"] == "order 4567 is late"


def test_graph_diff_and_suggestions(settings) -> None:  # type: ignore[no-untyped-def]
    from appliance.domain.records import MemoryRecord, Relationship
    from appliance.edges.ui.panel import graph_text, schema_diff, suggestions_table

    app = Appliance(db=settings.home / "m.duckdb", model=FakeEngine(), settings=settings)
    app.store.add_record(
        MemoryRecord(
            memory_id="m1",
            session_id="s",
            timestamp="2026-12-02T00:00:00Z",
            schema_id="x",
            status="ok",
            confidence=1.0,
            source_text="t",
            event_type="user_inquiry",
            entity_type="Order",
            entity_id="4567",
            attributes={"colour": "red"},
            relationships=[
                Relationship(type="OWNS", source_type="User", source_id="u1", target_type="Order", target_id="4567"),
                Relationship(
                    type="HAS_TICKET",
                    source_type="Order",
                    source_id="4567",
                    target_type="ServiceTicket",
                    target_id="T1",
                ),
            ],
        )
    )
    g = graph_text(app, "s", "User u1")
    assert "─OWNS→ Order 4567" in g and "─HAS_TICKET→ ServiceTicket T1" in g
    assert suggestions_table(app) == [["Order", "colour", 1, "red"]]
    edited = json.loads(json.dumps(app.schema.to_json_dict()))
    edited["event_types"].append({"name": "refund_requested"})
    assert "refund_requested" in schema_diff(app, json.dumps(edited))
    assert "No changes" in schema_diff(app, json.dumps(app.schema.to_json_dict()))


def test_lifecycle_tab_handlers(settings) -> None:  # type: ignore[no-untyped-def]
    from appliance.api import Appliance
    from appliance.edges.ui.lifecycle import compact_preview, compact_run, forget_table, merges_table, migrations_table
    from appliance.testing import FakeEngine

    app = Appliance(db=settings.home / "lc.duckdb", model=FakeEngine(preferences={"Order": 5.0}), settings=settings)
    for _ in range(3):
        app.record("order 4567 is late", "s")
    assert merges_table(app) == [] and migrations_table(app) == [] and forget_table(app) == []
    assert compact_preview(app, 3) == [["s", "Order", "4567", 3]]
    assert "Order 4567" in compact_run(app, 3)
    assert compact_preview(app, 3) == []  # covered by the summary now
    app.close()


def test_the_lifecycle_tab_undoes_the_last_schema_migration(settings) -> None:  # type: ignore[no-untyped-def]
    """The panel's Apply made a migration; Undo (blank id: the last one applied) restores the
    records and the schema, says so, and a second undo finds nothing left to undo."""
    from appliance.domain.loading import parse_schema
    from appliance.edges.ui.lifecycle import undo_migration

    app = Appliance(db=settings.home / "undo.duckdb", model=FakeEngine(preferences={"Order": 5.0}), settings=settings)
    app.record("order 4567 is late", "s")
    body = app.schema.to_json_dict()
    body["schema_version"] = "9.9"
    app.migrate(parse_schema(json.dumps(body)), {})
    assert app.schema.schema_version == "9.9"
    said, table = undo_migration(app, "")
    assert "undone" in said and app.schema.schema_version != "9.9"
    assert [row[-1] for row in table] == ["reverted"]
    again, _ = undo_migration(app, "")
    assert again.startswith("No applied migration")
    wrong, _ = undo_migration(app, "no-such-id")
    assert wrong.startswith("**Not undone:**")
    app.close()
