"""Entity resolution, merges and corrections follow the schema's rules, visibly."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from appliance.api import Appliance
from appliance.domain.loading import parse_schema
from appliance.domain.records import MemoryRecord, RecallQuery
from appliance.lang import language_for
from appliance.testing import FakeEngine

from .conftest import SCHEMAS, record_for

suffix_marked = language_for(("en", "zh")).suffix_marked

T0 = datetime(2026, 12, 1, tzinfo=UTC)


@pytest.fixture
def app(fake_app: Appliance) -> Appliance:
    return fake_app


def _store(
    app: Appliance,
    text: str,
    etype: str,
    eid: str | None,
    event: str = "user_inquiry",
    minutes: int = 0,
    state: str | None = None,
    **attrs: Any,
) -> MemoryRecord:
    rec = record_for(
        app,
        etype,
        eid,
        timestamp=T0 + timedelta(minutes=minutes),
        source_text=text,
        event_type=event,
        state=state,
        attributes=attrs,
    )
    return app._store(app.schema, rec)


@pytest.mark.parametrize(
    ("text", "value", "marked"),
    [
        ("订单尾号2345还没发货", "2345", True),
        ("my order ending in 2345 is late", "2345", True),
        ("the last four digits are 2345", "2345", True),
        ("order 2345 is late", "2345", False),
        ("订单尾号23456", "2345", False),
    ],
)
def test_suffix_marking(text: str, value: str, marked: bool) -> None:
    assert suffix_marked(text, value) is marked


def test_suffix_mention_resolves_to_the_one_stored_full_id(app: Appliance) -> None:
    _store(app, "order 12345 paid", "Order", "12345", "payment_received", amount=99.0)
    rec = _store(app, "订单尾号2345还没发货", "Order", "2345", minutes=1)
    assert rec.entity_id == "12345" and "resolved Order …2345 → 12345" in rec.note
    assert app.store.entities.get("s", "Order", "2345") is None
    hits = app.query(RecallQuery(entity_type="Order"), "s").hits
    assert [h.entity.id for h in hits] == ["12345"] and len(hits[0].memories) == 2


def test_suffix_first_then_full_id_merges_visibly(app: Appliance) -> None:
    first = _store(app, "订单尾号2345还没发货", "Order", "2345", amount=10.0)
    assert first.entity_id == "2345"
    later = _store(app, "order 12345 shipped today", "Order", "12345", minutes=5)
    assert "merges Order …2345 into 12345" in later.note
    assert app.store.entities.get("s", "Order", "2345") is None
    merged = app.store.entities.get("s", "Order", "12345")
    assert merged is not None and merged.attributes.get("amount") == 10.0
    assert app.store.get_record(first.memory_id).entity_id == "12345"  # type: ignore[union-attr]
    log = app.store.merges.recent("s")
    assert [(m["from_id"], m["to_id"], m["rule"]) for m in log] == [("2345", "12345", "id_suffix_digits=4")]


def test_ambiguous_suffix_is_not_merged(app: Appliance) -> None:
    _store(app, "order 12345", "Order", "12345")
    _store(app, "order 92345", "Order", "92345")
    rec = _store(app, "订单尾号2345怎么样了", "Order", "2345")
    assert rec.entity_id == "2345" and "matches 2 ids" in rec.note
    assert app.store.merges.recent("s") == []


def test_no_rule_no_merge(settings) -> None:  # type: ignore[no-untyped-def]
    raw = json.loads((SCHEMAS / "customer_service.json").read_text())
    raw["entities"]["Order"].pop("resolution")
    raw["entities"]["ServiceTicket"].pop("resolution")
    app = Appliance(schema=parse_schema(raw), db=":memory:", model=FakeEngine(), settings=settings, embedder=None)
    _store(app, "order 12345", "Order", "12345")
    rec = _store(app, "订单尾号2345还没发货", "Order", "2345")
    assert rec.entity_id == "2345" and app.store.merges.recent() == []
    ticket = _store(app, "order 12345 arrived broken", "ServiceTicket", None, "complaint_registered", order_id="12345")
    assert ticket.entity_id is None


def test_ticket_without_id_is_matched_on_its_order(app: Appliance) -> None:
    _store(app, "order 1001 for $1500", "Order", "1001", "order_created", amount=1500.0)
    t1 = _store(
        app,
        "order 1001 arrived broken, I complain",
        "ServiceTicket",
        None,
        "complaint_registered",
        state="open",
        order_id="1001",
    )
    assert t1.entity_id and t1.entity_id.startswith("auto-") and "system key" in t1.note
    assert [r.type for r in t1.relationships] == ["HAS_TICKET"]
    t2 = _store(
        app,
        "the complaint about order 1001 is resolved",
        "ServiceTicket",
        None,
        "issue_resolved",
        minutes=3,
        state="resolved",
        order_id="1001",
    )
    assert t2.entity_id == t1.entity_id and "resolved ServiceTicket by order_id=1001" in t2.note
    ticket = app.store.entities.get("s", "ServiceTicket", t1.entity_id)
    assert ticket is not None and ticket.version == 2 and ticket.state == "resolved"
    history = app.store.entities.history("s", "ServiceTicket", t1.entity_id)
    assert len(history) >= 2  # the update kept the earlier version


def test_correction_repoints_the_earlier_record(app: Appliance) -> None:
    wrong = _store(app, "I paid for order 12345", "Order", "12345", "payment_received", amount=88.0)
    fix = _store(app, "not 12345, I meant 12354", "Order", "12354", minutes=1)
    assert f"corrects memory {wrong.memory_id[:8]}" in fix.note
    again = app.store.get_record(wrong.memory_id)
    assert again is not None and again.entity_id == "12354" and "corrected Order 12345 → 12354" in again.note
    assert app.store.entities.get("s", "Order", "12345") is None  # no other memory cites it
    right = app.store.entities.get("s", "Order", "12354")
    assert right is not None and right.attributes.get("amount") == 88.0
    assert app.store.merges.recent("s")[0]["rule"] == "correction"
    ids = [h.entity.id for h in app.query(RecallQuery(entity_type="Order"), "s").hits]
    assert ids == ["12354"]


def test_correction_keeps_an_entity_other_memories_cite(app: Appliance) -> None:
    _store(app, "order 12345 was created", "Order", "12345", "order_created")
    wrong = _store(app, "I paid for order 12345", "Order", "12345", "payment_received", minutes=1)
    _store(app, "not 12345, I meant 12354", "Order", "12354", minutes=2)
    assert app.store.get_record(wrong.memory_id).entity_id == "12354"  # type: ignore[union-attr]
    assert app.store.entities.get("s", "Order", "12345") is not None  # still cited by the first record
