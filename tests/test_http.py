from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from appliance.api import Appliance
from appliance.edges.access import AccessPolicy, Grant
from appliance.edges.http import build_http, guarded, serve_http
from appliance.errors import UserError
from appliance.testing import FakeEngine


def client(app: Appliance, policy: AccessPolicy | None = None) -> TestClient:
    """The API as served: behind the guard, reached as http://localhost."""
    return TestClient(guarded(build_http(app, policy or AccessPolicy()), app), base_url="http://localhost")


@pytest.fixture
def app(settings):  # type: ignore[no-untyped-def]
    a = Appliance(db=settings.home / "m.duckdb", model=FakeEngine(preferences={"Order": 5.0}), settings=settings)
    yield a
    a.close()


def test_record_query_and_openapi(app: Appliance) -> None:
    c = client(app)
    r = c.post("/record", json={"text": "order 4567 is late", "session_id": "a"})
    assert r.status_code == 200 and r.json()["source_text"] == "order 4567 is late"
    q = c.post("/query", json={"query": {"entity_type": "Order"}, "session_id": "a"})
    assert q.status_code == 200 and "?" in q.json()["sql"]
    assert c.post("/query", json={"query": {"entity_type": "Order"}, "session_id": "b"}).json()["hits"] == []
    spec = c.get("/openapi.json").json()
    assert {"/record", "/recall", "/query", "/entities", "/schema"} <= set(spec["paths"])


def test_errors_are_json_not_tracebacks(app: Appliance) -> None:
    c = client(app)
    r = c.post("/record", json={"text": "   "})
    assert r.status_code == 400 and r.json()["error"] and "hint" in r.json()
    bad = c.post(
        "/query", json={"query": {"entity_type": "Order", "filters": [{"field": "x;--", "op": "eq", "value": 1}]}}
    )
    assert bad.status_code == 400 and "unknown field" in bad.json()["error"]


def test_token_required_when_set(app: Appliance) -> None:
    c = client(app, AccessPolicy({"s3cret-s3cret-s3cret": Grant("admin", admin=True)}))
    assert c.get("/health").status_code == 401
    assert c.get("/health", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert c.get("/health", headers={"Authorization": "s3cret-s3cret-s3cret"}).status_code == 401  # Bearer required
    assert c.get("/openapi.json").status_code == 401  # the API description is behind the key too
    assert c.get("/health", headers={"Authorization": "Bearer s3cret-s3cret-s3cret"}).status_code == 200


def test_public_bind_needs_a_token(app: Appliance) -> None:
    with pytest.raises(UserError):
        serve_http(app, host="0.0.0.0", port=1)


def test_lifecycle_endpoints(app: Appliance) -> None:
    c = client(app)
    for _ in range(3):
        assert c.post("/record", json={"text": "order 4567 is late", "session_id": "a"}).status_code == 200
    assert c.post("/compact", json={"min_records": 3, "dry_run": True}).json()[0]["records"] == 3  # local user: admin
    assert c.post("/forget", json={}).json() == []  # nothing old enough; a dry run anyway
    assert c.get("/merges").json() == []
    assert c.post("/sessions/a/end", params={"dry_run": True}).status_code == 200
    bad = c.post("/record", json={"text": "order 1", "schema_name": "nope"})
    assert bad.status_code == 400 and "not loaded" in bad.json()["error"]
    spec = c.get("/openapi.json").json()
    assert {"/compact", "/forget", "/merges", "/sessions/{session_id}/end"} <= set(spec["paths"])
    assert c.get("/schema").json()["loaded"] == {"customer_service": app.schema.schema_id}


def test_record_and_recall_take_the_message_time(app: Appliance) -> None:
    c = client(app)
    r = c.post("/record", json={"text": "order 4567 is late", "session_id": "t", "at": "2023-05-08T13:56:00+02:00"})
    assert r.status_code == 200 and r.json()["timestamp"] == "2023-05-08T13:56:00+02:00"
    bad = c.post("/record", json={"text": "order 4567 is late", "at": "last tuesday"})
    assert bad.status_code == 400 and "ISO 8601" in bad.json()["error"]
    q = c.post("/recall", json={"question": "what happened to order 4567?", "session_id": "t", "at": "2023-05-09"})
    assert q.status_code == 200 and q.json()["memories"]


def test_the_http_contract_holds_for_hostile_requests(app: Appliance) -> None:
    policy = AccessPolicy({"s3cret-s3cret-s3cret": Grant("admin", admin=True)})
    c = client(app, policy)
    key = {"Authorization": "Bearer s3cret-s3cret-s3cret"}
    deep = "[" * 5000 + "]" * 5000
    for path in ("/record", "/schema/validate"):  # refused before authentication parses anything
        r = c.post(path, content=deep, headers={"Content-Type": "application/json"})
        assert r.status_code == 400 and r.headers["content-type"] == "application/json"
        assert "nested too deeply" in r.json()["error"]
    big = "x" * 500_000
    r = c.post("/record", json={"text": "order 1 shipped", "schema_name": big}, headers=key)
    assert r.status_code == 400 and len(r.content) < 2_000  # the name is not echoed whole
    assert c.get("/health", headers={"Authorization": "bearer s3cret-s3cret-s3cret"}).status_code == 200
    huge = c.request("GET", "/health", content=b"x" * (app.settings.max_body_bytes + 1), headers=key)
    assert huge.status_code == 413


def test_the_openapi_documents_every_operation_its_errors_and_the_bearer_scheme(app: Appliance) -> None:
    spec = client(app).get("/openapi.json").json()
    ops = [op for methods in spec["paths"].values() for op in methods.values()]
    assert len(ops) >= 17
    assert all(op.get("description") for op in ops)  # every operation says what it does
    assert not any("422" in op["responses"] for op in ops)  # validation problems are 400s
    assert all({"400", "401", "403"} <= op["responses"].keys() for op in ops)
    assert spec["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
