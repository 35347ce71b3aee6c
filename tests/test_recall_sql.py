from __future__ import annotations

from datetime import UTC, datetime

import pytest

from appliance.domain.loading import load_schema
from appliance.domain.records import Filter, Hop, MemoryRecord, RecallQuery, Relationship, Sort
from appliance.errors import QueryError
from appliance.store import MemoryStore
from appliance.store.queries import compile_query

from .conftest import SCHEMAS, make_record

CS = load_schema(SCHEMAS / "customer_service.json")
NOW = datetime(2026, 12, 2, tzinfo=UTC)


def _rec(mid: str, session: str, etype: str, eid: str, state: str | None = None, rels=(), **attrs) -> MemoryRecord:  # type: ignore[no-untyped-def]
    return make_record(
        memory_id=mid,
        session_id=session,
        timestamp=NOW,
        schema_id=CS.schema_id,
        source_text=f"about {etype} {eid}",
        entity_type=etype,
        entity_id=eid,
        state=state,
        attributes=attrs,
        relationships=list(rels),
    )


@pytest.fixture
def store(tmp_path) -> MemoryStore:  # type: ignore[no-untyped-def]
    s = MemoryStore(tmp_path / "m.duckdb")
    s.add_record(
        _rec(
            "m1",
            "A",
            "Order",
            "4567",
            "paid",
            amount=1200.0,
            rels=[Relationship(type="OWNS", source_type="User", source_id="u1", target_type="Order", target_id="4567")],
        )
    )
    s.add_record(_rec("m2", "A", "Order", "12345", "shipped", amount=80.0))
    s.add_record(_rec("m3", "B", "Order", "99999", "paid", amount=5000.0))
    s.add_record(
        _rec(
            "m4",
            "A",
            "ServiceTicket",
            "T1",
            "open",
            issue_type="logistics",
            rels=[
                Relationship(
                    type="HAS_TICKET",
                    source_type="Order",
                    source_id="4567",
                    target_type="ServiceTicket",
                    target_id="T1",
                )
            ],
        )
    )
    return s


def _ids(store: MemoryStore, q: RecallQuery, session: str = "A") -> list[str]:
    return [h.entity.id for h in store.run_query(CS, q, session)[2]]


def test_filters_and_operators(store: MemoryStore) -> None:
    assert _ids(store, RecallQuery(entity_type="Order", filters=[Filter(field="id", op="contains", value="4567")])) == [
        "4567"
    ]
    assert _ids(store, RecallQuery(entity_type="Order", filters=[Filter(field="amount", op="gt", value=1000)])) == [
        "4567"
    ]
    assert _ids(store, RecallQuery(entity_type="Order", filters=[Filter(field="amount", op="lt", value=100)])) == [
        "12345"
    ]
    assert sorted(
        _ids(
            store, RecallQuery(entity_type="Order", filters=[Filter(field="state", op="in", value=["paid", "shipped"])])
        )
    ) == ["12345", "4567"]
    q = RecallQuery(entity_type="Order", sort=Sort(field="amount", descending=False))
    assert _ids(store, q) == ["12345", "4567"]


def test_numbers_written_as_text_compare_as_numbers_on_either_engine(store: MemoryStore) -> None:
    """A value stored as text in any number form ("1e3", ".5", "3.", " 7 ") is compared and
    sorted as a number; a value that is no number ("12 km") is neither greater nor less."""
    for i, amount in enumerate(["1e3", ".5", "3.", " 7 ", "12 km"]):
        store.add_record(_rec(f"n{i}", "C", "Order", f"o{i}", "paid", amount=amount))
    over = RecallQuery(entity_type="Order", filters=[Filter(field="amount", op="gt", value=5)])
    assert sorted(_ids(store, over, "C")) == ["o0", "o3"]
    under = RecallQuery(entity_type="Order", filters=[Filter(field="amount", op="lt", value=5)])
    assert sorted(_ids(store, under, "C")) == ["o1", "o2"]
    ascending = RecallQuery(entity_type="Order", sort=Sort(field="amount", descending=False), limit=10)
    assert _ids(store, ascending, "C") == ["o1", "o2", "o3", "o0", "o4"]


