"""A user's own schemas, end to end with the shipped SmolLM2 model: one imported from an
SGD-style service schema by ``appliance schema import`` (no keywords, no examples, no id shape)
and one written in Chinese with Chinese entity, attribute and event names. The schemas are
written here, not taken from any benchmark; the assertions are about values the text states."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from appliance.api import Appliance
from appliance.domain.loading import parse_schema

pytestmark = pytest.mark.real_model

NOW = datetime(2026, 5, 4, 10, 0, tzinfo=UTC)

SGD_STYLE = [
    {
        "service_name": "Dining_9",
        "description": "Find restaurants and reserve a table",
        "slots": [
            {"name": "restaurant_name", "description": "Name of the restaurant", "is_categorical": False},
            {"name": "city", "description": "City where the restaurant is located", "is_categorical": False},
            {"name": "date", "description": "Date of the reservation", "is_categorical": False},
            {"name": "time", "description": "Time of the reservation", "is_categorical": False},
            {
                "name": "party_size",
                "description": "Number of people in the party",
                "is_categorical": True,
                "possible_values": ["1", "2", "3", "4", "5", "6"],
            },
            {"name": "cuisine", "description": "Type of food served", "is_categorical": False},
        ],
        "intents": [
            {
                "name": "FindRestaurants",
                "description": "Search for restaurants by cuisine and city",
                "is_transactional": False,
                "required_slots": ["city", "cuisine"],
                "optional_slots": {},
                "result_slots": ["restaurant_name", "city", "cuisine"],
            },
            {
                "name": "ReserveTable",
                "description": "Reserve a table at a restaurant",
                "is_transactional": True,
                "required_slots": ["restaurant_name", "city", "time"],
                "optional_slots": {"date": "today", "party_size": "2"},
                "result_slots": ["restaurant_name", "city", "time", "date", "party_size"],
            },
        ],
    }
]

CHINESE = {
    "schema_version": "1.3",
    "domain": "出行",
    "languages": ["zh"],
    "entities": {
        "酒店": {
            "description": "用户想住的酒店",
            "id_attribute": None,
            "resolution": {"session_latest": True},
            "attributes": [
                {"name": "名称", "kind": "string", "description": "酒店的名字"},
                {"name": "价格", "kind": "number", "description": "每晚房价", "unit": ["元"]},
                {"name": "WiFi", "kind": "boolean", "description": "酒店提供无线网络"},
            ],
        },
        "出租车": {
            "description": "打车出行",
            "id_attribute": None,
            "resolution": {"session_latest": True},
            "attributes": [
                {"name": "出发地", "kind": "string", "format": "place", "description": "从哪里出发"},
                {"name": "目的地", "kind": "string", "format": "place", "description": "到哪里去"},
            ],
        },
    },
    "event_types": [
        {"name": "找酒店", "description": "用户在找酒店", "entity": "酒店"},
        {"name": "叫车", "description": "用户要打车", "entity": "出租车"},
    ],
}


def _settings(home: Path):  # type: ignore[no-untyped-def]
    from appliance.config import Settings

    return Settings.from_env({"APPLIANCE_HOME": str(home), "APPLIANCE_GRAMMARS": str(home / "g")})


def _appliance(schema_data: dict, home: Path, engine) -> Appliance:  # type: ignore[no-untyped-def]
    return Appliance(schema=parse_schema(schema_data), db=home / "m.duckdb", model=engine, settings=_settings(home))


def _grounded(rec) -> None:  # type: ignore[no-untyped-def]
    """Every stored string is a span of the message, or a normalised date/time/range of one."""
    for name, v in rec.attributes.items():
        if isinstance(v, str) and v not in rec.source_text:
            assert re.fullmatch(r"\d{4}-\d{2}-\d{2}|\d{2}:\d{2}|[<>]=?[\d.]+|[\d.]+-[\d.]+", v), (name, v)
            assert rec.spans.get(name, "") in rec.source_text, (name, rec.spans)


@pytest.fixture(scope="module")
def dining(_shared_real_engine, tmp_path_factory):  # type: ignore[no-untyped-def]
    from appliance.edges.cli.main import main

    home = tmp_path_factory.mktemp("dining")
    (home / "sgd.json").write_text(json.dumps(SGD_STYLE), encoding="utf-8")
    out = CliRunner().invoke(main, ["schema", "import", str(home / "sgd.json"), "--out", str(home / "schemas")])
    assert out.exit_code == 0, out.output
    data = json.loads((home / "schemas" / "Dining_9.json").read_text(encoding="utf-8"))
    a = _appliance(data, home, _shared_real_engine)
    yield a
    a.close()


def test_imported_sgd_schema_records_values_and_intents(dining: Appliance) -> None:
    find = dining.record("Can you find me a restaurant in San Jose?", session_id="d1", now=NOW)
    book = dining.record(
        "Book a table at Cafe Jolie for 4 people at 7:30 pm tomorrow", session_id="d1", now=NOW + timedelta(minutes=1)
    )
    assert find.event_type == "FindRestaurants"
    assert find.attributes["city"] == "San Jose"
    assert book.event_type == "ReserveTable"
    assert book.attributes["restaurant_name"] == "Cafe Jolie"
    assert book.attributes["time"] == "19:30"
    assert book.attributes["date"] == "2026-05-05"
    assert book.attributes["party_size"] in ("4", 4)
    for rec in (find, book):
        _grounded(rec)
    # the session's one dining entity holds what the two messages said
    ent = dining.list_entities(session="d1")
    assert len(ent) == 1 and ent[0].attributes["city"] == "San Jose"
    assert ent[0].attributes["restaurant_name"] == "Cafe Jolie"


def test_imported_schema_answers_from_what_was_recorded(dining: Appliance) -> None:
    dining.record("Reserve a table at Sushi Ran at 8 pm", session_id="d2", now=NOW)
    res = dining.recall("Which restaurant did I reserve?", session_id="d2", now=NOW + timedelta(hours=1))
    assert "Sushi Ran" in res.context
    assert res.memories and all(m.memory.session_id == "d2" for m in res.memories)


@pytest.fixture(scope="module")
def chinese(_shared_real_engine, tmp_path_factory):  # type: ignore[no-untyped-def]
    a = _appliance(CHINESE, tmp_path_factory.mktemp("zh"), _shared_real_engine)
    yield a
    a.close()


def test_chinese_named_schema_fills_chinese_attributes(chinese: Appliance) -> None:
    taxi = chinese.record("帮我叫一辆出租车，从北京京仪大酒店到聚宝源(牛街总店)", session_id="z1", now=NOW)
    assert (taxi.event_type, taxi.entity_type) == ("叫车", "出租车")
    assert taxi.attributes["出发地"] == "北京京仪大酒店"
    assert taxi.attributes["目的地"] == "聚宝源(牛街总店)"
    hotel = chinese.record("我想找一家有WiFi的酒店，价格在400-500元", session_id="z2", now=NOW)
    assert (hotel.event_type, hotel.entity_type) == ("找酒店", "酒店")
    assert hotel.attributes["价格"] == "400-500"  # a range stays a range
    assert hotel.spans["价格"] == "400-500元"  # beside the text it was read from
    assert hotel.attributes["WiFi"] is True
    for rec in (taxi, hotel):
        _grounded(rec)


def test_chinese_names_are_safe_in_queries_and_recall(chinese: Appliance) -> None:
    chinese.record("帮我叫一辆出租车，从天坛公园到北京南站", session_id="z3", now=NOW)
    q = chinese.query(
        {"entity_type": "出租车", "filters": [{"field": "目的地", "op": "eq", "value": "北京南站"}]}, session_id="z3"
    )
    assert [h.entity.attributes["出发地"] for h in q.hits] == ["天坛公园"]
    assert "目的地" not in q.sql  # attribute names are parameters, never SQL text
    res = chinese.recall("我打车去哪里？", session_id="z3", now=NOW + timedelta(minutes=5))
    assert "北京南站" in res.context


def test_what_is_sought_nearby_is_not_what_the_message_tells_of(chinese: Appliance) -> None:
    """After a taxi to 北京南站, "北京南站附近有什么酒店？" asks what is around the station: the
    hotels are sought, not told of, so the record stays with the taxi the session is about (and
    holds no hotel named 北京南站). A clause of nearness that holds a value seeks a hotel at that
    price: a hotel record, stored without doubt; a hotel named in a plain sentence is one too."""
    chinese.record("帮我叫一辆出租车，从天坛公园到北京南站", session_id="z4", now=NOW)
    near = chinese.record("北京南站附近有什么酒店？", session_id="z4", now=NOW + timedelta(minutes=1))
    assert near.entity_type == "出租车" and near.attributes.get("名称") is None
    chinese.record("帮我叫一辆出租车，从天坛公园到北京南站", session_id="z8", now=NOW)
    priced = chinese.record("北京南站附近有没有400-500元的酒店？", session_id="z8", now=NOW + timedelta(minutes=1))
    assert priced.entity_type == "酒店" and priced.attributes["价格"] is not None
    assert "附近" not in priced.note
    chinese.record("帮我叫一辆出租车，从天坛公园到北京南站", session_id="z5", now=NOW)
    plain = chinese.record("我想找一家有WiFi的酒店", session_id="z5", now=NOW + timedelta(minutes=1))
    assert plain.entity_type == "酒店" and "附近" not in plain.note


def test_a_bare_agreement_is_flagged_where_it_may_answer_a_yes_no_question(
    chinese: Appliance, dining: Appliance
) -> None:
    """ "好的" after a hotel search may answer "要有WiFi吗？", a question the record never saw: the
    hotel has a yes/no attribute, so the empty record is flagged. The dining schema has none: a
    bare "Yes, that's fine." there confirms the reservation and nothing is lost."""
    chinese.record("我想找一家酒店", session_id="z6", now=NOW)
    yes = chinese.record("好的", session_id="z6", now=NOW + timedelta(minutes=1))
    assert yes.entity_type == "酒店" and not any(v is not None for v in yes.attributes.values())
    assert yes.status == "needs_review" and "WiFi" in yes.note
    dining.record("Book a table at Cafe Jolie at 7:30 pm", session_id="d9", now=NOW)
    fine = dining.record("Yes, that's fine.", session_id="d9", now=NOW + timedelta(minutes=1))
    assert "agreement" not in fine.note


def test_corrections_teach_their_near_paraphrases_and_pull_nothing_else(_shared_real_engine, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Records a person corrected teach the imported schema: after three corrected searches
    ("Any ramen restaurants in Oakland?"), a message phrased like them is a search too (zero-shot
    SmolLM2 books a table for it); five corrected bookings in another database do not pull
    searches that are nothing like them into bookings (a raw similarity did: "Show me vegan
    spots in San Mateo" became a reservation)."""
    from appliance.domain.importers import from_sgd

    schema = from_sgd(SGD_STYLE[0])
    # each corrected record as a person fixes it: the event and the values the text states
    taught = {
        "searches": [
            ("Any ramen restaurants in Oakland?", {"cuisine": "ramen", "city": "Oakland"}),
            ("Any pizza places in San Jose?", {"cuisine": "pizza", "city": "San Jose"}),
            ("Any Mexican restaurants in Fremont?", {"cuisine": "Mexican", "city": "Fremont"}),
        ],
        "bookings": [
            ("I'd like Nopa at 7 pm", {"restaurant_name": "Nopa", "time": "19:00"}),
            ("Put me down at Rich Table, 7:15 pm", {"restaurant_name": "Rich Table", "time": "19:15"}),
            ("Get us a table at State Bird for 4", {"restaurant_name": "State Bird", "party_size": 4}),
            ("Reserve Delfina at noon", {"restaurant_name": "Delfina", "time": "12:00"}),
            ("Lock in Kokkari for tonight at 9", {"restaurant_name": "Kokkari", "time": "21:00"}),
        ],
    }
    events = {"searches": "FindRestaurants", "bookings": "ReserveTable"}
    for kind, examples in taught.items():
        home = tmp_path / kind
        home.mkdir()
        app = Appliance(schema=schema, db=home / "m.duckdb", model=_shared_real_engine, settings=_settings(home))
        for i, (text, values) in enumerate(examples):
            app.teach(text, {"event_type": events[kind], "attributes": values}, session_id=f"teach{i}", now=NOW)
        if kind == "searches":
            rec = app.record("Any ramen restaurants in Fremont?", session_id="new", now=NOW)
            assert rec.event_type == "FindRestaurants"
        else:
            for i, text in enumerate(["Show me vegan spots in San Mateo", "Find me a Thai place in Oakland."]):
                assert app.record(text, session_id=f"new{i}", now=NOW).event_type == "FindRestaurants", text
        app.close()


