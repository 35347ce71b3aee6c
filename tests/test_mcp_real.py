"""`appliance mcp` driven by the official MCP client over stdio (a subprocess, as a desktop agent
starts it) and over streamable HTTP, with the shipped model underneath."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from .conftest import free_port, mcp_payload

pytestmark = pytest.mark.real_model


async def _exercise(session: Any) -> None:
    await session.initialize()
    tools = {t.name for t in (await session.list_tools()).tools}
    assert {"record", "recall", "query", "list_entities", "get_entity", "edit_memory", "delete_memory"} <= tools
    en = mcp_payload(await session.call_tool("record", {"text": "Order 55501 arrived broken", "session_id": "m"}))
    assert en["entity_type"] == "Order" and en["entity_id"] == "55501"
    zh = mcp_payload(
        await session.call_tool(
            "record", {"text": "订单44144还没发货，我要退款", "session_id": "m", "at": "2026-11-30T10:00:00Z"}
        )
    )
    assert zh["entity_id"] == "44144" and zh["timestamp"].startswith("2026-11-30")
    found = mcp_payload(
        await session.call_tool("recall", {"question": "What happened to order 55501?", "session_id": "m"})
    )
    assert "55501" in found["context"] and not found["not_found"]
    missing = mcp_payload(await session.call_tool("recall", {"question": "Where is order 99999?", "session_id": "m"}))
    assert missing["not_found"]
    entities = mcp_payload(await session.call_tool("list_entities", {"session_id": "m"}))
    assert {e["id"] for e in entities} >= {"55501", "44144"}
    bad = await session.call_tool("record", {"text": "   ", "session_id": "m"})
    assert bad.is_error and "empty" in bad.content[0].text
    bad_id = await session.call_tool("delete_memory", {"memory_id": "../../etc/passwd"})
    assert bad_id.is_error and "hint" in bad_id.content[0].text
    schemas = await session.read_resource("appliance://schemas")
    assert "customer_service" in json.loads(schemas.contents[0].text)


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "APPLIANCE_HOME": str(home), "OMP_WAIT_POLICY": "PASSIVE"}


def _serve_mcp_http(tmp_path: Path) -> tuple[subprocess.Popen[str], str]:
    """``appliance mcp --http`` on a free port of a fresh database, once it says it is ready;
    its process and the MCP URL."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "appliance", "--db", str(tmp_path / "m.duckdb"), "--create", "mcp", "--http"]
        + ["--port", str(port)],
        stderr=subprocess.PIPE,
        text=True,
        env=_env(tmp_path / "home"),
    )
    assert proc.stderr is not None
    deadline = time.time() + 180
    while time.time() < deadline and "ready on" not in proc.stderr.readline():
        if proc.poll() is not None:
            raise AssertionError(proc.stderr.read())
    return proc, f"http://127.0.0.1:{port}/mcp"


@pytest.mark.duckdb_only  # its subprocess opens the DuckDB file by path
def test_mcp_over_stdio_with_the_real_client(tmp_path: Path) -> None:
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "appliance", "--db", str(tmp_path / "m.duckdb"), "--create", "mcp"],
        env=_env(tmp_path / "home"),
    )

    async def main() -> None:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await _exercise(session)

    anyio.run(main)
    # the client closed stdin: the server closed the database, the file alone holds both records
    from appliance.store import MemoryStore

    with MemoryStore(tmp_path / "m.duckdb") as store:
        assert len(store.records.ids()) == 2


def test_mcp_over_stdio_on_a_postgresql_memory(tmp_path: Path, pg_url: str) -> None:
    """The MCP edge on a server memory: an agent's stdio server opens the URL; another process
    reads what it stored."""
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=sys.executable, args=["-m", "appliance", "--db", pg_url, "--create", "mcp"], env=_env(tmp_path / "home")
    )

    async def main() -> None:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await _exercise(session)

    anyio.run(main)
    from appliance.store import MemoryStore

    with MemoryStore(pg_url) as store:
        assert len(store.records.ids()) == 2


def test_mcp_over_streamable_http_behind_the_guard(tmp_path: Path) -> None:
    import httpx
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    proc, url = _serve_mcp_http(tmp_path)
    try:
        evil = httpx.post(url, headers={"Host": "attacker.example"}, json={})
        assert evil.status_code == 421

        async def main() -> None:
            async with streamable_http_client(url) as streams, ClientSession(streams[0], streams[1]) as session:
                await _exercise(session)

        anyio.run(main)
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def test_a_call_in_flight_when_the_server_is_stopped_gets_its_reply(tmp_path: Path) -> None:
    import signal

    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    proc, url = _serve_mcp_http(tmp_path)
    replies: list[Any] = []
    try:

        async def main() -> None:
            async with streamable_http_client(url) as streams, ClientSession(streams[0], streams[1]) as session:
                await session.initialize()
                await session.list_tools()  # the client checks results against the tools' schemas
                async with anyio.create_task_group() as tg:

                    async def call() -> None:
                        long = "Order 31337 arrived broken and the box was wet. " * 20
                        replies.append(await session.call_tool("record", {"text": long, "session_id": "s"}))

                    tg.start_soon(call)
                    await anyio.sleep(0.3)  # the call is in flight
                    proc.send_signal(signal.SIGTERM)

        anyio.run(main)
    finally:
        proc.wait(timeout=120)
    assert replies and not replies[0].is_error
    assert json.loads(replies[0].content[0].text)["memory_id"]
