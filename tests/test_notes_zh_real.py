"""A Chinese-named everyday-notes schema (entity, attributes, events and enum values named in
Chinese), written here and not taken from any benchmark, end to end with the shipped SmolLM2 model:
a note's values come out typed, a negation decides the yes/no attribute, the thing's name is its
key, and a later note naming it updates the same entity."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from .conftest import notes_recorded

pytestmark = pytest.mark.real_model

APPLIANCES = {
    "schema_version": "1.0",
    "domain": "家电",
    "languages": ["zh", "en"],
    "description": "家里的电器：每台电器、买的时候的情况、坏了和修好的记录。",
    "entities": {
        "电器": {
            "description": "家里的一台电器，用我对它的叫法来称呼（洗碗机、空调）",
            "key": ["名称"],
            "attributes": [
                {"name": "名称", "kind": "string", "description": "我对这台电器的叫法，比如洗碗机、空调"},
                {"name": "品牌", "kind": "string", "description": "电器的牌子，比如西门子、格力"},
                {
                    "name": "房间",
                    "kind": "enum",
                    "description": "电器放在哪个房间",
                    "values": [
                        {"value": "厨房", "aliases": ["kitchen"]},
                        {"value": "客厅", "aliases": ["living room"]},
                        {"value": "卧室", "aliases": ["bedroom"]},
                    ],
                },
                {"name": "价格", "kind": "number", "description": "买的时候花了多少钱", "unit": ["元", "块"]},
                {"name": "在保修期", "kind": "boolean", "description": "电器是否还在保修期内", "aliases": ["保修"]},
            ],
        }
    },
    "event_types": [
        {
            "name": "买了电器",
            "entity": "电器",
            "description": "买了一台新电器：牌子、放哪、花了多少钱",
            "attributes": ["名称", "品牌", "房间", "价格"],
        },
        {
            "name": "电器坏了",
            "entity": "电器",
            "description": "一台电器坏了、出了毛病",
            "attributes": ["名称", "在保修期"],
        },
        {"name": "修好了", "entity": "电器", "description": "一台电器修好了", "attributes": ["名称"]},
    ],
}
START = datetime(2026, 6, 1, 9, tzinfo=UTC)
NOTES = [
    "新买了一台洗碗机，西门子的，放在厨房，花了3999元",
    "客厅的空调坏了，不制冷了，已经不在保修期了",
    "洗碗机不出水了",
]


@pytest.fixture(scope="module")
def appliances(_shared_real_engine, tmp_path_factory):  # type: ignore[no-untyped-def]
    home = tmp_path_factory.mktemp("zh-notes")
    app, records = notes_recorded(_shared_real_engine, home, APPLIANCES, NOTES, START, "我")
    yield app, records
    app.close()


def test_a_chinese_note_fills_typed_values_and_its_event(appliances) -> None:  # type: ignore[no-untyped-def]
    _, records = appliances
    bought, broke, again = records
    assert bought.event_type == "买了电器" and bought.entity_type == "电器"
    assert bought.attributes["房间"] == "厨房" and bought.attributes["价格"] == 3999.0
    assert broke.event_type == "电器坏了" and broke.attributes["房间"] == "客厅"
    assert again.event_type == "电器坏了"


def test_a_chinese_negation_decides_the_yes_no_attribute(appliances) -> None:  # type: ignore[no-untyped-def]
    _, records = appliances
    assert records[1].attributes["在保修期"] is False  # "已经不在保修期了"


def test_the_things_name_is_its_key(appliances) -> None:  # type: ignore[no-untyped-def]
    _, records = appliances
    assert records[2].attributes["名称"] == "洗碗机" and records[2].entity_id == "洗碗机"
