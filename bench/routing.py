"""Schema routing benchmark: with several schemas loaded, how often does the appliance pick the
schema a message belongs to?

* ``own`` — both shipped schemas loaded, each labelled message of the dev set alone;
* ``sgd`` — the multi-service dialogues of ../shared/sgd-dev (two or three services each, their
  schemas imported by the product, loaded together as a user would): every user turn in order,
  one session per dialogue, each turn's previous choice carried forward as the appliance does; a
  turn is scored where sgd-dev labels its service. Dialogues alternate between a *fit* half
  (the weights ``SEMANTIC_WEIGHT``, ``CONTINUES_WEIGHT`` and ``VALUE_WEIGHT`` of
  ``extract/routing.py`` were set on it, ``--fit`` prints the grid of the first two) and a
  *held-out* half.

Each configuration adds one signal: the schemas' words (and categorical values) alone, the
model, the sentence encoder's likeness to event descriptions, the session's previous record.

    .venv/bin/python bench/routing.py [--set own,sgd] [--model smollm2] [--dialogues 518] [--fit]
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from appliance.domain.importers import from_sgd  # noqa: E402
from appliance.domain.loading import load_schema, parse_schema  # noqa: E402
from appliance.domain.schema import MemorySchema  # noqa: E402
from appliance.extract import routing  # noqa: E402
from appliance.extract.routing import choose_schema  # noqa: E402
from appliance.model.embed import embedder_available, shared_embedder  # noqa: E402
from appliance.model.engine import LlamaCppEngine, resolve_model_path  # noqa: E402
from bench.devset import customer_service, travel_assistant  # noqa: E402

SHARED = ROOT.parent / "shared"
# each configuration adds one signal to the one before it
CONFIGS = ("schema words only", "model + words", "+ encoder", "+ encoder + session (shipped)")


def _row(name: str, config: str, n: int, right: int, times: list[float]) -> str:
    times = sorted(times)
    p95 = times[int(0.95 * (len(times) - 1))] if times else 0.0
    median = statistics.median(times) if times else 0.0
    return f"| {name} | {config} | {n} | {right / max(n, 1):.3f} | {median * 1000:.0f} ms | {p95 * 1000:.0f} ms |"


def run_own(engine: Any, embedder: Any) -> list[str]:
    schemas = [load_schema(ROOT / "schemas" / f"{n}.json") for n in ("customer_service", "travel_assistant")]
    cases = [(c[0], "customer_service") for c in customer_service.CASES]
    cases += [(c[0], "travel_assistant") for c in travel_assistant.CASES]
    rows = []
    for label, use_model, use_encoder in zip(CONFIGS, (False, True, True), (False, False, True)):
        right, times, wrong = 0, [], []
        for text, gold in cases:
            t = time.perf_counter()
            got = choose_schema(schemas, engine if use_model else None, text, None, embedder if use_encoder else None)
            times.append(time.perf_counter() - t)
            right += got.domain == gold
            if got.domain != gold:
                wrong.append(text)
        rows.append(_row("own dev set", label, len(cases), right, times))
        rows += [f"    wrong: {w}" for w in wrong[:5]]
    return rows


def sgd_dialogues(n: int) -> tuple[list[dict[str, Any]], dict[str, MemorySchema]]:
    services = {s["service_name"]: s for s in json.loads((SHARED / "sgd-dev" / "schema.json").read_text())}
    schemas = {k: parse_schema(from_sgd(v)) for k, v in services.items()}
    labels = {}
    for line in (SHARED / "sgd-dev" / "turns.jsonl").read_text().splitlines():
        t = json.loads(line)
        labels[(t["dialogue"], t["utterance"])] = t["service"]
    dialogues = [json.loads(line) for line in (SHARED / "sgd-dev" / "dialogues.jsonl").read_text().splitlines()]
    dialogues = [d for d in dialogues if len(d["services"]) > 1]
    random.Random(5).shuffle(dialogues)
    for d in dialogues:
        d["users"] = [
            (t["utterance"], labels.get((d["dialogue"], t["utterance"]))) for t in d["turns"] if t["speaker"] == "USER"
        ]
    return dialogues[:n], schemas


def run_sgd(engine: Any, embedder: Any, n: int) -> tuple[list[str], list[dict[str, Any]]]:
    """One pass over the dialogues: the shipped configuration is ``choose_schema`` itself, its
    choices carried from turn to turn; the others are its signals without the later ones (their
    choices depend on no earlier turn). Per turn the signals are kept for ``--fit``."""
    dialogues, schemas = sgd_dialogues(n)
    signals: list[dict[str, Any]] = []
    times: list[float] = []
    for i, d in enumerate(dialogues):
        loaded = [schemas[s] for s in d["services"]]
        names = [s.domain for s in loaded]
        previous = None
        for text, gold in d["users"]:
            words = choose_schema(loaded, None, text).scores
            base = choose_schema(loaded, engine, text).scores
            t = time.perf_counter()
            shipped = choose_schema(loaded, engine, text, previous, embedder)
            times.append(time.perf_counter() - t)
            previous = shipped.domain
            sem = routing.semantic_fit(loaded, embedder, text) if embedder is not None else np.zeros(len(names))
            signals.append(
                {
                    "dialogue": i,
                    "half": "fit" if i % 2 == 0 else "held-out",
                    "names": names,
                    "gold": gold,
                    "words": [words[x] for x in names],
                    "base": [base[x] for x in names],
                    "sem": list(sem),
                    "shipped": shipped.domain,
                }
            )
    pick: dict[str, Callable[[dict[str, Any]], str]] = {
        CONFIGS[0]: lambda s: s["names"][int(np.argmax(s["words"]))],
        CONFIGS[1]: lambda s: s["names"][int(np.argmax(s["base"]))],
        CONFIGS[2]: lambda s: s["names"][
            int(np.argmax(np.array(s["base"]) + routing.SEMANTIC_WEIGHT * np.array(s["sem"])))
        ],
        CONFIGS[3]: lambda s: s["shipped"],
    }
    rows = []
    for half in ("fit", "held-out"):
        scored = [s for s in signals if s["half"] == half and s["gold"] is not None]
        for label, choose in pick.items():
            right = sum(choose(s) == s["gold"] for s in scored)
            rows.append(
                _row(f"sgd multi-service, {half}", label, len(scored), right, times if label == CONFIGS[3] else [])
            )
    return rows, signals


def fit(signals: list[dict[str, Any]]) -> list[str]:
    """Accuracy on each half for a grid of (semantic, continues) weights, the chain replayed."""

    def accuracy(ws: float, wc: float, half: str) -> float:
        right = total = 0
        previous: dict[int, str] = {}
        for s in signals:
            if s["half"] != half:
                continue
            z = np.array(s["base"]) + ws * np.array(s["sem"])
            if s["dialogue"] in previous:
                z = z + wc * np.array([n == previous[s["dialogue"]] for n in s["names"]], dtype=float)
            previous[s["dialogue"]] = s["names"][int(np.argmax(z))]
            if s["gold"] is not None:
                right += previous[s["dialogue"]] == s["gold"]
                total += 1
        return right / max(total, 1)

    grid = sorted(
        (
            (accuracy(ws, wc, "fit"), ws, wc)
            for ws, wc in itertools.product((0, 5, 10, 15, 20, 25, 30), (0, 1, 2, 3, 4, 5, 6))
        ),
        reverse=True,
    )
    return [
        f"semantic {ws:>4} continues {wc:>3}: fit {a:.3f} held-out {accuracy(ws, wc, 'held-out'):.3f}"
        for a, ws, wc in grid[:12]
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", default="own,sgd")
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--encoder", default="use3")
    ap.add_argument("--dialogues", type=int, default=518, help="multi-service sgd-dev dialogues (all: 518)")
    ap.add_argument("--fit", action="store_true", help="print the weight grid on the fit half")
    args = ap.parse_args()
    engine = LlamaCppEngine(resolve_model_path(args.model, ROOT / "models"))
    embedder = shared_embedder(args.encoder) if embedder_available(args.encoder) else None
    print(
        f"weights: semantic {routing.SEMANTIC_WEIGHT}, continues {routing.CONTINUES_WEIGHT}, "
        f"value {routing.VALUE_WEIGHT}; encoder {args.encoder}"
    )
    print("| set | configuration | messages | accuracy | p50 | p95 |\n|---|---|---|---|---|---|")
    emit: Callable[[list[str]], None] = lambda rows: print("\n".join(rows), flush=True)  # noqa: E731
    if "own" in args.set:
        emit(run_own(engine, embedder))
    if "sgd" in args.set:
        rows, signals = run_sgd(engine, embedder, args.dialogues)
        emit(rows)
        if args.fit:
            emit(fit(signals))


if __name__ == "__main__":
    main()
