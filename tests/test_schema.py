from __future__ import annotations

import copy
import json

import pytest

from appliance.domain.loading import load_schema, parse_schema, schema_problems
from appliance.errors import SchemaError

from .conftest import SCHEMAS

ISSUE_EXAMPLE = json.loads(
    """{"schema_version":"1.0","domain":"customer_service","entities":{"User":{"attributes":["user_id","name","contact_info"],"is_root":true},"Order":{"attributes":["order_id","user_id(ref)","create_time","amount","payment_status"],"states":["pending","paid","shipped","delivered","cancelled"]},"ServiceTicket":{"attributes":["ticket_id","order_id(ref)","issue_type","description","priority","status"],"states":["open","in_progress","resolved","closed"]}},"relationships":[{"from":"User","type":"OWNS","to":"Order"},{"from":"Order","type":"HAS_TICKET","to":"ServiceTicket"}],"event_types":["order_created","payment_received","user_inquiry","complaint_registered","issue_resolved"]}"""
)


def test_issue_example_validates_and_parses_refs() -> None:
    s = parse_schema(ISSUE_EXAMPLE)
    order = s.entity("Order")
    assert order.id_attribute == "order_id"
    assert order.attribute("user_id").kind == "ref"  # type: ignore[union-attr]
    assert s.entity_for_id_attribute("user_id").name == "User"  # type: ignore[union-attr]
    assert s.relationship_between("Order", "User").type == "OWNS"  # type: ignore[union-attr]


@pytest.mark.parametrize("name", ["customer_service", "travel_assistant"])
def test_shipped_schemas_validate(name: str) -> None:
    s = load_schema(SCHEMAS / f"{name}.json")
    assert s.domain == name and s.examples


def test_schema_id_is_a_content_hash() -> None:
    a = parse_schema(ISSUE_EXAMPLE)
    b = parse_schema(copy.deepcopy(ISSUE_EXAMPLE))
    edited = copy.deepcopy(ISSUE_EXAMPLE)
    edited["event_types"].append("refund_requested")
    assert a.schema_id == b.schema_id
    assert parse_schema(edited).schema_id != a.schema_id


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda d: d.pop("domain"), "domain"),
        (lambda d: d["entities"]["Order"].update(attributes=["order_id", "bad name"]), "entities.Order.attributes"),
        (lambda d: d["relationships"].append({"from": "User", "type": "X", "to": "Nobody"}), "relationships[2].to"),
        (lambda d: d["entities"]["Order"].update(states="paid"), "entities.Order.states"),
        (
            lambda d: d["entities"]["ServiceTicket"].update(attributes=["ticket_id", "customer_id(ref)"]),
            "customer_id(ref)",
        ),
        (lambda d: d.update(event_types=[]), "event_types"),
        (lambda d: d.update(event_types=["a", "a"]), "duplicate event type"),
        (lambda d: d["entities"]["Order"].update(states=[f"s{i}" for i in range(500)]), "at most 64"),
        (lambda d: d["entities"]["Order"].update(colour="red"), "unknown field"),
        (lambda d: d.update(entities=[]), "entities"),
    ],
)
def test_malformed_schema_error_names_the_field(mutate, field: str) -> None:  # type: ignore[no-untyped-def]
    d = copy.deepcopy(ISSUE_EXAMPLE)
    mutate(d)
    problems = schema_problems(d)
    assert problems, "mutation should make the schema invalid"
    assert any(field in p for p in problems), problems
    with pytest.raises(SchemaError) as err:
        parse_schema(d)
    assert err.value.hint


def test_not_json_and_not_object() -> None:
    with pytest.raises(SchemaError, match="not valid JSON"):
        parse_schema("{nope")
    with pytest.raises(SchemaError, match="JSON object"):
        parse_schema("[1, 2]")


def test_examples_must_fit_the_schema() -> None:
    d = copy.deepcopy(ISSUE_EXAMPLE)
    d["examples"] = [{"text": "hi", "record": {"event_type": "nope", "entity": {}, "relationships": []}}]
    with pytest.raises(SchemaError, match=r"examples\[0\]"):
        parse_schema(d)


def test_missing_file_is_a_clear_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SchemaError, match="cannot read"):
        load_schema(tmp_path / "absent.json")


