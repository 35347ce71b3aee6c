"""The warm CLI believes ``<db>.server.json`` only when the user's own server wrote it: a planted
marker gets neither the user's text nor the bearer token."""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from appliance.edges.client import find_server
from appliance.store import MemoryStore


class _Listener(http.server.BaseHTTPRequestHandler):
    seen: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        _Listener.seen.append(self.headers.get("Authorization", ""))
        body = b'{"ok": true}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def listener() -> Iterator[str]:
    _Listener.seen = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Listener)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def _plant(db: Path, url: str, pid: int, mode: int = 0o600) -> None:
    marker = db.with_name(db.name + ".server.json")
    marker.write_text(json.dumps({"url": url, "pid": pid, "kind": "http"}))
    marker.chmod(mode)


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="the process check reads /proc")
def test_a_marker_naming_a_process_that_does_not_hold_the_database_is_ignored(tmp_path: Path, listener: str) -> None:
    db = tmp_path / "m.duckdb"
    MemoryStore(db).close()
    other = subprocess.Popen(["sleep", "30"])  # alive, the user's, but not the database's server
    try:
        _plant(db, listener, other.pid)
        assert find_server(db, token="secret-token-0123456789") is None
        assert _Listener.seen == []  # not even asked for its health
    finally:
        other.kill()


@pytest.mark.duckdb_only  # the server marker beside a file
def test_a_marker_others_could_write_or_naming_a_remote_url_is_ignored(tmp_path: Path, listener: str) -> None:
    db = tmp_path / "m.duckdb"
    with MemoryStore(db):  # this process holds the database, as a server would
        _plant(db, listener, os.getpid(), mode=0o666)
        assert find_server(db, token="secret-token-0123456789") is None
        _plant(db, "http://203.0.113.9:8765", os.getpid())
        assert find_server(db, token="secret-token-0123456789") is None
        assert _Listener.seen == []
        _plant(db, listener, os.getpid())  # the user's own file, loopback, the holder's pid
        assert find_server(db, token="secret-token-0123456789") is not None
        assert _Listener.seen == ["Bearer secret-token-0123456789"]
