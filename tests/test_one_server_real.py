"""``appliance serve`` is one process for every edge: while the panel serves a memory made with
the user's own schema, the CLI (no --schema), the HTTP API and an MCP client (the ``mcp``
package's own) read and write the same memory; a second server on it names the holder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from .conftest import free_port, mcp_payload

pytestmark = pytest.mark.real_model

PLANTS = {
    "schema_version": "1.0",
    "domain": "plants",
    "description": "My house plants, each known by the name I gave it, and what I do for them.",
    "entities": {
        "Plant": {
            "description": "one of my plants, known by the name I call it",
            "key": ["name"],
            "attributes": [
                {"name": "name", "kind": "string", "format": "name", "description": "the name I call the plant by"},
                {"name": "species", "description": "what kind of plant it is, e.g. monstera, fern"},
            ],
        }
    },
    "event_types": [
        {"name": "watered", "entity": "Plant", "attributes": ["name"], "description": "I watered a plant"},
        {
            "name": "repotted",
            "entity": "Plant",
            "attributes": ["name", "species"],
            "description": "I moved a plant to a new pot",
        },
    ],
}


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "APPLIANCE_HOME": str(home), "OMP_WAIT_POLICY": "PASSIVE"}


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "appliance", *args], capture_output=True, text=True, env=_env(home), timeout=300
    )


@contextmanager
def _serving(home: Path, db: str) -> Iterator[tuple[str, int]]:
    """``appliance --db DB serve`` as its own process, once it says it is ready: (base URL,
    port); stopped on the way out."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "appliance", "--db", db, "serve", "--port", str(port)],
        stderr=subprocess.PIPE,
        text=True,
        env=_env(home),
    )
    assert proc.stderr is not None
    try:
        deadline = time.time() + 240
        while time.time() < deadline and "ready on" not in proc.stderr.readline():
            if proc.poll() is not None:
                raise AssertionError(proc.stderr.read())
        yield f"http://127.0.0.1:{port}", port
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def test_one_server_serves_the_panel_the_api_mcp_and_the_cli_on_one_memory(tmp_path: Path) -> None:
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    home, db, schema = tmp_path / "home", str(tmp_path / "plants.duckdb"), tmp_path / "plants.json"
    schema.write_text(json.dumps(PLANTS))
    made = _cli(home, "--db", db, "--schema", str(schema), "--create", "db", "status", "--json")
    assert made.returncode == 0, made.stderr
    env = _env(home)
    with _serving(home, db) as (base, port):
        told = _cli(home, "--db", db, "record", "I repotted Frida, my fern, this morning", "--session", "me", "--json")
        assert told.returncode == 0, told.stderr
        rec = json.loads(told.stdout)
        assert rec["schema_id"] == json.loads(made.stdout)["schema_id"]  # the memory's schema, not the default
        listed = httpx.get(f"{base}/memories", params={"session_id": "me"}).json()
        assert rec["memory_id"] in json.dumps(listed)
        assert httpx.get(f"{base}/schema").json()["loaded"] == {"plants": rec["schema_id"]}
        assert "gradio" in httpx.get(f"{base}/").text.lower()  # the panel, same port

        async def agent() -> Any:
            url = f"{base}/mcp"
            async with streamable_http_client(url) as streams, ClientSession(streams[0], streams[1]) as session:
                await session.initialize()
                return mcp_payload(
                    await session.call_tool("recall", {"question": "Which plant did I repot?", "session_id": "me"})
                )

        found = anyio.run(agent)
        assert "Frida" in found["context"] and not found["not_found"]

        async def desktop_agent() -> Any:  # starts `appliance mcp` (stdio) as a desktop agent does
            from mcp.client.stdio import StdioServerParameters, stdio_client

            params = StdioServerParameters(command=sys.executable, args=["-m", "appliance", "--db", db, "mcp"], env=env)
            async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                tools = {t.name for t in (await session.list_tools()).tools}
                assert {"record", "recall"} <= tools
                schemas = await session.read_resource("appliance://schemas")
                assert "plants" in json.loads(schemas.contents[0].text)
                return mcp_payload(await session.call_tool("recall", {"question": "Which plant?", "session_id": "me"}))

        relayed = anyio.run(desktop_agent)  # relayed to the server: no lock error, same memory
        assert "Frida" in relayed["context"]
        for command in (["compact", "--dry-run"], ["forget"], ["db", "merges"], ["schema", "migrations"]):
            served = _cli(home, "--db", db, *command)  # the lifecycle commands go to the server too
            assert served.returncode == 0 and "Traceback" not in served.stderr, (command, served.stderr)
        status = json.loads(_cli(home, "--db", db, "db", "status", "--json").stdout)
        assert status["counts"]["memories"] == 1 and status["schema"] == "plants"
        renamed = PLANTS | {"schema_version": "1.1"}
        (tmp_path / "plants2.json").write_text(json.dumps(renamed))
        moved = _cli(home, "--db", db, "schema", "migrate", str(tmp_path / "plants2.json"), "--json")
        assert moved.returncode == 0, moved.stderr
        assert httpx.get(f"{base}/schema").json()["schema"]["schema_version"] == "1.1"
        back = _cli(home, "--db", db, "schema", "revert", json.loads(moved.stdout)["migration_id"])
        assert back.returncode == 0 and "back at 1.0" in back.stdout, back.stderr
        second = _cli(home, "--db", db, "import", str(schema))  # needs the file itself
        assert second.returncode == 1 and "appliance serve" in second.stderr and f"{port}" in second.stderr
        assert "Traceback" not in second.stderr
        wrong = _cli(home, "--db", db, "--schema", "customer_service", "recall", "Frida?")
        assert wrong.returncode == 1 and "'plants'" in wrong.stderr
    with_file = _cli(home, "--db", db, "recall", "Which plant did I repot?", "--session", "me", "--json")
    assert with_file.returncode == 0 and "Frida" in json.loads(with_file.stdout)["context"]


def test_serve_on_a_postgresql_memory_answers_over_http_and_keeps_it(tmp_path: Path, pg_url: str) -> None:
    """``appliance --db postgresql://… serve`` as its own process: a record made over HTTP is
    recalled over HTTP, and after the server stops the CLI finds it in the same database."""
    home, schema = tmp_path / "home", tmp_path / "plants.json"
    schema.write_text(json.dumps(PLANTS))
    made = _cli(home, "--db", pg_url, "--schema", str(schema), "--create", "db", "status", "--json")
    assert made.returncode == 0, made.stderr
    with _serving(home, pg_url) as (base, _):
        told = httpx.post(
            f"{base}/record", json={"text": "I repotted Frida, my fern, this morning", "session_id": "me"}, timeout=120
        )
        assert told.status_code == 200, told.text
        found = httpx.post(
            f"{base}/recall", json={"question": "Which plant did I repot?", "session_id": "me"}, timeout=120
        ).json()
        assert "Frida" in found["context"] and not found["not_found"]
    status = _cli(home, "--db", pg_url, "db", "status", "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["counts"]["memories"] == 1
