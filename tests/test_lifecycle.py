"""Compaction links, forgetting policies with dry runs, reversible schema migrations."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from appliance.api import Appliance
from appliance.domain.loading import parse_schema
from appliance.domain.records import MemoryRecord
from appliance.errors import SchemaError
from appliance.lifecycle.compact import SUMMARY_REGEX, grounded_sentence
from appliance.testing import FakeEngine

from .conftest import SCHEMAS, record_for

NOW = datetime(2026, 12, 2, 12, tzinfo=UTC)


@pytest.fixture
def app(fake_app: Appliance) -> Appliance:
    return fake_app


def _add(
    app: Appliance,
    text: str,
    event: str,
    eid: str,
    days_ago: float = 0,
    session: str = "s",
    conf: float = 0.9,
    **attrs: Any,
) -> MemoryRecord:
    rec = record_for(
        app,
        "Order",
        eid,
        session_id=session,
        timestamp=NOW - timedelta(days=days_ago),
        confidence=conf,
        source_text=text,
        event_type=event,
        attributes=attrs,
    )
    return app._store(app.schema, rec)


def _raw() -> dict[str, Any]:
    return json.loads((SCHEMAS / "customer_service.json").read_text())


# --- compaction -----------------------------------------------------------------------


def test_compaction_writes_one_summary_linked_to_the_originals(app: Appliance) -> None:
    originals = [
        _add(app, f"where is order 4567? (asked {i})", "user_inquiry", "4567", days_ago=10 - i) for i in range(6)
    ]
    _add(app, "order 9999 paid", "payment_received", "9999")
    planned = app.compact(entity_type="Order", min_records=5, dry_run=True)
    assert [(r["entity_id"], r["records"]) for r in planned] == [("4567", 6)]
    assert app.store.counts()["memories"] == 7  # dry run wrote nothing
    done = app.compact(entity_type="Order", min_records=5, use_model=False)
    summary = app.store.get_record(done[0]["summary_id"])
    assert summary is not None and summary.event_type == "summary" and summary.entity_id == "4567"
    assert "6 memories" in summary.source_text and "user_inquiry×6" in summary.source_text
    assert sorted(m.memory_id for m in app.summary_sources(summary.memory_id)) == sorted(o.memory_id for o in originals)
    assert app.store.counts()["memories"] == 8  # originals kept
    assert app.compact(entity_type="Order", min_records=5, dry_run=True) == []  # covered now


def test_compaction_needs_a_threshold(app: Appliance) -> None:
    from appliance.errors import QueryError

    with pytest.raises(QueryError, match="compact_after"):
        app.compact(entity_type="User")


def test_summary_grammar_and_grounding_check() -> None:
    import re

    assert re.fullmatch(SUMMARY_REGEX, '{"summary":"Order 4567 was asked about six times."}')
    assert re.fullmatch(SUMMARY_REGEX, '{"summary":"订单4567多次催发货。"}')
    assert not re.fullmatch(SUMMARY_REGEX, '{"summary":"x"}')
    assert not re.fullmatch(SUMMARY_REGEX, '{"summary":"One sentence. Then another."}')  # one sentence only
    assert not re.fullmatch(SUMMARY_REGEX, '{"summary":"unterminated')
    recs = [
        MemoryRecord(
            memory_id="a",
            session_id="s",
            timestamp=NOW,
            schema_id="x",
            status="ok",
            confidence=1.0,
            source_text="order 4567 costs $1299",
        )
    ]
    assert grounded_sentence("Order 4567 cost 1299.", recs) == []
    assert grounded_sentence("Order 4567 was refunded 350 dollars.", recs) == ["350"]


# --- forgetting -----------------------------------------------------------------------


def test_without_a_policy_nothing_is_selected(settings) -> None:  # type: ignore[no-untyped-def]
    raw = _raw()
    for ev in raw["event_types"]:
        ev.pop("retention", None)
    for ent in raw["entities"].values():
        ent.pop("retention", None)
    app = Appliance(schema=parse_schema(raw), db=":memory:", model=FakeEngine(), settings=settings, embedder=None)
    _add(app, "where is order 1?", "user_inquiry", "1", days_ago=5000, conf=0.01)
    assert app.forget(dry_run=False, now=NOW) == []
    assert app.store.counts()["memories"] == 1


def test_age_policy_dry_run_then_real_run(app: Appliance) -> None:
    old = _add(app, "where is order 4567?", "user_inquiry", "4567", days_ago=400)
    recent = _add(app, "where is order 4567 now?", "user_inquiry", "4567", days_ago=3)
    paid = _add(app, "I paid for order 4567", "payment_received", "4567", days_ago=900)
    dry = app.forget(dry_run=True, now=NOW)
    assert [d.memory_id for d in dry] == [old.memory_id]
    assert dry[0].policy == "event_types.user_inquiry.retention.max_age_days=365"
    assert app.store.counts()["memories"] == 3  # a dry run deletes nothing
    done = app.forget(dry_run=False, now=NOW)
    assert [d.memory_id for d in done] == [old.memory_id]
    assert app.store.get_record(old.memory_id) is None
    assert app.store.get_record(recent.memory_id) is not None and app.store.get_record(paid.memory_id) is not None
    log = app.store.lifecycle.forget_log()
    assert [(r["memory_id"], r["policy"]) for r in log] == [(old.memory_id, dry[0].policy)]
    assert app.store.entities.get("s", "Order", "4567") is not None  # the entity state stays


def test_importance_session_end_and_compaction_policies(settings) -> None:  # type: ignore[no-untyped-def]
    raw = _raw()
    raw["event_types"][2]["retention"] = {"min_importance": 0.2}  # user_inquiry (importance 0.3)
    raw["entities"]["Order"]["retention"] = {"forget_on_session_end": True}
    app = Appliance(schema=parse_schema(raw), db=":memory:", model=FakeEngine(), settings=settings, embedder=None)
    unsure = _add(app, "order 1 maybe?", "user_inquiry", "1", conf=0.1)  # 0.3 * 0.55 = 0.165
    sure = _add(app, "where is order 1?", "user_inquiry", "1", conf=0.9)
    other = _add(app, "order 2 paid", "payment_received", "2", session="t")
    assert [d.memory_id for d in app.forget(now=NOW)] == [unsure.memory_id]
    preview = app.end_session("s", dry_run=True)
    assert {d.memory_id for d in preview} == {unsure.memory_id, sure.memory_id}
    assert app.store.counts()["memories"] == 3
    gone = app.end_session("s")
    assert {d.memory_id for d in gone} == {unsure.memory_id, sure.memory_id}
    assert app.store.get_record(other.memory_id) is not None  # another session is untouched


def test_forget_after_compaction_keeps_the_summary(settings) -> None:  # type: ignore[no-untyped-def]
    raw = _raw()
    raw["entities"]["Order"]["retention"] = {"compact_after": 3, "forget_after_compaction": True}
    app = Appliance(schema=parse_schema(raw), db=":memory:", model=FakeEngine(), settings=settings, embedder=None)
    for i in range(3):
        _add(app, f"order 7 question {i}", "order_created", "7")
    assert app.forget(now=NOW) == []  # not compacted yet
    summary_id = app.compact(use_model=False)[0]["summary_id"]
    gone = app.forget(dry_run=False, now=NOW)
    assert len(gone) == 3 and all(d.policy == "entities.Order.retention.forget_after_compaction" for d in gone)
    assert app.store.get_record(summary_id) is not None and app.store.counts()["memories"] == 1


# --- schema evolution -------------------------------------------------------------------


def _v2() -> dict[str, Any]:
    raw = _raw()
    raw["schema_version"] = "2.0"
    order = raw["entities"]["Order"]
    order["attributes"] = [a if a != "amount:number" else "total:number" for a in order["attributes"]]
    order["states"] = [s if s != "paid" else "payment_done" for s in order["states"]]
    order["state_aliases"]["payment_done"] = order["state_aliases"].pop("paid")
    for ev in raw["event_types"]:
        if ev["name"] == "user_inquiry":
            ev["name"] = "question_asked"
        if ev.get("sets_state") == "paid":
            ev["sets_state"] = "payment_done"
    for ex in raw["examples"]:
        rec = ex["record"]
        rec["event_type"] = {"user_inquiry": "question_asked"}.get(rec["event_type"], rec["event_type"])
        attrs = rec["entity"]["attributes"]
        if "amount" in attrs:
            attrs["total"] = attrs.pop("amount")
        if rec["entity"].get("state") == "paid":
            rec["entity"]["state"] = "payment_done"
    return raw


SPEC = {
    "rename_event_types": {"user_inquiry": "question_asked"},
    "rename_attributes": {"Order": {"amount": "total"}},
    "rename_states": {"Order": {"paid": "payment_done"}},
}


def _paid(app: Appliance) -> MemoryRecord:
    rec = _add(app, "I paid 12 for order 4567", "payment_received", "4567", amount=12.0)
    with app.store.db.transaction() as con:
        app.store.records.update(con, rec.memory_id, state="paid")
    app.store.entities.update("s", "Order", "4567", 1, state="paid")
    return rec


def test_migration_is_explicit_checked_and_reversible(app: Appliance) -> None:
    paid = _paid(app)
    asked = _add(app, "where is order 4567?", "user_inquiry", "4567")
    before_rows = [app.store.get_record(m.memory_id) for m in (paid, asked)]
    before_entity = app.store.entities.get("s", "Order", "4567")
    v1_id = app.schema.schema_id
    v2 = parse_schema(_v2())
    with pytest.raises(SchemaError, match="would not fit"):
        app.migrate(v2, {})  # without the renames the records do not fit: refused, nothing written
    assert app.store.get_record(paid.memory_id) == before_rows[0] and app.schema.schema_id == v1_id
    preview = app.plan_migration(v2, SPEC).summary()
    assert preview["records_changed"] == 2 and preview["problem_count"] == 0
    done = app.migrate(v2, SPEC)
    assert app.schema.schema_version == "2.0"
    moved = app.store.get_record(paid.memory_id)
    assert moved is not None and moved.state == "payment_done" and moved.attributes["total"] == 12.0
    assert "amount" not in moved.attributes and moved.schema_id == v2.schema_id
    assert app.store.get_record(asked.memory_id).event_type == "question_asked"  # type: ignore[union-attr]
    ent = app.store.entities.get("s", "Order", "4567")
    assert ent is not None and ent.state == "payment_done" and ent.attributes.get("total") == 12.0
    assert app.store.lifecycle.list_migrations()[0]["migration_id"] == done["migration_id"]
    back = app.revert_migration(done["migration_id"])
    assert back["records"] == 2 and app.schema.schema_id == v1_id
    assert [app.store.get_record(m.memory_id) for m in (paid, asked)] == before_rows
    again = app.store.entities.get("s", "Order", "4567")
    assert again is not None and before_entity is not None
    assert (again.state, again.attributes) == (before_entity.state, before_entity.attributes)
    with pytest.raises(Exception, match="already reverted"):
        app.revert_migration(done["migration_id"])


# --- several schemas: each record under its own schema's policies ------------------------------


NOTES = {
    "schema_version": "1",
    "domain": "notes",
    "entities": {"Note": {"attributes": ["note_id", "topic"], "retention": {"compact_after": 2}}},
    "event_types": [{"name": "note_taken", "entity": "Note", "retention": {"max_age_days": 1}}],
}


def test_lifecycle_applies_each_records_own_schema(settings) -> None:  # type: ignore[no-untyped-def]
    app = Appliance(
        schema=["customer_service", NOTES], db=settings.home / "two.duckdb", model=FakeEngine(), settings=settings
    )
    notes = app.schemas["notes"]
    old = NOW - timedelta(days=3)
    for i, eid in enumerate(["n1", "n1", "n2"]):
        rec = record_for(app, "Order", None).model_copy(
            update={
                "memory_id": f"note{i}",
                "schema_id": notes.schema_id,
                "entity_type": "Note",
                "entity_id": eid,
                "event_type": "note_taken",
                "attributes": {"topic": "x"},
                "timestamp": old,
            }
        )
        app._store(notes, rec)
    inquiry = _add(app, "where is order 1?", "user_inquiry", "1", days_ago=3)
    # the first schema (customer service) has no policy for notes; the notes schema forgets after 1 day
    chosen = {d.memory_id: d.policy for d in app.forget(dry_run=True, now=NOW)}
    assert chosen == {f"note{i}": "event_types.note_taken.retention.max_age_days=1" for i in range(3)}
    assert inquiry.memory_id not in chosen  # customer service keeps inquiries 365 days
    # compaction: the notes schema's threshold (2) applies to Note; Order keeps its own (12)
    rows = app.compact(dry_run=True)
    assert [(r["entity_type"], r["entity_id"], r["records"]) for r in rows] == [("Note", "n1", 2)]
    app.close()
