"""The README's walk-through, run exactly as written (only the port is a free one): a schema the
user writes, a memory made with it, a note recorded and recalled without naming the schema again,
then — while `appliance serve` holds the memory — the CLI, the HTTP API, an MCP client (the `mcp`
package's own) and the panel in a real browser all see the same notes."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest

from appliance.config import PROJECT_ROOT

from .conftest import free_port, mcp_payload
from .test_browser import CHROMIUM, FLAGS

pytestmark = [pytest.mark.browser, pytest.mark.real_model]


def _walkthrough() -> str:
    readme = (PROJECT_ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Five minutes with your own schema", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block is not None, "the README's walk-through has no bash block"
    return block.group(1)


def test_the_readme_walkthrough_runs_as_written(tmp_path: Path) -> None:
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from playwright.sync_api import expect, sync_playwright

    port = free_port()
    script = _walkthrough().replace("serve >", f"serve --port {port} >").replace("7860", str(port))
    env = {
        **os.environ,
        "TMPDIR": str(tmp_path),  # where `mktemp -d` puts the user's folder
        "APPLIANCE_HOME": str(tmp_path / "home"),
        "OMP_WAIT_POLICY": "PASSIVE",
    }
    run = subprocess.run(
        ["bash", "-e", "-c", script], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    markers = list(tmp_path.glob("tmp.*/plants.duckdb.server.json"))
    pid = json.loads(markers[0].read_text())["pid"] if markers else None
    try:
        assert run.returncode == 0, run.stdout + run.stderr
        assert "valid" in run.stdout and "Frida" in run.stdout  # validate, record, recall
        memories = json.loads(run.stdout.strip().splitlines()[-1])  # the curl line
        told = " ".join(m["source_text"] for m in memories)
        assert "Repotted Frida" in told and "Watered Frida" in told
        assert pid is not None
        base = f"http://127.0.0.1:{port}"

        async def agent() -> Any:
            async with streamable_http_client(f"{base}/mcp") as streams, ClientSession(*streams[:2]) as session:
                await session.initialize()
                question = {"question": "When did I water Frida?", "session_id": "me"}
                return mcp_payload(await session.call_tool("recall", question))

        found = anyio.run(agent)
        assert "Frida" in found["context"] and not found["not_found"]
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
            page = browser.new_page()
            page.goto(base, wait_until="networkidle")
            page.get_by_role("tab", name="Memories").click()
            page.locator("#mem-refresh").click()
            expect(page.locator("#mem-table")).to_contain_text("Watered Frida", timeout=30_000)
            browser.close()
    finally:
        if pid is not None:
            os.kill(pid, signal.SIGTERM)
