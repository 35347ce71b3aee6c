"""Crash-safety harness: kill a recording process with SIGKILL at random points, reopen the
database and check that every acknowledged record is intact and nothing is half-written.

Used by ``tests/test_crash.py`` (a few kills) and ``appliance crash-check`` (many)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ..store import MemoryStore, check_integrity

__all__ = ["CrashReport", "run_crash_check"]

DEMO = Path(__file__).parent / "cli" / "demo.json"  # the real child records the demo's messages (EN, ZH)

# The child records through the real facade and prints each memory id only after record()
# returned, i.e. after COMMIT. ``fake``: a FakeEngine and no semantic index (fast, many kills);
# ``real``: the real record path — the shipped model, the sentence encoder's vectors, entity
# resolution, two schemas routed per utterance.
CHILD = r"""
import json, os, sys
from appliance.api import Appliance
from appliance.config import Settings
from appliance.testing import FakeEngine
db, grammars, mode = sys.argv[1], sys.argv[2], sys.argv[3]
if mode == "real":
    s = Settings.from_env({**os.environ, "APPLIANCE_HOME": grammars})
    app = Appliance(db=db, schema=["customer_service", "travel_assistant"], settings=s)
    app.warm_up()
else:
    s = Settings.from_env({"APPLIANCE_HOME": grammars, "APPLIANCE_GRAMMARS": grammars, "APPLIANCE_SEMANTIC": "off"})
    app = Appliance(db=db, model=FakeEngine(preferences={"Order": 5.0}), settings=s)
texts = json.loads(open(sys.argv[4], encoding="utf-8").read())["messages"] if mode == "real" else []
print("READY", flush=True)
i = 0
while True:
    i += 1
    text = texts[i % len(texts)] if texts else f"order {40000 + i % 50} for user U-{i % 7}, paid {i} yuan"
    rec = app.record(text, session_id="crash")
    print(rec.memory_id, flush=True)
"""


@dataclass
class CrashReport:
    kills: int = 0
    acknowledged: int = 0
    lost: int = 0
    corrupt: int = 0
    problems: list[str] | None = None

    def line(self) -> str:
        return f"{self.kills} kills, {self.acknowledged} acknowledged records, {self.lost} lost, {self.corrupt} corrupt"


def run_crash_check(
    workdir: Path, kills: int, seed: int = 0, max_delay: float | None = None, real: bool = False
) -> CrashReport:
    """Start, kill -9 at a random moment, verify; repeat ``kills`` times on one database
    (``real``: the shipped model's whole record path, see ``CHILD``)."""
    max_delay = max_delay if max_delay is not None else (10.0 if real else 0.6)
    rng = random.Random(seed)
    db = workdir / "crash.duckdb"
    report = CrashReport(problems=[])
    acked: set[str] = set()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    for _ in range(kills):
        proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(db), str(workdir / "g"), "real" if real else "fake", str(DEMO)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert proc.stdout is not None
        ready = proc.stdout.readline().strip()
        if ready != "READY":
            err = proc.stderr.read() if proc.stderr else ""
            proc.kill()
            raise RuntimeError(f"crash-check child did not start: {ready!r} {err[-500:]}")
        time.sleep(rng.uniform(0.01, max_delay))
        proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate()
        acked |= {line.strip() for line in out.splitlines() if len(line.strip()) == 32}
        report.kills += 1
        try:
            with MemoryStore(db) as store:
                present = store.records.ids()
                missing = acked - present
                report.lost += len(missing)
                problems = check_integrity(store)
        except Exception as exc:  # a database that no longer opens is the worst outcome
            report.corrupt += 1
            report.problems.append(f"reopen failed: {exc}")  # type: ignore[union-attr]
            break
        if problems:
            report.corrupt += 1
            report.problems.extend(problems)  # type: ignore[union-attr]
    report.acknowledged = len(acked)
    return report
