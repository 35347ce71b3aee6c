"""Real-browser tests: Debian chromium driven by Playwright against `appliance serve` on
127.0.0.1 with the shipped model. Any request to a non-loopback address fails the test."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import pytest

from appliance.config import PROJECT_ROOT

from .conftest import free_port

pytestmark = [pytest.mark.browser, pytest.mark.real_model]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--no-first-run",
]
# Screenshots go to a temp dir; `scripts/screenshots` sets APPLIANCE_SCREENSHOTS=docs to
# regenerate the README's pictures on purpose (a test run never changes tracked files).
SHOTS = os.environ.get("APPLIANCE_SCREENSHOTS")


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[str]:  # type: ignore[no-untyped-def]
    home = tmp_path_factory.mktemp("serve")
    port = free_port()
    env = {
        **os.environ,
        "APPLIANCE_HOME": str(home),
        "APPLIANCE_GRAMMARS": str(home / "g"),
        "GRADIO_ANALYTICS_ENABLED": "False",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "appliance", "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}/"
    for _ in range(600):  # the server loads and warms the model before it listens
        try:
            urllib.request.urlopen(url, timeout=2)
            break
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError("panel exited: " + (proc.stdout.read() if proc.stdout else "")) from None
            time.sleep(0.5)
    else:
        proc.kill()
        raise RuntimeError("panel did not start: " + (proc.stdout.read() if proc.stdout else ""))
    yield url
    proc.terminate()
    proc.wait(timeout=20)


@pytest.fixture(scope="module")
def page(server: str, tmp_path_factory):  # type: ignore[no-untyped-def]
    from playwright.sync_api import sync_playwright

    outside: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
        ctx = browser.new_context(viewport={"width": 1280, "height": 900})

        def guard(route, request) -> None:  # type: ignore[no-untyped-def]
            host = urlparse(request.url).hostname or ""
            if request.url.startswith(("data:", "blob:")) or host in ("127.0.0.1", "localhost", "::1"):
                route.continue_()
            else:
                outside.append(request.url)
                route.abort()

        ctx.route("**/*", guard)
        pg = ctx.new_page()
        pg.goto(server, wait_until="networkidle")
        pg.outside_requests = outside  # type: ignore[attr-defined]
        pg.shots_dir = tmp_path_factory.mktemp("shots")  # type: ignore[attr-defined]
        yield pg
        browser.close()
    assert outside == [], f"requests left the machine: {outside}"


def _shot(page, name: str) -> None:  # type: ignore[no-untyped-def]
    target = Path(SHOTS) if SHOTS else page.shots_dir
    target.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(target / name), full_page=True)


def test_chat_records_and_memories_shows_it(page) -> None:  # type: ignore[no-untyped-def]
    page.locator("#chat-input textarea").fill("你好，我昨天买的手机订单尾号4567还没发货")
    page.locator("#chat-send").click()
    page.get_by_text("Recorded (").first.wait_for(timeout=120_000)
    from playwright.sync_api import expect

    # the send clears the box after the answer shows: typing before that would be wiped
    expect(page.locator("#chat-input textarea")).to_have_value("", timeout=30_000)
    page.locator("#chat-input textarea").fill("我的订单尾号4567怎么样了？")
    page.locator("#chat-send").click()
    expect(page.locator("#chat-details")).to_contain_text("SELECT", timeout=120_000)
    expect(page.locator("#chat-details")).to_contain_text("4567")
    _shot(page, "chat.png")
    page.get_by_role("tab", name="Memories").click()
    page.locator("#mem-refresh").click()
    expect(page.locator("#mem-table")).to_contain_text("4567", timeout=30_000)
    _shot(page, "memories.png")
    assert page.outside_requests == []


def test_schema_edit_shows_error_then_recompiles(page) -> None:  # type: ignore[no-untyped-def]
    page.get_by_role("tab", name="Schema").click()
    editor = page.locator("#schema-editor .cm-content")
    editor.click()
    page.keyboard.press("Control+A")
    page.keyboard.insert_text(
        '{"schema_version": "1.0", "domain": "broken", "entities": {"A": {"attributes": ["bad name"]}}}'
    )
    page.locator("#schema-validate").click()
    page.locator("#schema-verdict").get_by_text("invalid schema").wait_for(timeout=30_000)
    assert "entities.A.attributes" in page.locator("#schema-verdict").inner_text()
    _shot(page, "schema-error.png")
    editor.click()
    page.keyboard.press("Control+A")
    page.keyboard.insert_text((PROJECT_ROOT / "schemas" / "travel_assistant.json").read_text())
    page.locator("#schema-compile").click()
    page.locator("#schema-verdict").get_by_text("compiled travel_assistant").wait_for(timeout=60_000)
    _shot(page, "schema.png")
    assert page.outside_requests == []


def _type_into(box, text: str, attempts: int = 3) -> None:  # type: ignore[no-untyped-def]
    """Fill a Gradio textbox and leave it: a click right after a bare fill once sent the box's
    old value (a fresh clone drew the "default" session's timeline instead of "graph-test"); the
    blur commits the value before the next event reads it. A tab's boxes are mounted when the tab
    is first shown, and the mount sets their initial value once: under a full run's load it landed
    after the fill (the box read "default" for the next 5 s), so a fill that did not hold is made
    again; the last attempt must hold."""
    from playwright.sync_api import expect

    for _ in range(attempts - 1):
        box.fill(text)
        box.press("Tab")
        box.page.wait_for_timeout(500)  # let a pending mount land before the value is read
        if box.input_value() == text:
            return
    box.fill(text)
    box.press("Tab")
    expect(box).to_have_value(text)


def test_entity_graph_and_timeline_open_an_entitys_memories(page) -> None:  # type: ignore[no-untyped-def]
    """Whatever schema the earlier tests left loaded: the recorded message shows on the
    timeline, its entity in the graph, and a click on a node lists that entity's memories."""
    from playwright.sync_api import expect

    page.get_by_role("tab", name="Chat").click()
    page.locator("#chat-details").wait_for()
    session = page.get_by_label("Session").first
    _type_into(session, "graph-test")
    recorded = page.get_by_text("Recorded (")
    before = recorded.count()
    page.locator("#chat-input textarea").fill(
        "I booked hotel booking HB-7731 in Rome for 120 euros, and order 98765 arrived broken"
    )
    page.locator("#chat-send").click()
    expect(recorded).to_have_count(before + 1, timeout=120_000)  # this message, not an earlier one
    page.get_by_role("tab", name="Graph & timeline").click()
    page.locator("#pic-draw").wait_for()
    _type_into(page.locator("#pic-session textarea, #pic-session input").first, "graph-test")
    page.locator("#pic-draw").click()
    expect(page.locator("#timeline svg")).to_contain_text("HB-7731", timeout=60_000)
    node = page.locator("#entity-graph .entity-node").first
    node.wait_for(timeout=30_000)
    entity_id = (node.get_attribute("data-entity") or "").split("\u241f")[-1]
    assert entity_id
    node.click()
    expect(page.locator("#entity-picked")).to_contain_text(entity_id, timeout=30_000)
    expect(page.locator("#entity-memories")).to_contain_text(entity_id)
    _shot(page, "graph.png")
    assert page.outside_requests == []
