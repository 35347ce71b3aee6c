"""Long steps report progress: the API calls a progress function, the CLI draws it on a
terminal and draws nothing when stderr is not one (scripts read clean output)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from appliance.api import Appliance
from appliance.edges.cli import main, progress

from .conftest import record_for


def _seed(app: Appliance, n: int) -> None:
    for i in range(n):
        app._store(app.schema, record_for(app, "Order", str(1000 + i), source_text=f"order {1000 + i}"))


def test_import_and_export_report_their_stages(fake_app: Appliance, tmp_path: Path) -> None:
    _seed(fake_app, 3)
    seen: list[tuple[str, int, int | None]] = []
    out = tmp_path / "all.jsonl"
    assert fake_app.export(out, progress=lambda *a: seen.append(a)) == 3
    assert seen[-1] == ("exporting", 3, 3)
    lines = out.read_text().splitlines()
    out.write_text("\n".join(lines + ["not json"]) + "\n")
    with Appliance(
        db=tmp_path / "other.duckdb", model=fake_app._engine, settings=fake_app.settings, embedder=None
    ) as other:
        seen.clear()
        n, problems = other.import_jsonl(out, progress=lambda *a: seen.append(a))
    assert n == 3 and len(problems) == 1
    stages = [s for s, _, _ in seen]
    assert stages.index("storing") < stages.index("indexing") and ("storing", 3, 3) in seen
    assert seen[-1] == ("indexing", 1, 1)


def test_compaction_reports_each_entity(fake_app: Appliance) -> None:
    for i in range(3):
        fake_app._store(fake_app.schema, record_for(fake_app, "Order", "4567", source_text=f"order 4567 ({i})"))
        fake_app._store(fake_app.schema, record_for(fake_app, "Order", "4568", source_text=f"order 4568 ({i})"))
    seen: list[tuple[str, int, int | None]] = []
    rows = fake_app.compact("Order", 3, use_model=False, progress=lambda *a: seen.append(a))
    assert len(rows) == 2 and seen == [("compacting", 1, 2), ("compacting", 2, 2)]


def test_bars_draw_on_a_terminal_only(monkeypatch: pytest.MonkeyPatch) -> None:
    from rich.console import Console

    screen = io.StringIO()
    monkeypatch.setattr(progress, "_console", lambda: Console(file=screen, force_terminal=True, width=100))
    with progress.bars() as report:
        report("storing", 5, 10)
    assert "storing" in screen.getvalue()
    plain = io.StringIO()
    monkeypatch.setattr(progress, "_console", lambda: Console(file=plain, force_terminal=False))
    with progress.bars() as report:
        report("storing", 5, 10)
    assert plain.getvalue() == ""


def test_cli_output_stays_clean_when_not_on_a_terminal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APPLIANCE_GRAMMARS", str(tmp_path / "g"))
    monkeypatch.setenv("APPLIANCE_SEMANTIC", "off")
    db = str(tmp_path / "m.duckdb")
    with Appliance(db=db, model="none-needed", embedder=None) as app:
        _seed(app, 2)
    res = CliRunner().invoke(main, ["--db", db, "export", str(tmp_path / "x.jsonl")])
    assert res.exit_code == 0 and res.output == f"exported 2 records to {tmp_path / 'x.jsonl'}\n"
    res = CliRunner().invoke(main, ["--db", db, "db", "status", "--json"])
    data: dict[str, Any] = json.loads(res.output)
    assert data["counts"]["memories"] == 2
