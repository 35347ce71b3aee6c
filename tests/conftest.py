from __future__ import annotations

import json
import os
import socket
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from appliance.config import PROJECT_ROOT, Settings
from appliance.domain.records import MemoryRecord

SCHEMAS = PROJECT_ROOT / "schemas"


def free_port() -> int:
    """A loopback port no one listens on now (servers under test bind it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def mcp_payload(result: Any) -> Any:
    """An MCP tool result's value (structured content, else its JSON text); an error fails."""
    assert not result.is_error, result.content
    if result.structured_content is not None:
        data = result.structured_content
        return data.get("result", data) if isinstance(data, dict) and set(data) == {"result"} else data
    return json.loads(result.content[0].text)


RECORD_TIME = datetime(2026, 12, 2, tzinfo=UTC)


def make_record(**fields: Any) -> MemoryRecord:
    """A stored-shape record for tests that seed the store without a model; ``fields``
    override the defaults (an ok user_inquiry in session "s")."""
    base: dict[str, Any] = {
        "memory_id": uuid.uuid4().hex,
        "session_id": "s",
        "timestamp": RECORD_TIME,
        "schema_id": "x",
        "status": "ok",
        "confidence": 0.9,
        "source_text": "t",
        "event_type": "user_inquiry",
    }
    return MemoryRecord(**(base | fields))


def record_for(app: Any, etype: str, eid: str | None, **fields: Any) -> MemoryRecord:
    """``make_record`` under the app's schema, every attribute of ``etype`` present
    (None unless given in ``attributes``), as extraction writes them."""
    given = fields.pop("attributes", {})
    attrs = {a.name: given.get(a.name) for a in app.schema.entity(etype).value_attributes}
    return make_record(schema_id=app.schema.schema_id, entity_type=etype, entity_id=eid, attributes=attrs, **fields)


@pytest.fixture
def fake_app(settings):  # type: ignore[no-untyped-def]
    """The customer-service appliance over a FakeEngine, no embedder, a fresh DB."""
    from appliance.api import Appliance
    from appliance.testing import FakeEngine

    a = Appliance(
        schema="customer_service", db=settings.home / "f.duckdb", model=FakeEngine(), settings=settings, embedder=None
    )
    yield a
    a.close()


def stored_draft(rec: MemoryRecord) -> dict[str, Any]:
    """A stored record back in the shape extraction produces, to validate with draft_model."""
    return {
        "event_type": rec.event_type,
        "entity": {"type": rec.entity_type, "id": rec.entity_id, "state": rec.state, "attributes": rec.attributes},
        "relationships": [
            {
                "type": r.type,
                "from_type": r.source_type,
                "from_id": r.source_id,
                "to_type": r.target_type,
                "to_id": r.target_id,
            }
            for r in rec.relationships
        ],
    }


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Settings writing only under tmp_path (grammars included), shipped schemas and models."""
    return Settings.from_env(
        {
            "APPLIANCE_HOME": str(tmp_path),
            "APPLIANCE_GRAMMARS": str(tmp_path / "grammars"),
            "APPLIANCE_SCHEMAS": str(SCHEMAS),
            "APPLIANCE_SEMANTIC": "off",  # unit tests opt in with FakeEmbedder
        }
    )


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--backend",
        choices=("duckdb", "postgres"),
        default=os.environ.get("APPLIANCE_TEST_BACKEND", "duckdb"),
        help="the engine every store of the suite is opened on (postgres: a server the session starts)",
    )


@pytest.fixture(scope="session", autouse=True)
def _store_backend(request):  # type: ignore[no-untyped-def]
    """Under ``--backend postgres``, a store opened at a ``.duckdb`` path is a database of the
    session's PostgreSQL server (``tests/postgres_server.py``), for every fixture scope;
    ``duckdb_only`` tests keep files (``_duckdb_only_keeps_files``)."""
    if request.config.getoption("--backend") != "postgres":
        yield
        return
    import appliance.store as store_package
    from tests import postgres_server

    opened = store_package.open_database

    def on_server(target, read_only=False, create=True):  # type: ignore[no-untyped-def]
        if str(target).endswith(".duckdb") and not postgres_server.KEEP_FILES:
            target = postgres_server.url_for_path(target)
        return opened(target, read_only=read_only, create=create)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(store_package, "open_database", on_server)
        yield


@pytest.fixture(autouse=True)
def _duckdb_only_keeps_files(request):  # type: ignore[no-untyped-def]
    from tests import postgres_server

    postgres_server.KEEP_FILES = request.node.get_closest_marker("duckdb_only") is not None
    yield
    postgres_server.KEEP_FILES = False


@pytest.fixture
def pg_url() -> str:
    """A new, empty database on the session's PostgreSQL server."""
    from tests.postgres_server import fresh_database_url

    return fresh_database_url()


@pytest.fixture(autouse=True)
def _no_real_model_unless_marked(request, monkeypatch):  # type: ignore[no-untyped-def]
    """A test not marked ``real_model`` cannot load a GGUF model (in-process): a slow,
    unmarked end-to-end test is a mistake, and fakes are only for logic that is not the model."""
    if request.node.get_closest_marker("real_model") is None:
        from appliance.model.engine import LlamaCppEngine, check_gguf

        def refuse(self, path, *args, **kwargs):  # type: ignore[no-untyped-def]
            check_gguf(path)  # a bad file is still refused with its own clear error
            raise RuntimeError(f"{request.node.nodeid} loads the real model but is not marked real_model")

        monkeypatch.setattr(LlamaCppEngine, "__init__", refuse)
    yield


@pytest.fixture(scope="session")
def _shared_real_engine():  # type: ignore[no-untyped-def]
    from appliance.model.engine import LlamaCppEngine, resolve_model_path

    return LlamaCppEngine(resolve_model_path("smollm2", PROJECT_ROOT / "models"), n_ctx=2048)


@pytest.fixture
def real_engine(request, _shared_real_engine):  # type: ignore[no-untyped-def]
    """The shipped SmolLM2 model, loaded once per test session; only for tests marked real_model."""
    assert request.node.get_closest_marker("real_model"), f"{request.node.nodeid} must be marked real_model"
    return _shared_real_engine


def notes_recorded(
    engine: Any, home: Path, schema: dict[str, Any], notes: list[str], start: datetime, session: str
) -> tuple[Any, list[MemoryRecord]]:
    """An appliance over a fresh database of ``schema`` (a file-form dict) with ``notes``
    recorded in order in one session, an hour apart from ``start``; and the records."""
    from appliance.api import Appliance
    from appliance.domain.loading import parse_schema

    settings = Settings.from_env({"APPLIANCE_HOME": str(home), "APPLIANCE_GRAMMARS": str(home / "g")})
    app = Appliance(schema=parse_schema(schema), db=home / "notes.duckdb", model=engine, settings=settings)
    records = [app.record(text, session_id=session, now=start + timedelta(hours=i)) for i, text in enumerate(notes)]
    return app, records
