"""The README's "Use" section, run as written, in order, with the shipped model: every command
line of its bash block (the servers on a free port: started, asked for /health, stopped; the
stdio MCP server initialised by a client), then its Python block. A line a newcomer copies must
work: a placeholder file, a schema the memory refuses, a command that no longer exists fails here.

The folder mirrors a checkout (``.venv``, ``schemas``, ``examples`` linked) so the files the
commands write (an export, imported schemas, a snapshot) land in a temporary folder."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from appliance.config import PROJECT_ROOT

from .conftest import free_port

pytestmark = pytest.mark.real_model

SERVERS = ("serve", "http")  # long-running: started, checked, stopped


def _block(fence: str) -> str:
    readme = (PROJECT_ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Use\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(rf"```{fence}\n(.*?)```", section, re.S)
    assert block is not None, f"the README's Use section has no {fence} block"
    return block.group(1)


def _commands() -> list[str]:
    return [line for line in _block("bash").splitlines() if line.strip() and not line.lstrip().startswith("#")]


def _checkout(tmp: Path) -> Path:
    here = tmp / "checkout"
    here.mkdir()
    for name in (".venv", "schemas", "examples"):
        (here / name).symlink_to(PROJECT_ROOT / name)
    return here


def _serve(argv: list[str], cwd: Path, env: dict[str, str]) -> dict[str, object]:
    port = free_port()
    proc = subprocess.Popen(
        [*argv, "--port", str(port)], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        deadline = time.monotonic() + 180
        while True:
            assert proc.poll() is None, f"{shlex.join(argv)} exited: {proc.stdout.read() if proc.stdout else ''}"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as resp:
                    health: dict[str, object] = json.loads(resp.read())
                    return health
            except OSError:
                assert time.monotonic() < deadline, f"{shlex.join(argv)} never answered /health"
                time.sleep(0.5)
    finally:
        proc.send_signal(signal.SIGTERM)
        # uvicorn re-raises the signal once the database is closed: exit by SIGTERM, said so
        told = proc.communicate(timeout=60)[0]
        assert proc.returncode in (0, -signal.SIGTERM) and "database closed" in told, told


def _mcp_stdio(argv: list[str], cwd: Path, env: dict[str, str]) -> dict[str, object]:
    hello = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(json.dumps(hello) + "\n")
        proc.stdin.flush()
        answer: dict[str, object] = json.loads(proc.stdout.readline())
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
    return answer


def test_every_command_of_the_readme_use_section_runs_as_written(tmp_path: Path) -> None:
    here = _checkout(tmp_path)
    env = {**os.environ, "APPLIANCE_HOME": str(tmp_path / "home"), "OMP_WAIT_POLICY": "PASSIVE"}
    outputs: dict[str, str] = {}
    for line in _commands():
        argv = shlex.split(line, comments=True)
        verb = argv[1]
        if verb in SERVERS:
            assert _serve(argv, here, env)["ok"] is True
            continue
        if verb == "mcp":
            answer = _mcp_stdio(argv, here, env)
            assert "serverInfo" in json.dumps(answer), answer
            continue
        run = subprocess.run(line, shell=True, cwd=here, env=env, capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, f"{line}\n{run.stdout}{run.stderr}"
        assert "Traceback" not in run.stderr, f"{line}\n{run.stderr}"
        outputs[line] = run.stdout
    said = "\n".join(outputs.values())
    assert "4567" in said  # the first record and its recall
    recalled = next(out for line, out in outputs.items() if "recall" in line and "--json" in line)
    assert "4567" in json.loads(recalled)["context"]
    assert (here / "memories.jsonl").stat().st_size > 0
    assert (here / "my_schemas" / "Parking_1.json").exists()
    assert (here / "snapshot.duckdb").exists()
    assert "0 lost" in said  # crash-check
    routed = next(out for line, out in outputs.items() if "--schema travel_assistant" in line)
    assert "TR-12" in routed  # recorded under the travel schema loaded beside customer_service
    python = subprocess.run(
        [str(PROJECT_ROOT / ".venv" / "bin" / "python"), "-c", _block("python")],
        cwd=here,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert python.returncode == 0, python.stdout + python.stderr
    assert "12345" in python.stdout and "SELECT" in python.stdout
