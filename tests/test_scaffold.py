"""`appliance schema new`: a first schema from a few answers loads, guesses kinds from names, and
names what is wrong in an answer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from appliance.domain.loading import parse_schema
from appliance.domain.scaffold import scaffold
from appliance.edges.cli import main
from appliance.errors import SchemaError


def test_a_scaffold_loads_with_kinds_keys_and_enums() -> None:
    data = scaffold(
        "plants",
        "",
        ["Plant: nickname, species*, height (number), room (enum: kitchen | living room), phone"],
        ["watered", "repotted: Plant"],
    )
    schema = parse_schema(data)
    plant = schema.entity("Plant")
    kinds = {a.name: a.kind for a in plant.attributes}
    assert kinds["height"] == "number" and kinds["room"] == "enum" and kinds["species"] == "string"
    assert plant.key == ("species",)  # the starred one, not the first
    assert [v.value for v in plant.attribute("room").values] == ["kitchen", "living room"]
    assert plant.attribute("phone").format == "phone"  # guessed from the name
    assert [e.name for e in schema.event_types] == ["watered", "repotted"]


def test_a_chinese_scaffold_loads() -> None:
    schema = parse_schema(scaffold("家电", "家里的电器", ["电器: 名称, 价格, 房间"], ["坏了"], ("zh", "en")))
    assert schema.entity("电器").key == ("名称",) and schema.event_types[0].entity == "电器"


@pytest.mark.parametrize(
    ("entity", "event", "says"),
    [
        ("Plant", "watered", "lists no attributes"),
        ("Plant: height (size)", "watered", "unknown kind"),
        ("Plant: room (enum)", "watered", "needs its values"),
        ("Plant: name", "watered: Pot", "no entity here"),
        ("1Plant: name", "watered", "is not a name"),
    ],
)
def test_a_bad_answer_is_named(entity: str, event: str, says: str) -> None:
    with pytest.raises(SchemaError, match=says):
        scaffold("plants", "", [entity], [event])


def test_schema_new_from_options_and_from_prompts(tmp_path: Path) -> None:
    target = tmp_path / "plants.json"
    res = CliRunner().invoke(
        main,
        ["schema", "new", str(target), "--domain", "plants", "--entity", "Plant: name, species", "--event", "watered"],
    )
    assert res.exit_code == 0, res.output
    assert parse_schema(json.loads(target.read_text())).domain == "plants"
    again = CliRunner().invoke(main, ["schema", "new", str(target), "--domain", "x", "--entity", "A: b"])
    assert again.exit_code == 1 and "exists" in again.output
    asked = tmp_path / "asked.json"
    answers = "books\nbooks I read\nBook: title, author, price\n\nfinished: Book\n\n"
    res = CliRunner().invoke(main, ["schema", "new", str(asked)], input=answers)
    assert res.exit_code == 0, res.output
    schema = parse_schema(json.loads(asked.read_text()))
    assert schema.entity("Book").attribute("price").kind == "number" and schema.event_types[0].name == "finished"
    valid = CliRunner().invoke(main, ["schema", "validate", str(asked)])
    assert valid.exit_code == 0 and "valid" in valid.output
