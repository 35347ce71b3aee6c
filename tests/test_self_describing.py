"""A memory holds its schemas: every edge reads it with them, naming others is a clear error,
and a migration switches the stored schema in its own transaction."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import pytest
from click.testing import CliRunner

from appliance.api import Appliance
from appliance.domain.loading import parse_schema
from appliance.domain.schema import MemorySchema
from appliance.edges.cli import main
from appliance.edges.cli.main import _same_schemas
from appliance.errors import SchemaMismatchError
from appliance.testing import FakeEngine

from .conftest import SCHEMAS, record_for

PLANTS = {
    "schema_version": "1.0",
    "domain": "plants",
    "description": "House plants and their care",
    "entities": {"Plant": {"attributes": ["name", "species", "light"], "key": ["name"], "is_root": True}},
    "event_types": [{"name": "watered", "description": "a plant was watered"}],
}


def _open(db: Path, schema: Any = None, **kw: Any) -> Appliance:
    return Appliance(schema=schema, db=db, model=FakeEngine(), embedder=None, **kw)


def test_a_memory_is_read_with_the_schema_it_was_created_with(tmp_path: Path, settings: Any) -> None:
    db = tmp_path / "m.duckdb"
    with _open(db, PLANTS, settings=settings) as app:
        plants_id = app.schema.schema_id
    with _open(db, settings=settings) as app:  # no schema named: the one the memory holds
        assert app.schema.domain == "plants" and app.schema.schema_id == plants_id
        assert app.status()["schemas"] == {"plants": {"schema_id": plants_id, "schema_version": "1.0"}}
    with pytest.raises(SchemaMismatchError) as err:
        _open(db, "customer_service", settings=settings)
    assert "'plants'" in err.value.message and "'customer_service'" in err.value.message
    assert "schema migrate" in err.value.hint
    with _open(db, dict(PLANTS), settings=settings) as app:  # the same schema named again: fine
        assert app.schema.schema_id == plants_id


def test_naming_the_held_schema_and_another_domain_loads_the_other_beside(tmp_path: Path, settings: Any) -> None:
    """`--schema customer_service --schema travel_assistant` on a customer_service memory (the
    README's routing line) loads travel beside it and keeps it; another version of the held
    schema, or leaving it out, is still a mismatch."""
    db = tmp_path / "m.duckdb"
    with _open(db, "customer_service", settings=settings):
        pass
    with _open(db, ["customer_service", "travel_assistant"], settings=settings) as app:
        assert set(app.schemas) == {"customer_service", "travel_assistant"}
    with _open(db, settings=settings) as app:
        assert set(app.schemas) == {"customer_service", "travel_assistant"}
    edited = dict(PLANTS, domain="customer_service")
    with pytest.raises(SchemaMismatchError):
        _open(db, ["customer_service", "travel_assistant", edited], settings=settings)
    with pytest.raises(SchemaMismatchError):
        _open(db, ["travel_assistant"], settings=settings)


def test_a_new_memory_without_a_schema_gets_the_default_and_keeps_it(tmp_path: Path, settings: Any) -> None:
    db = tmp_path / "m.duckdb"
    with _open(db, settings=settings) as app:
        assert app.schema.domain == "customer_service"
    with _open(db, settings=settings) as app:
        assert [h["domain"] for h in app.schema_history()] == ["customer_service"]


def test_several_schemas_are_held_in_order_and_added_ones_kept(tmp_path: Path, settings: Any) -> None:
    db = tmp_path / "m.duckdb"
    with _open(db, ["customer_service", "travel_assistant"], settings=settings) as app:
        app.add_schema(PLANTS)
    with _open(db, settings=settings) as app:
        assert list(app.schemas) == ["customer_service", "travel_assistant", "plants"]
        app.add_schema(PLANTS | {"schema_version": "1.1"}, default=True)
    with _open(db, settings=settings) as app:
        assert app.schema.domain == "plants" and app.schema.schema_version == "1.1"
        assert sorted(app.schemas) == ["customer_service", "plants", "travel_assistant"]
        history = app.schema_history()
    assert [(h["domain"], h["loaded"]) for h in history if h["domain"] == "plants"] == [
        ("plants", False),
        ("plants", True),
    ]


@pytest.mark.duckdb_only  # a file of an older version
def test_a_file_written_before_memories_held_schemas_adopts_the_one_it_is_opened_with(
    tmp_path: Path, settings: Any
) -> None:
    db = tmp_path / "m.duckdb"
    with _open(db, "travel_assistant", settings=settings):
        pass
    con = duckdb.connect(str(db))
    con.execute("DROP TABLE memory_schemas")
    con.execute("UPDATE meta SET value = '6' WHERE key = 'db_version'")
    con.close()
    with _open(db, "travel_assistant", settings=settings) as app:
        assert app.schema.domain == "travel_assistant"
    with _open(db, settings=settings) as app:
        assert app.schema.domain == "travel_assistant"


def _customer_service_v2() -> MemorySchema:
    """The shipped customer_service schema as version 2.0 (every stored record still fits)."""
    raw = json.loads((SCHEMAS / "customer_service.json").read_text())
    return parse_schema(raw | {"schema_version": "2.0"})


def test_a_migration_and_its_revert_switch_the_stored_schema(tmp_path: Path, settings: Any) -> None:
    db = tmp_path / "m.duckdb"
    with _open(db, "customer_service", settings=settings) as app:
        app._store(app.schema, record_for(app, "Order", "4567", source_text="order 4567"))
        done = app.migrate(_customer_service_v2(), {})
    with _open(db, settings=settings) as app:
        assert app.schema.schema_version == "2.0"
        with pytest.raises(SchemaMismatchError):
            _open(db, "customer_service", settings=settings, create=False)
        app.revert_migration(done["migration_id"])
    with _open(db, "customer_service", settings=settings) as app:
        assert app.schema.schema_version == "1.3"


def test_a_failed_migration_leaves_the_stored_schema(tmp_path: Path, settings: Any) -> None:
    db = tmp_path / "m.duckdb"
    with _open(db, "customer_service", settings=settings) as app:
        app._store(app.schema, record_for(app, "Order", "4567", source_text="order 4567"))

        def fail(con: Any) -> None:
            raise RuntimeError("disk went away")

        with pytest.raises(RuntimeError):
            app.lifecycle.migrate(app.schema, _customer_service_v2(), {}, then=fail)
    with _open(db, settings=settings) as app:
        assert app.schema.schema_version == "1.3" and app.list_migrations() == []


def test_the_cli_needs_the_schema_only_to_create(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APPLIANCE_GRAMMARS", str(tmp_path / "g"))
    monkeypatch.setenv("APPLIANCE_SEMANTIC", "off")
    schema_file = tmp_path / "plants.json"
    schema_file.write_text(json.dumps(PLANTS))
    db = str(tmp_path / "m.duckdb")
    run = lambda *a: CliRunner().invoke(main, ["--db", db, *a])  # noqa: E731
    q = '{"entity_type":"Plant","filters":[{"field":"species","op":"eq","value":"fern"}]}'
    made = run("--schema", str(schema_file), "--create", "query", q)
    assert made.exit_code == 0, made.output
    later = run("query", q)  # no --schema: the memory's own
    assert later.exit_code == 0 and "sql: SELECT" in later.output, later.output
    shown = run("schema", "show", "--json")
    assert shown.exit_code == 0 and list(json.loads(shown.output)) == ["plants"]
    assert "plants 1.0" in run("schema", "history").output
    wrong = run("--schema", "customer_service", "query", q, "--json")
    assert wrong.exit_code == 1
    err = json.loads(wrong.output)
    assert err["code"] == "schema_mismatch" and "'plants'" in err["error"] and "schema migrate" in err["hint"]


class _Server:
    url = "http://127.0.0.1:1"

    def __init__(self, loaded: dict[str, str]) -> None:
        self.loaded = loaded

    def call(self, method: str, path: str) -> dict[str, Any]:
        assert (method, path) == ("GET", "/schema")
        return {"loaded": self.loaded}


def test_the_warm_cli_refuses_a_schema_the_running_server_does_not_hold(settings: Any) -> None:
    from appliance.api import resolve_schema

    travel = resolve_schema("travel_assistant", settings.schema_dir).schema_id
    _same_schemas(_Server({"travel_assistant": travel}), ["travel_assistant"], settings)
    with pytest.raises(SchemaMismatchError, match="travel_assistant.*customer_service"):
        _same_schemas(_Server({"travel_assistant": travel}), ["customer_service"], settings)
