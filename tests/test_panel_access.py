"""The panel as an attacker meets it: its API cannot name server files in place of an upload, and
with API keys configured it answers no one without an admin key. Over a FakeEngine: what is
tested is the panel's edge, not extraction."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from appliance.api import Appliance
from appliance.config import Settings
from appliance.edges.ui.panel import import_file, panel_asgi
from appliance.testing import FakeEngine

ADMIN = "admin-token-0123456789abcdef"


def _app(home: Path, env: dict[str, str]) -> Appliance:
    settings = Settings.from_env({"APPLIANCE_HOME": str(home), **env})
    return Appliance(db=home / "m.duckdb", model=FakeEngine(), settings=settings, embedder=None)


def _call(client: TestClient, name: str, data: list[Any]) -> str:
    started = client.post(f"/gradio_api/call/{name}", json={"data": data})
    if started.status_code != 200:
        return f"HTTP {started.status_code}"
    return client.get(f"/gradio_api/call/{name}/{started.json()['event_id']}").text


def test_the_import_handler_reads_no_server_file(tmp_path: Path) -> None:
    app = _app(tmp_path, {})
    try:
        app.record("order 1 shipped", session_id="a")
        outside = tmp_path / "server-side.jsonl"
        app.export_jsonl(outside)
        app.delete_record(app.list_records()[0].memory_id)
        with TestClient(panel_asgi(app)) as client:
            answer = _call(client, "import_file", [{"path": str(outside), "meta": {"_type": "gradio.FileData"}}])
        assert "event: error" in answer and "Imported" not in answer
        assert app.list_records() == []  # nothing was read from the server's file
        assert import_file(app, str(outside), tmp_path / "uploads").startswith("Error: only a file uploaded here")
    finally:
        app.close()


@pytest.mark.parametrize("env", [{"APPLIANCE_TOKEN": ADMIN}])
def test_with_keys_configured_the_panel_needs_an_admin_key(tmp_path: Path, env: dict[str, str]) -> None:
    app = _app(tmp_path, env)
    try:
        app.record("order 77 for alice shipped", session_id="alice")
        with TestClient(panel_asgi(app)) as client:
            anonymous = _call(client, "refresh_all", ["", "", "all", 1])
            assert "77" not in anonymous and anonymous.startswith("HTTP 40")
            assert client.post("/login/", data={"username": "x", "password": "wrong-token"}).status_code >= 400
            assert client.post("/login/", data={"username": "x", "password": ADMIN}).status_code == 200
            assert "77" in _call(client, "refresh_all", ["", "", "all", 1])
    finally:
        app.close()