def test_id_pattern_must_be_a_regular_expression() -> None:
    data = json.loads((SCHEMAS / "travel_assistant.json").read_text())
    data["entities"]["Booking"]["resolution"]["id_pattern"] = "BK-(\\d+"
    with pytest.raises(SchemaError, match="id_pattern"):
        parse_schema(data)


def test_schema_import_refuses_deep_nesting_and_a_failing_module_with_a_clear_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import pytest

    from appliance.domain.importers import import_schema
    from appliance.errors import SchemaError

    deep = tmp_path / "deep.json"
    inner = '{"type": "string"}'
    for _ in range(3000):
        inner = '{"anyOf": [' + inner + "]}"
    deep.write_text('{"title": "T", "type": "object", "properties": {"x": ' + inner + "}}")
    with pytest.raises(SchemaError, match="nested too deeply"):
        import_schema(deep)
    broken = tmp_path / "broken_models.py"
    broken.write_text("raise RuntimeError('boom at import')\n")
    import sys

    sys.path.insert(0, str(tmp_path))
    try:
        with pytest.raises(SchemaError, match="RuntimeError: boom at import"):
            import_schema("broken_models:Invoice")
    finally:
        sys.path.remove(str(tmp_path))


def test_schema_validate_lists_every_problem_not_only_the_first() -> None:
    from appliance.domain.loading import schema_problems

    raw = {
        "domain": "bad",
        "schema_version": "1",
        "entities": {
            "Thing": {"attributes": ["a:number", "b:enum", "c:flarp"]},
            "Fine": {"attributes": ["name"]},
            "Other": {"attributes": ["x:wat"]},
        },
        "event_types": [{"name": "seen", "entity": "Fine"}],
        "languages": ["en"],
    }
    problems = schema_problems(raw)
    assert len(problems) == 3, problems  # two attributes of Thing and one of Other
    assert [p.split(":")[0] for p in problems] == ["entities.Thing.attributes"] * 2 + ["entities.Other.attributes"]


def test_a_pydantic_import_keeps_enums_takes_a_key_and_needs_no_pythonpath(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from appliance.domain.importers import import_schema
    from appliance.domain.loading import parse_schema

    (tmp_path / "invoice_models.py").write_text(
        "from enum import Enum\n"
        "from pydantic import BaseModel, Field\n"
        "class Status(str, Enum):\n    open = 'open'\n    paid = 'paid'\n"
        "class Invoice(BaseModel):\n"
        "    number: str = Field(description='the invoice number')\n"
        "    amount: float\n"
        "    status: Status = Status.open\n"
    )
    monkeypatch.chdir(tmp_path)  # as a user runs it from their project, without PYTHONPATH
    [data] = import_schema("invoice_models:Invoice")
    ent = parse_schema(data).entity("Invoice")
    assert ent.attribute("status") is not None and ent.attribute("status").enum_values == ("open", "paid")  # type: ignore[union-attr]
    assert ent.key == ("number",)


def test_an_import_says_what_it_dropped(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from appliance.domain.importers import import_schema

    js = {
        "title": "Trip",
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "legs": {"type": "object", "properties": {"from": {"type": "string"}}},
            "either": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
        },
    }
    path = tmp_path / "trip.json"
    path.write_text(json.dumps(js))
    dropped: list[str] = []
    [data] = import_schema(path, dropped=dropped)
    assert [a["name"] for a in data["entities"]["Trip"]["attributes"]] == ["city"]
    assert dropped == [
        "Trip.legs: a nested object (its own entity when it is one of the schema's definitions)",
        "Trip.either: a choice between several types",
    ]


def test_an_imported_slot_gets_its_kind_whatever_its_wording() -> None:
    """The same slot reworded (SGD-X) keeps its kind: money said without a number word is a number,
    a count of time units in the plural is a number, not a time of day; dates and times stay."""
    from appliance.domain.importers import infer_kind

    assert infer_kind("transfer_value", "Sum of money to be transferred") == ("number", "")
    assert infer_kind("available_funds", "How much money is in the account") == ("number", "")
    assert infer_kind("days_staying", "Time span that guest is staying in days") == ("number", "")
    assert infer_kind("number_of_days", "Number of days for the booking") == ("number", "")
    assert infer_kind("check_in_date", "Date of the check in") == ("date", "")
    assert infer_kind("pickup_time", "Time of the pick up") == ("time", "")
