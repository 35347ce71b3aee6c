"""Multi-hop recall over declared relationships, on seeded data (user → orders → tickets)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from appliance.domain.loading import load_schema
from appliance.domain.records import Filter, Hop, MemoryRecord, RecallQuery, Relationship
from appliance.errors import QueryError
from appliance.store import MemoryStore
from appliance.store.queries import compile_query

from .conftest import SCHEMAS, make_record

CS = load_schema(SCHEMAS / "customer_service.json")
NOW = datetime(2026, 12, 2, tzinfo=UTC)

# (user, order, amount, ticket, issue_type, text of the complaint)
SEED = [
    ("alice", "1001", 1500.0, "T1", "logistics", "My order 1001 was lost by the courier, a logistics mess"),
    ("bob", "1002", 2400.0, "T2", "quality", "Order 1002 arrived with a cracked screen"),
    ("carol", "1003", 300.0, "T3", "logistics", "Order 1003 delivery is late, logistics problem"),
    ("dave", "1004", 5000.0, None, None, None),
    ("erin", "1005", 1200.0, "T5", "logistics", "订单1005物流太慢了，我要投诉"),
]


def _rec(mid: str, etype: str, eid: str, event: str, text: str, rels=(), **attrs) -> MemoryRecord:  # type: ignore[no-untyped-def]
    return make_record(
        memory_id=mid,
        timestamp=NOW,
        schema_id=CS.schema_id,
        source_text=text,
        event_type=event,
        entity_type=etype,
        entity_id=eid,
        attributes=attrs,
        relationships=list(rels),
    )


@pytest.fixture
def store(tmp_path) -> MemoryStore:  # type: ignore[no-untyped-def]
    s = MemoryStore(tmp_path / "hops.duckdb")
    for user, order, amount, ticket, issue, text in SEED:
        owns = Relationship(type="OWNS", source_type="User", source_id=user, target_type="Order", target_id=order)
        s.add_record(
            _rec(f"o{order}", "Order", order, "order_created", f"order {order}", [owns], amount=amount, user_id=user)
        )
        if ticket:
            has = Relationship(
                type="HAS_TICKET", source_type="Order", source_id=order, target_type="ServiceTicket", target_id=ticket
            )
            s.add_record(
                _rec(f"t{ticket}", "ServiceTicket", ticket, "complaint_registered", text, [has], issue_type=issue)
            )
    # bob also asked a question about logistics without complaining: must not count as a complaint
    s.add_record(_rec("q2", "ServiceTicket", "T2", "user_inquiry", "does logistics know where T2 is?"))
    return s


def _ids(store: MemoryStore, q: RecallQuery) -> list[str]:
    return sorted(h.entity.id for h in store.run_query(CS, q, "s")[2])


# "users who complained about logistics on orders over 1000"
COMPLAINED_ABOUT_LOGISTICS_OVER_1000 = RecallQuery(
    entity_type="ServiceTicket",
    filters=[
        Filter(field="event_type", op="eq", value="complaint_registered"),
        Filter(field="issue_type", op="eq", value="logistics"),
    ],
    hops=[
        Hop(relationship="HAS_TICKET", target_type="Order", filters=[Filter(field="amount", op="gt", value=1000)]),
        Hop(relationship="OWNS", target_type="User"),
    ],
)


def test_two_hops_with_filters_at_each_step(store: MemoryStore) -> None:
    assert _ids(store, COMPLAINED_ABOUT_LOGISTICS_OVER_1000) == ["alice", "erin"]


def test_each_condition_matters(store: MemoryStore) -> None:
    q = COMPLAINED_ABOUT_LOGISTICS_OVER_1000
    no_amount = q.model_copy(update={"hops": [Hop(relationship="HAS_TICKET", target_type="Order"), q.hops[1]]})
    assert _ids(store, no_amount) == ["alice", "carol", "erin"]
    any_issue = q.model_copy(update={"filters": q.filters[:1]})
    assert _ids(store, any_issue) == ["alice", "bob", "erin"]
    to_orders = q.model_copy(update={"hops": q.hops[:1]})
    assert _ids(store, to_orders) == ["1001", "1005"]


def test_hops_compile_to_joins_with_bound_values(store: MemoryStore) -> None:
    sql, params = compile_query(CS, COMPLAINED_ABOUT_LOGISTICS_OVER_1000, "s")
    assert sql.count("JOIN relationships r") == 2
    assert "logistics" not in sql and "1000" not in sql and "OWNS" not in sql
    assert "logistics" in params and 1000.0 in params and "OWNS" in params


def test_forward_direction_and_text_filter(store: MemoryStore) -> None:
    """users → orders → tickets whose memories mention a word (Chinese included)."""
    q = RecallQuery(
        entity_type="User",
        hops=[
            Hop(relationship="OWNS", target_type="Order"),
            Hop(
                relationship="HAS_TICKET",
                target_type="ServiceTicket",
                filters=[Filter(field="text", op="contains", value="物流")],
            ),
        ],
    )
    assert _ids(store, q) == ["T5"]
    q2 = q.model_copy(update={"filters": [Filter(field="id", op="eq", value="bob")], "hops": q.hops[:1]})
    assert _ids(store, q2) == ["1002"]


def test_event_filter_uses_the_event_not_any_memory(store: MemoryStore) -> None:
    inquiry = RecallQuery(
        entity_type="ServiceTicket", filters=[Filter(field="event_type", op="eq", value="user_inquiry")]
    )
    assert _ids(store, inquiry) == ["T2"]


def test_a_hop_that_does_not_connect_is_refused() -> None:
    bad = [
        RecallQuery(entity_type="User", hops=[Hop(relationship="HAS_TICKET", target_type="ServiceTicket")]),
        RecallQuery(entity_type="Order", hops=[Hop(relationship="OWNS", target_type="ServiceTicket")]),
        RecallQuery(
            entity_type="Order",
            hops=[
                Hop(
                    relationship="HAS_TICKET",
                    target_type="ServiceTicket",
                    filters=[Filter(field="amount", op="gt", value=1)],
                )
            ],
        ),
        RecallQuery(entity_type="Order", filters=[Filter(field="event_type", op="eq", value="x' OR 1=1")]),
    ]
    for q in bad:
        with pytest.raises(QueryError):
            compile_query(CS, q, "s")


def test_the_legacy_single_hop_still_works(store: MemoryStore) -> None:
    q = RecallQuery(
        entity_type="Order",
        filters=[Filter(field="id", op="eq", value="1003")],
        hop=Hop(relationship="OWNS", target_type="User"),
    )
    assert _ids(store, q) == ["carol"]


# --- from a question: the plan is deterministic; the model only fills what wording leaves open


def test_plan_for_the_issue_question_in_english_and_chinese() -> None:
    from datetime import UTC, datetime

    from appliance.extract.candidates import find_candidates
    from appliance.recall.hops import filters_by_step, plan_path

    for question, topic in (
        ("users who complained about logistics on orders over 1000", "logistics"),
        ("投诉过物流问题、订单金额超过1000的用户有哪些？", "物流"),
    ):
        plan = plan_path(CS, question)
        assert plan is not None and plan.target == "User"
        assert plan.path == ("ServiceTicket", "Order", "User") and plan.relationships == ("HAS_TICKET", "OWNS")
        steps = filters_by_step(
            CS, question, plan, find_candidates(CS.language, question, datetime.now(UTC), CS.entity_nouns)
        )
        assert {"field": "event_type", "op": "eq", "value": "complaint_registered"} in steps.fixed["ServiceTicket"]
        assert {"field": "text", "op": "contains", "value": topic} in steps.fixed["ServiceTicket"]
        assert steps.numeric == {"Order": [("gt", 1000.0)]} and steps.numeric_fields == {"Order": ["amount"]}


def test_single_type_questions_do_not_hop() -> None:
    from appliance.recall.hops import plan_path

    assert plan_path(CS, "what happened with order 12345?") is None
    assert plan_path(CS, "我的订单尾号4567怎么样了？") is None
    plan = plan_path(CS, "What's the status of the ticket for order 4567?")
    assert plan is not None and plan.path == ("Order", "ServiceTicket")
