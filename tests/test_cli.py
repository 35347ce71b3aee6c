from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from appliance.edges.cli import main

from .conftest import SCHEMAS, make_record


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
    monkeypatch.setenv("APPLIANCE_GRAMMARS", str(tmp_path / "g"))
    shipped = CliRunner().invoke(main, ["schema", "compile", "customer_service", "--json"])
    assert shipped.exit_code == 0 and json.loads(shipped.output)["from_cache"]  # shipped, read-only
    own = json.loads((Path(__file__).parents[1] / "schemas" / "customer_service.json").read_text())
    own["domain"] = "my_own_service"
    path = tmp_path / "own.json"
    path.write_text(json.dumps(own))
    first = CliRunner().invoke(main, ["schema", "compile", str(path), "--json"])
    second = CliRunner().invoke(main, ["schema", "compile", str(path), "--json"])
    assert first.exit_code == 0 and not json.loads(first.output)["from_cache"], first.output
    assert json.loads(second.output)["from_cache"]
    assert list((tmp_path / "g").iterdir())  # compiled into the user's cache, not the checkout


def test_query_command_without_model(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("APPLIANCE_GRAMMARS", str(tmp_path / "g"))
    db = str(tmp_path / "m.duckdb")
    res = CliRunner().invoke(
        main,
        ["--db", db, "--create", "query", '{"entity_type":"Order","filters":[{"field":"id","op":"eq","value":"1"}]}'],
    )
    assert res.exit_code == 0, res.output
    assert "sql: SELECT" in res.output
    bad = CliRunner().invoke(
        main,
        [
            "--db",
            db,
            "--create",
            "query",
            '{"entity_type":"Order","filters":[{"field":"x;DROP","op":"eq","value":"1"}]}',
        ],
    )
    assert bad.exit_code == 1 and "unknown field" in bad.output and "Traceback" not in bad.output


def test_missing_model_is_a_clear_error(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("APPLIANCE_GRAMMARS", str(tmp_path / "g"))
    res = CliRunner().invoke(
        main, ["--db", str(tmp_path / "m.duckdb"), "--create", "--model", "nope.gguf", "record", "hi"]
    )
    assert res.exit_code == 1 and "not found" in res.output and "hint" in res.output


def test_corrupt_model_file_is_refused(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("APPLIANCE_GRAMMARS", str(tmp_path / "g"))
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 10)
    res = CliRunner().invoke(
        main, ["--db", str(tmp_path / "m.duckdb"), "--create", "--model", str(bad), "record", "hi"]
    )
    assert res.exit_code == 1 and "not a GGUF" in res.output


def test_serve_refuses_public_bind_without_a_key(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    for name in ("APPLIANCE_TOKEN", "APPLIANCE_TOKEN_FILE", "APPLIANCE_KEYS_FILE"):
        monkeypatch.delenv(name, raising=False)
    res = CliRunner().invoke(main, ["serve", "--host", "0.0.0.0", "--auth", "me:pw"])
    assert res.exit_code == 1 and "APPLIANCE_TOKEN" in res.output


def test_lifecycle_commands_without_model(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Seed through the API (no model), then compact / forget / migrate / revert from the CLI."""
    from datetime import UTC, datetime, timedelta

    from appliance.api import Appliance

    monkeypatch.setenv("APPLIANCE_GRAMMARS", str(tmp_path / "g"))
    monkeypatch.setenv("APPLIANCE_SEMANTIC", "off")
    db = str(tmp_path / "m.duckdb")
    with Appliance(db=db, model="none-needed", embedder=None) as app:
        for i in range(3):
            app._store(
                app.schema,
                make_record(
                    timestamp=datetime.now(UTC) - timedelta(days=400 * i),
                    schema_id=app.schema.schema_id,
                    source_text=f"where is order 4567? ({i})",
                    entity_type="Order",
                    entity_id="4567",
                ),
            )
    run = lambda *a: CliRunner().invoke(main, ["--db", db, *a])  # noqa: E731
    dry = run("compact", "--entity-type", "Order", "--min-records", "3", "--dry-run")
    assert dry.exit_code == 0 and "would summarise Order 4567 (3 memories)" in dry.output, dry.output
    done = run("compact", "--entity-type", "Order", "--min-records", "3", "--no-model", "--json")
    assert done.exit_code == 0 and json.loads(done.output)[0]["summary"].startswith("Order 4567")
    preview = run("forget")
    assert preview.exit_code == 0 and preview.output.count("would forget") == 2 and "max_age_days=365" in preview.output
    assert "would forget" in run("forget").output  # still there: the preview deleted nothing
    applied = run("forget", "--apply", "--json")
    assert applied.exit_code == 0 and len(json.loads(applied.output)) == 2
    assert run("forget").output.strip() == "no policy selects any record"
    assert run("db", "merges").output.strip() == "no merges"
    raw = json.loads((SCHEMAS / "customer_service.json").read_text())
    raw["schema_version"] = "2.0"
    for ev in raw["event_types"]:
        if ev["name"] == "user_inquiry":
            ev["name"] = "question_asked"
    for ex in raw["examples"]:
        if ex["record"]["event_type"] == "user_inquiry":
            ex["record"]["event_type"] = "question_asked"
    new = tmp_path / "cs2.json"
    new.write_text(json.dumps(raw))
    refused = run("schema", "migrate", str(new), "--dry-run")
    assert refused.exit_code == 0 and "refused because" in refused.output
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"rename_event_types": {"user_inquiry": "question_asked"}}))
    migrated = run("schema", "migrate", str(new), "--spec", str(spec), "--json")
    assert migrated.exit_code == 0, migrated.output
    mid = json.loads(migrated.output)["migration_id"]
    assert mid in run("schema", "migrations").output
    reverted = run("schema", "revert", mid)
    assert reverted.exit_code == 0 and "back at 1.3" in reverted.output
    assert "(reverted)" in run("schema", "migrations").output
    again = run("schema", "revert", mid)
    assert again.exit_code == 1 and "already reverted" in again.output


SGD_SERVICE = {
    "service_name": "Parking_1",
    "description": "Find and pay for parking",
    "slots": [
        {"name": "garage", "description": "Name of the garage", "is_categorical": False, "possible_values": []},
        {
            "name": "covered",
            "description": "Whether it is covered",
            "is_categorical": True,
            "possible_values": ["True", "False"],
        },
        {"name": "hours", "description": "Number of hours", "is_categorical": True, "possible_values": ["1", "2", "3"]},
    ],
    "intents": [
        {
            "name": "PayParking",
            "description": "Pay for a parking spot",
            "is_transactional": True,
            "required_slots": ["garage", "hours"],
            "optional_slots": {"covered": "dontcare"},
            "result_slots": [],
        }
    ],
}


def test_schema_import_writes_loadable_schemas(tmp_path) -> None:  # type: ignore[no-untyped-def]
    src = tmp_path / "sgd.json"
    src.write_text(json.dumps([SGD_SERVICE]))
    res = CliRunner().invoke(main, ["schema", "import", str(src), "--out", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    written = tmp_path / "out" / "Parking_1.json"
    data = json.loads(written.read_text())
    attrs = {a["name"]: a for e in data["entities"].values() for a in e["attributes"]}
    assert attrs["covered"]["kind"] == "boolean" and attrs["garage"]["description"] == "Name of the garage"
    assert data["event_types"][0]["commits"] is True
    ok = CliRunner().invoke(main, ["schema", "validate", str(written)])
    assert ok.exit_code == 0, ok.output
    again = CliRunner().invoke(main, ["schema", "import", str(src), "--out", str(tmp_path / "out")])
    assert again.exit_code != 0 and "--force" in again.output  # never overwrites silently
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    refused = CliRunner().invoke(main, ["schema", "import", str(bad)])
    assert refused.exit_code != 0 and "not valid JSON" in refused.output and "Traceback" not in refused.output


def test_record_refuses_a_bad_time(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("APPLIANCE_HOME", str(tmp_path))
    res = CliRunner().invoke(main, ["--db", str(tmp_path / "m.duckdb"), "record", "hello", "--at", "yesterday-ish"])
    assert res.exit_code != 0 and "ISO 8601" in res.output


def test_json_errors_are_json_with_a_code_and_a_hint(tmp_path) -> None:  # type: ignore[no-untyped-def]
    res = CliRunner().invoke(main, ["--db", str(tmp_path / "none.duckdb"), "recall", "anything?", "--json"])
    assert res.exit_code == 1
    err = json.loads(res.output)
    assert err["code"] == "store" and "no database" in err["error"] and "--create" in err["hint"]
    plain = CliRunner().invoke(main, ["--db", str(tmp_path / "none.duckdb"), "recall", "anything?"])
    assert plain.exit_code == 1 and plain.output.startswith("Error: no database")
