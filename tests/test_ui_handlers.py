from __future__ import annotations

import json

from appliance.api import Appliance
from appliance.testing import FakeEngine
from appliance.ui import build_ui, chat_turn, is_question, records_table, validate_schema_text

from .conftest import SCHEMAS


def test_question_routing() -> None:
    assert is_question("where is my order?")
    assert is_question("我的订单怎么样了")
    assert not is_question("I bought a phone, order 4567")


def test_schema_text_validation_messages() -> None:
    assert validate_schema_text((SCHEMAS / "customer_service.json").read_text()).startswith("✅")
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