TRAINS = {
    "service_name": "Trains_9",
    "description": "Find train journeys",
    "slots": [
        {"name": "from_station", "description": "Name of the station the train leaves from", "is_categorical": False},
        {"name": "from_city", "description": "City the journey starts in", "is_categorical": False},
        {"name": "to_city", "description": "City the journey ends in", "is_categorical": False},
        {"name": "to_station", "description": "Name of the station the train arrives at", "is_categorical": False},
    ],
    "intents": [
        {
            "name": "FindTrains",
            "description": "Search for trains between two cities",
            "is_transactional": False,
            "required_slots": ["from_city", "to_city"],
            "optional_slots": {},
            "result_slots": [],
        }
    ],
}


def test_corrected_values_teach_which_attribute_follows_a_word(_shared_real_engine, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Three corrected turns show that this schema's "from X" is the city a journey starts in,
    not the station (the descriptions leave it open): a new "from Phoenix" fills the city. A taught
    record holds exactly the values it was given — a value the extractor put elsewhere is cleared,
    or the example would teach the mistake it corrects."""
    from appliance.domain.importers import from_sgd

    app = Appliance(
        schema=from_sgd(TRAINS), db=tmp_path / "m.duckdb", model=_shared_real_engine, settings=_settings(tmp_path)
    )
    corrected = [
        ("Trains from Denver to Reno please", {"from_city": "Denver", "to_city": "Reno"}),  # SmolLM2: to_station
        ("I'm leaving from Boston tomorrow", {"from_city": "Boston"}),
        ("Any trains from Austin?", {"from_city": "Austin"}),
    ]
    for i, (text, values) in enumerate(corrected):
        taught = app.teach(text, {"event_type": "FindTrains", "attributes": values}, session_id=f"t{i}", now=NOW)
        assert {k: v for k, v in taught.attributes.items() if v is not None} == values
    rec = app.record("Find me a train from Phoenix to Tucson", session_id="new", now=NOW)
    assert rec.attributes.get("from_city") == "Phoenix" and rec.attributes.get("from_station") is None
    assert rec.attributes.get("to_city") == "Tucson"
    app.close()


CARS = {
    "service_name": "Cars_9",
    "description": "Rent a car for a few days",
    "slots": [
        {"name": "pickup_city", "description": "City where the rental car is picked up", "is_categorical": False},
        {"name": "pickup_date", "description": "Date the rental starts", "is_categorical": False},
        {"name": "dropoff_date", "description": "Date the car is returned", "is_categorical": False},
        {
            "name": "car_type",
            "description": "Size of the car",
            "is_categorical": True,
            "possible_values": ["Compact", "Standard", "SUV"],
        },
    ],
    "intents": [
        {
            "name": "GetCars",
            "description": "Find rental cars available in a city",
            "is_transactional": False,
            "required_slots": ["pickup_city", "pickup_date", "dropoff_date"],
            "optional_slots": {"car_type": "Standard"},
            "result_slots": [],
        }
    ],
}


def test_a_conversation_stays_with_its_schema_until_it_turns_to_another(_shared_real_engine, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Two imported schemas loaded together: a short answer inside a car rental ("Until the
    14th.") names neither, and belongs to the rental the conversation is about; a message that
    turns to food goes to the restaurants, and the next one about the car comes back."""
    from appliance.domain.importers import from_sgd

    app = Appliance(
        schema=from_sgd(CARS), db=tmp_path / "m.duckdb", model=_shared_real_engine, settings=_settings(tmp_path)
    )
    app.add_schema(from_sgd(SGD_STYLE[0]))
    said = [
        ("I need a rental car in Fresno from the 8th", "Cars_9"),
        ("Until the 14th.", "Cars_9"),
        ("Also find me an Italian restaurant there", "Dining_9"),
        ("For four people at 7 pm", "Dining_9"),
        ("And make the car an SUV", "Cars_9"),
    ]
    got = []
    for i, (text, _) in enumerate(said):
        rec = app.record(text, session_id="trip", now=NOW + timedelta(minutes=i))
        got.append(app.schema_by_id(rec.schema_id).domain)
    assert got == [domain for _, domain in said]
    app.close()
