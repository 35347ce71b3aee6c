"""An everyday-notes schema (keys, kinds, units, aliases, an enum and a yes/no attribute), written
here and not taken from any benchmark, end to end with the shipped SmolLM2 model and the shipped
encoders: values stated in a note are typed and grounded, a negation decides the yes/no attribute,
and recall finds the note by meaning."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from .conftest import notes_recorded

pytestmark = pytest.mark.real_model

PLANTS = {
    "schema_version": "1.0",
    "domain": "houseplants",
    "languages": ["en", "zh"],
    "description": "My houseplants: each plant I keep, known by the name I gave it, and what I do for it.",
    "entities": {
        "Plant": {
            "description": "one of my plants, known by the name I call it",
            "key": ["name"],
            "aliases": ["plant", "植物", "盆栽"],
            "attributes": [
                {"name": "name", "kind": "string", "description": "the name I call the plant by", "format": "name"},
                {"name": "species", "kind": "string", "description": "what kind of plant it is, e.g. monstera, fern"},
                {
                    "name": "room",
                    "kind": "enum",
                    "description": "the room it stands in",
                    "values": [
                        {"value": "kitchen", "aliases": ["厨房"]},
                        {"value": "bedroom", "aliases": ["卧室"]},
                        {"value": "living room", "aliases": ["lounge", "客厅"]},
                    ],
                },
                {
                    "name": "height",
                    "kind": "number",
                    "description": "how tall it is in centimetres",
                    "unit": ["cm", "厘米"],
                },
                {
                    "name": "healthy",
                    "kind": "boolean",
                    "description": "whether the plant is doing well",
                    "aliases": ["thriving", "doing well", "长得好"],
                },
            ],
        }
    },
    "event_types": [
        {
            "name": "plant_info",
            "entity": "Plant",
            "description": "something about one of my plants: what it is, where it stands, how tall, how it is doing",
            "attributes": ["name", "species", "room", "height", "healthy"],
        },
        {"name": "watered", "entity": "Plant", "description": "I watered a plant", "attributes": ["name"]},
    ],
}
START = datetime(2026, 5, 4, 9, tzinfo=UTC)
NOTES = [
    "Fernando is my Boston fern, he lives in the bedroom and is about 40cm tall.",
    "Fernando isn't doing well, the leaves are going brown.",
    "Watered Olive this morning.",
    "Olive is thriving, now 120 cm tall.",
]


@pytest.fixture(scope="module")
def plants(_shared_real_engine, tmp_path_factory):  # type: ignore[no-untyped-def]
    app, records = notes_recorded(_shared_real_engine, tmp_path_factory.mktemp("plants"), PLANTS, NOTES, START, "me")
    yield app, records
    app.close()


def test_a_note_fills_typed_values_it_states(plants) -> None:  # type: ignore[no-untyped-def]
    _, records = plants
    first = records[0]
    assert first.event_type == "plant_info" and first.entity_type == "Plant"
    assert first.attributes["room"] == "bedroom" and first.attributes["height"] == 40.0
    assert records[2].event_type == "watered"
    assert records[3].attributes["height"] == 120.0


def test_a_negation_decides_the_yes_no_attribute(plants) -> None:  # type: ignore[no-untyped-def]
    _, records = plants
    assert records[1].attributes["healthy"] is False  # "isn't doing well"
    assert records[3].attributes["healthy"] is True  # "thriving", an alias


def test_recall_finds_a_note_by_meaning(plants) -> None:  # type: ignore[no-untyped-def]
    app, records = plants
    res = app.recall("Which of my plants is struggling?", session_id="me", now=START + timedelta(days=1))
    assert records[1].memory_id in [m.memory.memory_id for m in res.memories[:3]], res.context


def test_a_plants_name_is_its_key_and_a_later_note_updates_it(plants) -> None:  # type: ignore[no-untyped-def]
    app, records = plants
    assert [records[i].entity_id for i in (0, 1, 3)] == ["Fernando", "Fernando", "Olive"]
    fernando = app.get_entity("me", "Plant", "Fernando")
    assert fernando is not None and fernando.version >= 2  # the second note updated the first's plant
