"""The trust findings, one test (or more) each: what a user stopping, importing, backing up or
attacking the appliance must never get. Fake model where the model is not what is tested; the
SIGTERM and crash tests with the shipped model are in ``test_trust_real.py``."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from appliance.api import Appliance
from appliance.config import PROJECT_ROOT
from appliance.edges.access import AccessPolicy, Grant, load_keys
from appliance.edges.cli.main import main
from appliance.edges.http import build_http, guarded
from appliance.errors import InputError, StoreError
from appliance.testing import FakeEngine

from .conftest import make_record

ALICE = "alice-key-0123456789"
ADMIN = "admin-key-0123456789"
POLICY = AccessPolicy({ALICE: Grant("alice", ("alice", "alice-*")), ADMIN: Grant("ops", admin=True)})


@pytest.fixture
def app(settings):  # type: ignore[no-untyped-def]
    a = Appliance(db=settings.home / "m.duckdb", model=FakeEngine(preferences={"Order": 5.0}), settings=settings)
    yield a
    a.close()


def client(app: Appliance, policy: AccessPolicy | None = None, host: str = "localhost") -> TestClient:
    return TestClient(guarded(build_http(app, policy or AccessPolicy()), app), base_url=f"http://{host}")


def as_(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


# --- 2. sessions are an access boundary -------------------------------------------------------
def test_a_session_key_cannot_reach_other_sessions(app: Appliance) -> None:
    c = client(app, POLICY)
    bob = c.post("/record", json={"text": "card ends 4242, order 55501", "session_id": "bob"}, headers=as_(ADMIN))
    mine = c.post("/record", json={"text": "order 4567 is late", "session_id": "alice"}, headers=as_(ALICE))
    assert bob.status_code == 200 and mine.status_code == 200
    bob_id = bob.json()["memory_id"]
    cross = {"query": {"entity_type": "Order", "all_sessions": True}, "session_id": "alice"}
    assert c.post("/query", json=cross, headers=as_(ALICE)).status_code == 403
    assert c.post("/record", json={"text": "hi", "session_id": "bob"}, headers=as_(ALICE)).status_code == 403
    for path in ("/memories", "/entities", "/merges"):
        refused = c.get(path, headers=as_(ALICE))
        assert refused.status_code == 403 and refused.json()["hint"], path
        assert c.get(path, params={"session_id": "bob"}, headers=as_(ALICE)).status_code == 403
    own = c.get("/memories", params={"session_id": "alice"}, headers=as_(ALICE)).json()
    assert [m["session_id"] for m in own] == ["alice"]
    assert all(e["session_id"] == "alice" for e in c.get("/entities?session_id=alice", headers=as_(ALICE)).json())
    assert c.get(f"/memories/{bob_id}", headers=as_(ALICE)).status_code == 404  # not even named
    assert c.delete(f"/memories/{bob_id}", headers=as_(ALICE)).status_code == 404
    assert c.post("/forget", json={"apply": True}, headers=as_(ALICE)).status_code == 403
    assert c.post("/compact", json={}, headers=as_(ALICE)).status_code == 403
    assert c.post("/sessions/bob/end", headers=as_(ALICE)).status_code == 403
    assert c.post("/sessions/alice-never/end", headers=as_(ALICE)).status_code == 404  # never existed
    assert c.get("/backup", headers=as_(ALICE)).status_code == 403
    # the admin key may do what the session key may not
    everyone = c.get("/memories", headers=as_(ADMIN)).json()
    assert {m["session_id"] for m in everyone} == {"alice", "bob"}
    assert c.post("/query", json=cross, headers=as_(ADMIN)).status_code == 200
    assert app.get_record(bob_id) is not None  # nothing of bob's changed


def test_keys_file_is_checked(tmp_path: Path) -> None:
    good = tmp_path / "keys.json"
    good.write_text(json.dumps({"keys": [{"name": "a", "token": ALICE, "sessions": ["alice-*"]}]}))
    grant = load_keys(good)[ALICE]
    assert grant.may_use("alice-1") and not grant.may_use("alice") and not grant.admin
    short = tmp_path / "short.json"
    short.write_text(json.dumps({"keys": [{"token": "abc"}]}))
    with pytest.raises(InputError, match="at least 16"):
        load_keys(short)


# --- 3. DNS rebinding ------------------------------------------------------------------------
def test_a_foreign_host_header_is_refused(app: Appliance) -> None:
    app.record("order 4567 is late", session_id="s")
    evil = client(app, host="attacker.example")
    r = evil.get("/memories")
    assert r.status_code == 421 and "4567" not in r.text and r.json()["error"] == "host not allowed"
    assert client(app, host="127.0.0.1:8765").get("/memories").status_code == 200
    with pytest.raises(WebSocketDisconnect) as closed:  # the WebSocket upgrade (Gradio's stream) too
        with evil.websocket_connect("/queue/join"):
            pass
    assert closed.value.code == 1008


# --- 6. one error contract, a body limit, invalid Unicode -------------------------------------
def test_every_error_is_json_with_a_hint_and_never_echoes_input(app: Appliance) -> None:
    c = client(app)
    surrogate = c.post(
        "/record",
        content=b'{"text": "order \\ud800 12", "session_id": "s"}',
        headers={"content-type": "application/json"},
    )
    assert surrogate.status_code == 400 and set(surrogate.json()) == {"error", "hint"}
    bad_bytes = c.post("/record", content=b'{"text": "\xff\xfe"}', headers={"content-type": "application/json"})
    assert bad_bytes.status_code == 400
    marker = "ECHO-ME-" * 50
    wrong = c.post("/record", json={"txt": marker})
    assert wrong.status_code == 400 and set(wrong.json()) == {"error", "hint"} and marker not in wrong.text
    assert "text" in wrong.json()["error"]
    assert c.get("/nope").json()["error"] and c.get("/nope").status_code == 404
    assert c.delete("/memories/../../etc/passwd").status_code in (400, 404)
    assert c.get("/memories/not-an-id").status_code == 400


def test_a_body_over_the_limit_is_refused_before_it_is_read(app: Appliance, settings) -> None:  # type: ignore[no-untyped-def]
    c = client(app)
    big = json.dumps({"text": "x" * (settings.max_body_bytes + 10)}).encode()
    r = c.post("/record", content=big, headers={"content-type": "application/json"})
    assert r.status_code == 413 and len(r.content) < 300

    def chunks():  # type: ignore[no-untyped-def]  # no Content-Length: counted while read
        for _ in range(settings.max_body_bytes // 4096 + 2):
            yield b"x" * 4096

    r2 = c.post("/record", content=chunks(), headers={"content-type": "application/json"})
    assert r2.status_code == 413
    assert app.list_records() == []


# --- 7. idempotency and concurrency -----------------------------------------------------------
def test_a_retried_record_returns_the_stored_one(app: Appliance) -> None:
    c = client(app)
    body = {"text": "order 4567 is late", "session_id": "s", "request_id": "req-1"}
    first, retry = c.post("/record", json=body).json(), c.post("/record", json=body).json()
    assert first["memory_id"] == retry["memory_id"] and len(app.list_records()) == 1
    other = c.post("/record", json={**body, "request_id": "req-2"}).json()
    assert other["memory_id"] != first["memory_id"] and len(app.list_records()) == 2


def test_concurrent_requests_are_answered_as_each_finishes(app: Appliance) -> None:
    """A slow record does not hold back a query that needs no model: the answers come back in
    the order the work finishes, not all at the end."""
    c = client(app)
    app.record("order 4567 is late", session_id="s")
    real = app.engine.start

    def slow(*a, **k):  # type: ignore[no-untyped-def]
        time.sleep(0.15)
        return real(*a, **k)

    app.engine.start = slow  # type: ignore[method-assign]
    done: dict[str, float] = {}
    t0 = time.perf_counter()

    def rec(i: int) -> None:
        c.post("/record", json={"text": f"order {1000 + i} is late", "session_id": "s"})
        done[f"record{i}"] = time.perf_counter() - t0

    threads = [threading.Thread(target=rec, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    time.sleep(0.05)
    q = c.post("/query", json={"query": {"entity_type": "Order"}, "session_id": "s"})
    done["query"] = time.perf_counter() - t0
    for t in threads:
        t.join()
    assert q.status_code == 200
    finished = sorted(done.values())
    assert done["query"] < max(done[f"record{i}"] for i in range(4))  # not held until every record is done
    assert finished[0] < finished[-1] - 0.1  # answered one by one


# --- 4. import validates like an edit ---------------------------------------------------------
def test_import_refuses_what_an_edit_would_refuse(app: Appliance, tmp_path: Path) -> None:
    live = app.record("order 55501 is late", session_id="s")
    sid = app.schema.schema_id
    good = make_record(schema_id=sid, entity_type="Order", entity_id="77", attributes={})
    bad = [
        make_record(schema_id=sid, entity_type="Spaceship", entity_id="1"),
        make_record(schema_id=sid, entity_type="Order", entity_id="55501", state="exploded"),
        make_record(schema_id=sid, entity_type="Order", entity_id="55501", attributes={"amount": "not a number"}),
        make_record(schema_id=sid, entity_type="Order", entity_id="1", attributes={"x; DROP TABLE memories": 1}),
        make_record(schema_id=sid, entity_type="Order", entity_id="1", session_id="s" * 5000),
    ]
    lines = [r.model_dump_json() for r in [good, *bad]]
    lines.append(json.dumps({**json.loads(good.model_dump_json()), "memory_id": "../../etc/passwd"}))
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(lines) + "\n")
    n, problems = app.import_jsonl(path)
    assert n == 1 and len(problems) == 6
    assert [p.split(":")[0] for p in problems] == [f"line {i}" for i in range(2, 8)]
    order = app.get_entity("s", "Order", "55501")
    assert order is not None and order.state == live.state and order.attributes.get("amount") != "not a number"


# --- 5. export / backup / restore -------------------------------------------------------------
def test_export_by_extension_refuses_to_overwrite_and_names_missing_directories(app: Appliance, tmp_path: Path) -> None:
    app.record("order 4567 is late", session_id="s")
    out = tmp_path / "out.parquet"
    assert app.export(out) == 1
    assert duckdb.connect().execute("SELECT count(*) FROM read_parquet(?)", [str(out)]).fetchall() == [
        (1,)
    ]  # parquet, not JSONL
    with pytest.raises(InputError, match="exists"):
        app.export(out)
    assert app.export(out, force=True) == 1
    with pytest.raises(InputError, match="no directory"):
        app.export(tmp_path / "missing" / "x.jsonl")
    with pytest.raises(InputError, match="format"):
        app.export(tmp_path / "x.csv")
    res = CliRunner().invoke(main, ["--db", app.store.path, "export", str(out)])
    assert res.exit_code != 0 and "exists" in res.output and "Traceback" not in res.output


def test_backup_while_serving_and_restore_are_faithful(app: Appliance, settings, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    for text in ("order 4567 is late", "order 4567 was paid 30 yuan", "order 4567 arrived broken"):
        app.record(text, session_id="s")
    app.forget(dry_run=False, session_id="s")
    c = client(app)
    snap = c.get("/backup")  # while the server holds the database
    assert snap.status_code == 200
    path = tmp_path / "snap.duckdb"
    path.write_bytes(snap.content)
    fresh = Appliance(db=tmp_path / "new.duckdb", model=FakeEngine(), settings=settings)
    try:
        fresh.restore(path)
        tables = (
            "memories",
            "entities",
            "entity_history",
            "entity_merges",
            "forget_log",
            "schema_migrations",
            "migration_before",
            "ended_sessions",
            "memory_links",
        )
        for table in tables:
            a = sorted(map(repr, app.store.select(f"SELECT * FROM {table}")))  # noqa: S608 - fixed names
            b = sorted(map(repr, fresh.store.select(f"SELECT * FROM {table}")))  # noqa: S608
            assert a == b, table
        with pytest.raises(StoreError, match="empty"):
            fresh.restore(path)  # never mixed into a database that holds memories
    finally:
        fresh.close()


# --- 8. nothing silently changed --------------------------------------------------------------
def test_control_characters_are_refused_not_stripped(app: Appliance) -> None:
    c = client(app)
    r = c.post("/record", json={"text": "order 12\u0000 3456", "session_id": "s"})
    assert r.status_code == 400 and "NUL" in r.json()["error"]
    assert c.post("/record", json={"text": "order 1", "session_id": "a\u0000b"}).status_code == 400
    assert app.list_records() == []


def test_a_mistyped_db_is_not_created(tmp_path: Path) -> None:
    target = tmp_path / "typo" / "memroy.duckdb"
    res = CliRunner().invoke(main, ["--db", str(target), "db", "status"])
    assert res.exit_code != 0 and "--create" in res.output and not target.parent.exists()


# --- 10, 11. nothing written into the checkout; the demo has its own database ------------------
def test_compiling_a_schema_writes_under_appliance_home_only(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    shipped = PROJECT_ROOT / "grammars"
    before = sorted(p.name for p in shipped.rglob("*"))
    monkeypatch.delenv("APPLIANCE_GRAMMARS", raising=False)
    monkeypatch.setenv("APPLIANCE_HOME", str(tmp_path / "home"))
    own = json.loads((PROJECT_ROOT / "schemas" / "travel_assistant.json").read_text())
    own["domain"] = "my_trips"
    schema = tmp_path / "trips.json"
    schema.write_text(json.dumps(own))
    res = CliRunner().invoke(main, ["schema", "compile", str(schema), "--json"])
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in shipped.rglob("*")) == before
    assert any((tmp_path / "home" / "grammars").iterdir())
