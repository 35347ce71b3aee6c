from __future__ import annotations

import json

import click
import pytest
from click.testing import CliRunner

from appliance.cli import main

from .conftest import SCHEMAS


def _commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = []
    for name, cmd in group.commands.items():
        out.append((*prefix, name))
        if isinstance(cmd, click.Group):
            out += _commands(cmd, (*prefix, name))
    return out


@pytest.mark.parametrize("path", _commands(main))
def test_every_command_has_help(path: tuple[str, ...]) -> None:
    res = CliRunner().invoke(main, [*path, "--help"])
    assert res.exit_code == 0
    cmd: click.Command = main
    for p in path:
        cmd = cmd.commands[p]  # type: ignore[attr-defined]
    assert cmd.help and cmd.help.strip()


def test_schema_validate_good_and_bad(tmp_path) -> None:  # type: ignore[no-untyped-def]
    ok = CliRunner().invoke(main, ["schema", "validate", str(SCHEMAS / "customer_service.json"), "--json"])
    assert ok.exit_code == 0 and json.loads(ok.output)["valid"]
    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps(
            {"schema_version": "1", "domain": "d", "entities": {"A": {"attributes": ["a b"]}}, "event_types": ["e"]}
        )
    )
    res = CliRunner().invoke(main, ["schema", "validate", str(bad)])
    assert res.exit_code == 1 and "entities.A.attributes" in res.output


def test_schema_compile_reports_cache(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("APPLIANCE_GRAMMARS", str(tmp_path))
    first = CliRunner().invoke(main, ["schema", "compile", "customer_service", "--json"])
    second = CliRunner().invoke(main, ["schema", "compile", "customer_service", "--json"])
    assert first.exit_code == 0 and not json.loads(first.output)["from_cache"]
    assert json.loads(second.output)["from_cache"]


def test_query_command_without_model(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("APPLIANCE_GRAMMARS", str(tmp_path / "g"))
    db = str(tmp_path / "m.duckdb")
    res = CliRunner().invoke(
        main, ["--db", db, "query", '{"entity_type":"Order","filters":[{"field":"id","op":"eq","value":"1"}]}']
    )
    assert res.exit_code == 0, res.output
    assert "sql: SELECT" in res.output
    bad = CliRunner().invoke(
        main, ["--db", db, "query", '{"entity_type":"Order","filters":[{"field":"x;DROP","op":"eq","value":"1"}]}']
    )
    assert bad.exit_code == 1 and "unknown field" in bad.output and "Traceback" not in bad.output


def test_missing_model_is_a_clear_error(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("APPLIANCE_GRAMMARS", str(tmp_path / "g"))
    res = CliRunner().invoke(main, ["--db", str(tmp_path / "m.duckdb"), "--model", "nope.gguf", "record", "hi"])
    assert res.exit_code == 1 and "not found" in res.output and "hint" in res.output


def test_corrupt_model_file_is_refused(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("APPLIANCE_GRAMMARS", str(tmp_path / "g"))
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 10)
    res = CliRunner().invoke(main, ["--db", str(tmp_path / "m.duckdb"), "--model", str(bad), "record", "hi"])
    assert res.exit_code == 1 and "not a GGUF" in res.output


def test_serve_refuses_public_bind_without_auth() -> None:
    res = CliRunner().invoke(main, ["serve", "--host", "0.0.0.0"])
    assert res.exit_code == 1 and "--auth" in res.output
