"""Stopping and killing the real thing: `appliance http` with the shipped model under SIGTERM
(what systemd, docker and `kill` send), the warm CLI against it, and crash-check on the real
record path."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner

from appliance.edges.cli.main import main
from appliance.edges.crashcheck import run_crash_check
from appliance.store import MemoryStore

from .conftest import free_port

pytestmark = pytest.mark.real_model


def _start(db: Path, home: Path) -> tuple[subprocess.Popen[str], str]:
    env = {**os.environ, "APPLIANCE_HOME": str(home), "OMP_WAIT_POLICY": "PASSIVE", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "appliance", "--db", str(db), "--create", "http", "--port", str(free_port())],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    assert proc.stderr is not None
    deadline = time.time() + 180
    while time.time() < deadline:
        line = proc.stderr.readline()
        if "ready on" in line:
            return proc, line.strip().rsplit(" ", 1)[-1]
        if not line and proc.poll() is not None:
            break
    proc.kill()
    raise AssertionError(f"server did not start: {proc.stderr.read()[-2000:]}")


def _post(url: str, path: str, body: dict[str, object]) -> dict[str, object]:
    req = urllib.request.Request(
        url + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(req, timeout=120) as resp:  # noqa: S310 - loopback test server
        return dict(json.loads(resp.read()))


@pytest.mark.duckdb_only  # the file alone after SIGTERM
def test_sigterm_leaves_every_acknowledged_record_in_the_file_alone(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    db, home = tmp_path / "m.duckdb", tmp_path / "home"
    acked: set[str] = set()
    texts = ["order 55501 arrived broken", "订单44144还没发货", "I booked flight MU5101 to Paris"]
    for round_ in range(2):  # a SIGTERM loop: each start reopens what the last stop left
        proc, url = _start(db, home)
        marker = db.with_name(db.name + ".server.json")
        assert json.loads(marker.read_text())["url"] == url
        for text in texts:
            rec = _post(url, "/record", {"text": f"{text} ({round_})", "session_id": "s"})
            acked.add(str(rec["memory_id"]))
        if round_ == 0:  # the warm CLI talks to the server: no model load, no lock error
            monkeypatch.setenv("APPLIANCE_HOME", str(home))
            warm = CliRunner().invoke(main, ["--db", str(db), "record", "order 60606 is late", "--json"])
            assert warm.exit_code == 0, warm.output
            acked.add(json.loads(warm.output)["memory_id"])
            snap = tmp_path / "while-serving.duckdb"
            backed = CliRunner().invoke(main, ["--db", str(db), "backup", str(snap)])
            assert backed.exit_code == 0 and snap.stat().st_size > 0, backed.output
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) in (-signal.SIGTERM, 128 + signal.SIGTERM, 0)
        assert not marker.exists()  # the server said it is gone
        alone = tmp_path / f"copy{round_}" / "m.duckdb"
        alone.parent.mkdir()
        shutil.copy(db, alone)  # the .duckdb file without its .wal
        assert not alone.with_name("m.duckdb.wal").exists()
        with MemoryStore(alone) as store:
            assert acked <= store.records.ids()


@pytest.mark.duckdb_only  # the crash check kills writers of a DuckDB file
def test_crash_check_on_the_real_record_path(tmp_path: Path) -> None:
    report = run_crash_check(tmp_path, kills=2, seed=3, real=True)
    assert report.kills == 2 and report.acknowledged > 0
    assert report.lost == 0 and report.corrupt == 0, report.problems


@pytest.mark.duckdb_only  # the demo's scratch file
def test_the_demo_never_touches_the_users_memory(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    home = tmp_path / "home"
    monkeypatch.setenv("APPLIANCE_HOME", str(home))
    monkeypatch.delenv("APPLIANCE_DB", raising=False)
    for _ in range(2):  # a second demo starts from an empty scratch database again
        res = CliRunner().invoke(main, ["demo"])
        assert res.exit_code == 0, res.output
    assert not (home / "memory.duckdb").exists()
    with MemoryStore(home / "demo.duckdb") as store:
        from appliance.edges.cli.main import DEMO_MESSAGES

        assert len(store.records.ids()) == len(DEMO_MESSAGES)


def test_an_oversized_number_invents_no_id(tmp_path: Path, real_engine) -> None:  # type: ignore[no-untyped-def]
    from appliance.api import Appliance
    from appliance.config import Settings

    settings = Settings.from_env({"APPLIANCE_HOME": str(tmp_path)})
    app = Appliance(db=tmp_path / "m.duckdb", model=real_engine, settings=settings)
    try:
        rec = app.record("I paid $" + "9" * 400 + " for order 12121", session_id="s")
        assert rec.entity_id == "12121"  # the grounded record, not the free decoder's "9034"
        assert all(r.source_id in rec.source_text and r.target_id in rec.source_text for r in rec.relationships)
    finally:
        app.close()
