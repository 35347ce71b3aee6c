"""The panel as a server: starts on loopback, serves no third-party assets, honours auth."""

from __future__ import annotations

import re
import urllib.error
import urllib.request

import pytest

from appliance.api import Appliance
from appliance.edges.ui.panel import launch
from appliance.testing import FakeEngine

from .conftest import free_port


@pytest.fixture
def app(settings):  # type: ignore[no-untyped-def]
    a = Appliance(db=settings.home / "m.duckdb", model=FakeEngine(), settings=settings)
    yield a
    a.close()


def test_panel_page_loads_no_remote_assets(app: Appliance) -> None:
    port = free_port()
    ui = launch(app, port=port, block=False)
    try:
        html = urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30).read().decode()
        assets = re.findall(r'<(?:script|link)[^>]+(?:src|href)="([^"]+)"', html)
        assert assets, "the page should reference its bundled assets"
        remote = [a for a in assets if a.startswith(("http:", "https:", "//")) and "127.0.0.1" not in a]
        assert remote == []
        assert "fonts.googleapis" not in html
    finally:
        ui.close()


def test_panel_auth_blocks_anonymous_requests(app: Appliance) -> None:
    port = free_port()
    ui = launch(app, port=port, auth=("admin", "pw"), block=False)
    try:
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/config", timeout=30)
        assert err.value.code in (401, 403)
    finally:
        ui.close()
