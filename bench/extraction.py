"""Extraction accuracy benchmark over the labelled dev set (bench/devset/*.py).

Per model and per decoding mode, prints per-field accuracy (event_type, entity type, id
exact match, state), attribute F1, hallucinated-value rate (stored values not found in the
text, normalised dates/numbers accepted only if they come from a span of the text),
records/s and p50/p95 latency. Modes:

* ``greedy``          whole record decoded greedily under the outlines grammar
* ``grounded-raw``    grounded values, enums by plain likelihood
* ``grounded``        grounded values, enums by calibrated likelihood + schema lexical evidence

Sets: ``--set dev`` (bench/devset, used while building) or ``--set heldout`` (bench/heldout,
written before the tuning it checks and never used to choose anything).
``--errors FILE`` writes every wrong field as JSON lines, for error analysis on the dev set.

Run: .venv/bin/python bench/extraction.py [--models smollm2,gemma3-270m] [--set dev|heldout] [--limit N]
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from appliance.config import PROJECT_ROOT  # noqa: E402
from appliance.domain.loading import load_schema  # noqa: E402
from appliance.extract.extractor import Extractor  # noqa: E402
from appliance.extract.spans import find_spans  # noqa: E402
from appliance.lang import language_for  # noqa: E402
from appliance.model.embed import shared_embedder  # noqa: E402
from appliance.model.engine import LlamaCppEngine, available_models, resolve_model_path  # noqa: E402
from appliance.model.grammar import GrammarCache  # noqa: E402

NOW = datetime(2026, 12, 2, 10)
MODES = {
    "greedy": ("greedy", False, False),
    "grounded-raw": ("grounded", False, False),
    "grounded": ("grounded", True, True),
    "grounded+sem": ("grounded", True, True),  # plus sentence-encoder similarity (--encoder)
}


def _norm(v: Any) -> str:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return f"{float(v):g}"
    return str(v).strip().lower()


def _grounded(value: Any, text: str) -> bool:
    """A stored value is grounded when it is a span of the text or the normalised value of one
    (dates, times, amounts, ranges, numbers written in words)."""
    if value is None or isinstance(value, bool):
        return True
    if str(value) in text:
        return True
    return any(_norm(s.value) == _norm(value) for s in find_spans(language_for(), text, NOW) if s.value is not None)


def evaluate(
    engine: LlamaCppEngine,
    domain: str,
    mode: str,
    limit: int,
    tmp: Path,
    case_set: str = "devset",
    errors: list[dict[str, Any]] | None = None,
    encoder: str = "use3",
) -> dict[str, float]:
    schema = load_schema(PROJECT_ROOT / "schemas" / f"{domain}.json")
    cases = importlib.import_module(f"{case_set}.{domain}").CASES[:limit]
    kind, calibrate, lexical = MODES[mode]
    embedder = None
    if mode == "grounded+sem":
        # the product's sentence encoder (the attribute scorer was fitted with its similarities)
        embedder = shared_embedder(encoder)
    x = Extractor(
        schema,
        engine,
        GrammarCache(tmp),
        mode=kind,
        calibrate=calibrate,
        lexical=lexical,  # type: ignore[arg-type]
        embedder=embedder,
    )
    x.extract("warm up", NOW, retry=False)
    n = len(cases)
    hits = {"event_type": 0, "entity_type": 0, "state": 0, "id_exact": 0, "valid": 0}
    id_total = id_ok = 0
    tp = fp = fn = 0
    values = halluc = 0
    lat = []
    for text, ev, etype, eid, state, attrs in cases:
        t = time.perf_counter()
        r = x.extract(text, NOW, mode=kind, retry=False)  # type: ignore[arg-type]
        lat.append(time.perf_counter() - t)
        d = r.draft
        if d is None:
            fn += len(attrs)
            id_total += eid is not None
            continue
        hits["valid"] += 1
        if errors is not None:
            got = (d.event_type, d.entity.type, d.entity.id, d.entity.state)
            for name, want, have in zip(("event_type", "entity_type", "id", "state"), (ev, etype, eid, state), got):
                if want != have:
                    errors.append(
                        {"domain": domain, "mode": mode, "field": name, "text": text, "want": want, "got": have}
                    )
        hits["event_type"] += d.event_type == ev
        hits["entity_type"] += d.entity.type == etype
        hits["state"] += d.entity.state == state
        hits["id_exact"] += d.entity.id == eid
        if eid is not None:
            id_total += 1
            id_ok += d.entity.id == eid
        pred = {k: _norm(v) for k, v in d.entity.attributes.items() if v is not None}
        gold = {k: _norm(v) for k, v in attrs.items() if v is not None}
        if errors is not None:
            for name in sorted(set(pred) | set(gold)):
                if pred.get(name) != gold.get(name):
                    errors.append(
                        {
                            "domain": domain,
                            "mode": mode,
                            "field": f"attributes.{name}",
                            "text": text,
                            "want": gold.get(name),
                            "got": pred.get(name),
                        }
                    )
        tp += len(set(pred.items()) & set(gold.items()))
        fp += len(set(pred.items()) - set(gold.items()))
        fn += len(set(gold.items()) - set(pred.items()))
        for v in [d.entity.id, *d.entity.attributes.values()]:
            if v is not None:
                values += 1
                halluc += not _grounded(v, text)
    prec = tp / (tp + fp) if tp + fp else 0.0
    rec = tp / (tp + fn) if tp + fn else 0.0
    total = sum(lat)
    return {
        "cases": n,
        "valid": hits["valid"] / n,
        "event_type": hits["event_type"] / n,
        "entity_type": hits["entity_type"] / n,
        "id_exact_all": hits["id_exact"] / n,
        "id_exact_when_gold_has_id": id_ok / id_total if id_total else 0.0,
        "state": hits["state"] / n,
        "attr_f1": 2 * prec * rec / (prec + rec) if prec + rec else 0.0,
        "hallucinated_values": halluc / values if values else 0.0,
        "records_per_s": n / total,
        "p50_s": statistics.median(lat),
        "p95_s": sorted(lat)[int(0.95 * (len(lat) - 1))],
    }


def _available() -> list[str]:
    """Every model this machine can run without a download: the shipped aliases, then each
    other GGUF in models/ (the assembled Gemma file is its alias, not a second model)."""
    names: list[str] = []
    seen: set[Path] = set()
    for m in available_models(PROJECT_ROOT / "models"):
        try:
            path = resolve_model_path(m["name"], PROJECT_ROOT / "models").resolve()
        except Exception as exc:  # noqa: BLE001 - reported, the others still run
            print(f"{m['name']}: unavailable ({exc})", file=sys.stderr)
            continue
        if path not in seen:
            seen.add(path)
            names.append(m["name"])
    return names


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--models", default="all", help="comma-separated, or all: every model available here")
    ap.add_argument("--modes", default="greedy,grounded-raw,grounded,grounded+sem")
    ap.add_argument("--domains", default="customer_service,travel_assistant")
    ap.add_argument("--limit", type=int, default=10_000)
    ap.add_argument("--set", choices=("dev", "heldout"), default="dev")
    ap.add_argument("--errors", type=Path, help="write wrong fields here (JSON lines)")
    ap.add_argument("--encoder", default="use3", help="sentence encoder of grounded+sem (use3 | minilm)")
    args = ap.parse_args()
    case_set = "devset" if args.set == "dev" else "heldout"
    errors: list[dict[str, Any]] | None = [] if args.errors else None
    results: list[dict[str, Any]] = []
    models = _available() if args.models == "all" else args.models.split(",")
    with tempfile.TemporaryDirectory() as d:
        for model in models:
            try:
                engine = LlamaCppEngine(resolve_model_path(model, PROJECT_ROOT / "models"))
            except Exception as exc:
                print(f"{model}: unavailable ({exc})", file=sys.stderr)
                continue
            for domain in args.domains.split(","):
                for mode in args.modes.split(","):
                    row = {
                        "model": model,
                        "domain": domain,
                        "mode": mode,
                        "set": args.set,
                        **evaluate(engine, domain, mode, args.limit, Path(d) / model, case_set, errors, args.encoder),
                    }
                    results.append(row)
                    print(json.dumps(row), file=sys.stderr, flush=True)
    if args.errors and errors is not None:
        args.errors.write_text("".join(json.dumps(e, ensure_ascii=False) + "\n" for e in errors))
    cols = [
        "model",
        "domain",
        "mode",
        "set",
        "cases",
        "valid",
        "event_type",
        "entity_type",
        "id_exact_when_gold_has_id",
        "id_exact_all",
        "state",
        "attr_f1",
        "hallucinated_values",
        "records_per_s",
        "p50_s",
        "p95_s",
    ]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in results:
        print("| " + " | ".join(f"{r[c]:.2f}" if isinstance(r[c], float) else str(r[c]) for c in cols) + " |")


if __name__ == "__main__":
    main()