def test_sessions_are_isolated_unless_asked(store: MemoryStore) -> None:
    q = RecallQuery(entity_type="Order")
    assert "99999" not in _ids(store, q, "A")
    assert _ids(store, q, "B") == ["99999"]
    assert "99999" in _ids(store, q.model_copy(update={"all_sessions": True}), "A")


def test_hop_follows_declared_relationships(store: MemoryStore) -> None:
    q = RecallQuery(
        entity_type="Order",
        filters=[Filter(field="id", op="eq", value="4567")],
        hop=Hop(relationship="HAS_TICKET", target_type="ServiceTicket"),
    )
    assert _ids(store, q) == ["T1"]
    back = RecallQuery(
        entity_type="Order",
        filters=[Filter(field="id", op="eq", value="4567")],
        hop=Hop(relationship="OWNS", target_type="User"),
    )
    assert _ids(store, back) == ["u1"]


INJECTIONS = [
    "'; DROP TABLE memories; --",
    "4567' OR '1'='1",
    "%",
    "_",
    '") OR 1=1 --',
    "\\'; DELETE FROM entities; --",
]


@pytest.mark.parametrize("value", INJECTIONS)
def test_injection_in_values_is_just_a_value(store: MemoryStore, value: str) -> None:
    for op in ("eq", "contains", "gt", "lt", "in"):
        q = RecallQuery(
            entity_type="Order", filters=[Filter(field="id", op=op, value=[value] if op == "in" else value)]
        )  # type: ignore[arg-type]
        sql, params = compile_query(CS, q, "A")
        assert len(value) == 1 or value not in sql
        ids = _ids(store, q)
        assert op in ("gt", "lt") or ids == []  # nothing matches a hostile literal
    assert store.counts()["memories"] == 4 and store.counts()["entities"] >= 4


@pytest.mark.parametrize("field", ["amount) OR 1=1 --", "attributes", "e.session_id", "id; DROP TABLE x", '"amount"'])
def test_injection_in_field_names_and_sort_keys_is_refused(store: MemoryStore, field: str) -> None:
    with pytest.raises(QueryError):
        compile_query(CS, RecallQuery(entity_type="Order", filters=[Filter(field=field, op="eq", value="1")]), "A")
    with pytest.raises(QueryError):
        compile_query(CS, RecallQuery(entity_type="Order", sort=Sort(field=field)), "A")


def test_unknown_entity_event_relationship_refused() -> None:
    for q in (
        RecallQuery(entity_type="Orders; DROP"),
        RecallQuery(event_type="x' OR 1=1"),
        RecallQuery(entity_type="Order", hop=Hop(relationship="PWNS", target_type="User")),
    ):
        with pytest.raises(QueryError):
            compile_query(CS, q, "A")


def test_attribute_names_are_bound_not_pasted() -> None:
    sql, params = compile_query(
        CS, RecallQuery(entity_type="Order", filters=[Filter(field="amount", op="gt", value=5)]), "A"
    )
    assert "amount" not in sql and '$."amount"' in params


def test_a_record_is_about_the_days_its_text_states_whatever_entity_holds_it() -> None:
    """The time filters read a record's days: its message day, its date values, and the dates
    its text states — a record stored as a place (no date attribute) is still about April 5."""
    from datetime import date

    from appliance.domain.links import days_of

    schema = load_schema(SCHEMAS / "personal_memory.json")
    at = datetime(2026, 4, 9, 15, tzinfo=UTC)
    place = make_record(
        source_text="we took the kids to Harewood House on April 5",
        timestamp=at,
        event_type="place_mentioned",
        entity_type="Place",
        entity_id="Harewood House",
        attributes={"place_name": "Harewood House"},
    )
    days = days_of(schema, place)
    assert (date(2026, 4, 9), date(2026, 4, 9), "message") in days
    assert (date(2026, 4, 5), date(2026, 4, 5), "text") in days
    plain = make_record(source_text="nothing dated here", timestamp=at)
    assert days_of(schema, plain) == [(date(2026, 4, 9), date(2026, 4, 9), "message")]
