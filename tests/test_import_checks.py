"""An import stores only what the schema allows, keeps what an export holds (compaction summaries
too), and tells a script when lines were refused. Over a FakeEngine: no extraction is involved."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from appliance.domain.records import SUMMARY_EVENT, Relationship
from appliance.edges.cli import main

from .conftest import record_for


def _lines(tmp_path: Path, records: list[Any], raw: list[str] = ()) -> Path:  # type: ignore[assignment]
    path = tmp_path / "in.jsonl"
    path.write_text("".join(r.model_dump_json() + "\n" for r in records) + "".join(x + "\n" for x in raw))
    return path


def test_undeclared_relationships_are_refused(fake_app: Any, tmp_path: Path) -> None:
    good = record_for(fake_app, "Order", "1001", attributes={"amount": 20.0})
    alien = record_for(fake_app, "Order", "1002").model_copy(
        update={
            "relationships": [
                Relationship(type="EATS", source_type="Alien", source_id="A1", target_type="Order", target_id="1002")
            ]
        }
    )
    n, problems = fake_app.import_jsonl(_lines(tmp_path, [good, alien]))
    assert n == 1 and len(problems) == 1 and "not in the schema" in problems[0]
    assert [e.type for e in fake_app.list_entities()] == ["Order"]  # no Alien came alive


@pytest.mark.parametrize("value", ["true", "1e400", "NaN", '"12 dollars"'])
def test_a_number_attribute_takes_only_a_finite_number(fake_app: Any, tmp_path: Path, value: str) -> None:
    rec = record_for(fake_app, "Order", "1003", attributes={"amount": 1.0})
    line = rec.model_dump_json().replace('"amount":1.0', f'"amount":{value}')
    n, problems = fake_app.import_jsonl(_lines(tmp_path, [], [line]))
    assert n == 0 and len(problems) == 1


def test_export_then_import_keeps_compaction_summaries(fake_app: Any, tmp_path: Path, settings: Any) -> None:
    from appliance.api import Appliance
    from appliance.testing import FakeEngine

    summary = record_for(fake_app, "Order", "1004", event_type=SUMMARY_EVENT, source_text="Order 1004: shipped")
    fake_app.store.write_many([record_for(fake_app, "Order", "1004"), summary])
    out = tmp_path / "out.jsonl"
    assert fake_app.export_jsonl(out) == 2
    other = Appliance(
        schema="customer_service", db=tmp_path / "o.duckdb", model=FakeEngine(), settings=settings, embedder=None
    )
    try:
        assert other.import_jsonl(out) == (2, [])
        assert {r.event_type for r in other.list_records()} >= {SUMMARY_EVENT}
    finally:
        other.close()


def test_the_cli_import_exits_non_zero_when_lines_were_refused(fake_app: Any, tmp_path: Path, monkeypatch: Any) -> None:
    path = _lines(tmp_path, [record_for(fake_app, "Order", "1005")], ["{not json"] * 30)
    db = tmp_path / "cli.duckdb"
    res = CliRunner().invoke(main, ["--db", str(db), "--create", "--schema", "customer_service", "import", str(path)])
    assert res.exit_code == 1, res.output
    assert "imported 1 records, 30 bad lines" in res.output
