"""Zero-shot extraction on schemas and dialogues nobody here wrote (../shared/sgd-dev, ../shared/crosswoz-dev).

For each set: the product's importer turns the source schema into memory schemas (SGD: one per
service, from SGD's own schema.json; CrossWOZ: one schema with the five domains as entity types,
written from the domain and slot names only), every user turn is recorded through
``Appliance.record`` (one session per dialogue, a fresh database per schema), and the stored
record is scored against the gold annotation:

* intent accuracy (SGD: event type = the active intent; CrossWOZ: entity type = the domain);
* slot precision / recall / F1 — a predicted value matches when its surface span equals a gold
  surface (case-insensitive) or its normalised value equals the gold's under the same readers;
* hallucinated values — neither a span of the text nor a value of the schema;
* silent misses — stored ``ok`` but wrong (intent wrong, or gold slots and none found);
* needs_review share and precision (the flagged records that were indeed wrong);
* reliability — confidence bin → share of records exactly right;
* latency p50 / p95 per record;

with k = 0 corrections and with k corrected turns per service (taken from dialogues outside the
scored ones; with ``--all``, their dialogues are set aside and every other turn is scored), and the naive peer — one outlines JSON-Schema call per turn with the same model —
on the same turns in the same run.

Sets (``--set``): sgd (sgd-dev), sgd-fit (its 13 services not in sgd-dev), sgdx (sgd-dev's turns
under SGD-X's five reworded schemas, or one: sgdx-v3), crosswoz, crosswoz-fit, crosswoz-val (the
committed halves of crosswoz-dev, ``splits/crosswoz-dev.json``). ``APPLIANCE_SHARED`` points at
another folder laid out like ``../shared``.

Run: .venv/bin/python bench/zero_shot.py [--set sgd,sgdx,crosswoz-val] [--sample 300 | --all] [--k 0,5]
     [--peer] [--model smollm2] [--errors FILE [--every]]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from appliance.api import Appliance
from appliance.config import PROJECT_ROOT, Settings
from appliance.domain.drafts import record_json_schema
from appliance.domain.importers import from_sgd, infer_kind
from appliance.domain.loading import parse_schema
from appliance.domain.schema import MemorySchema
from appliance.lang import language_for
from appliance.lang.dates import find_dates
from appliance.lang.numbers import find_numbers
from appliance.lang.times import find_times
from appliance.model.embed import embedder_available, shared_embedder
from appliance.model.engine import LlamaCppEngine, resolve_model_path

# the labelled sets; APPLIANCE_SHARED points at another folder laid out the same way
SHARED = Path(os.environ.get("APPLIANCE_SHARED", PROJECT_ROOT.parent / "shared"))
CROSSWOZ_SPLIT = Path(__file__).resolve().parent / "splits" / "crosswoz-dev.json"
NOW = datetime(2026, 12, 2, 10, tzinfo=UTC)
LANG = language_for()


@dataclass
class Turn:
    schema: str  # SGD service / "crosswoz"
    dialogue: str
    text: str
    intent: str  # gold intent (SGD) or domain (CrossWOZ)
    slots: dict[str, list[str]]


@dataclass
class Result:
    turn: Turn
    intent: str | None
    values: dict[str, Any]
    spans: dict[str, str]
    status: str
    confidence: float
    seconds: float
    tp: int = 0
    fp: int = 0
    fn: int = 0
    hallucinated: int = 0
    misses: list[str] = field(default_factory=list)


# --- data -----------------------------------------------------------------------------------------
def _sgd_turns(folder: Path, services: set[str] | None = None) -> list[Turn]:
    return [
        Turn(t["service"], t["dialogue"], t["utterance"], t["intent"], t["slots"])
        for t in map(json.loads, (folder / "turns.jsonl").read_text().splitlines())
        if services is None or t["service"] in services
    ]


def _sgd_schemas(folder: Path, services: set[str] | None = None) -> dict[str, MemorySchema]:
    found = json.loads((folder / "schema.json").read_text())
    return {
        s["service_name"]: parse_schema(from_sgd(s)) for s in found if services is None or s["service_name"] in services
    }


def sgd_turns() -> list[Turn]:
    return _sgd_turns(SHARED / "sgd-dev")


def sgd_schemas() -> dict[str, MemorySchema]:
    return _sgd_schemas(SHARED / "sgd-dev")


def sgd_fit_services() -> set[str]:
    """sgd-fit's services that sgd-dev does not have: fitting on them keeps sgd-dev zero-shot."""
    dev = {s["service_name"] for s in json.loads((SHARED / "sgd-dev" / "schema.json").read_text())}
    fit = {s["service_name"] for s in json.loads((SHARED / "sgd-fit" / "schema.json").read_text())}
    return fit - dev


def crosswoz_turns(half: str | None = None) -> list[Turn]:
    """CrossWOZ-dev's turns; ``half`` "fit" or "validation" keeps that half's dialogues
    (``splits/crosswoz-dev.json``, committed)."""
    keep = set(json.loads(CROSSWOZ_SPLIT.read_text())[half]) if half else None
    return [
        Turn("crosswoz", t["dialogue"], t["utterance"], t["domain"], {k: [v] for k, v in t["slots"].items()})
        for t in map(json.loads, (SHARED / "crosswoz-dev" / "turns.jsonl").read_text().splitlines())
        if keep is None or t["dialogue"] in keep
    ]


def load_set(name: str) -> tuple[list[Turn], dict[str, MemorySchema]]:
    """A named set's turns and schemas: sgd (sgd-dev), sgd-fit (its services not in sgd-dev),
    sgdx-v1 … sgdx-v5 (sgd-dev's turns under SGD-X's reworded schemas), crosswoz (all of
    crosswoz-dev), crosswoz-fit / crosswoz-val (its committed halves)."""
    if name == "sgd":
        return sgd_turns(), sgd_schemas()
    if name == "sgd-fit":
        services = sgd_fit_services()
        return _sgd_turns(SHARED / "sgd-fit", services), _sgd_schemas(SHARED / "sgd-fit", services)
    if name.startswith("sgdx-"):
        folder = SHARED / "sgd-x-dev" / name.removeprefix("sgdx-")
        return _sgd_turns(folder), _sgd_schemas(folder)
    halves = {"crosswoz": None, "crosswoz-fit": "fit", "crosswoz-val": "validation"}
    if name in halves:
        return crosswoz_turns(halves[name]), {"crosswoz": crosswoz_schema()}
    raise SystemExit(f"unknown set {name!r}: sgd, sgd-fit, sgdx-v1..v5, crosswoz, crosswoz-fit, crosswoz-val")


def crosswoz_schema() -> MemorySchema:
    """One schema, the five domains as entity types, written from the domain and slot names only.
    Kinds: "酒店设施-…" slots are yes/no facilities (the data's README says so); the others get
    the kind their name points to through the importer's ``infer_kind``."""
    domains = json.loads((SHARED / "crosswoz-dev" / "domains.json").read_text())
    zh = language_for(("zh",))
    entities: dict[str, Any] = {}
    events = []
    for domain, slots in domains.items():
        attrs = []
        for slot in slots:
            if slot.startswith("酒店设施-"):
                attrs.append({"name": slot, "kind": "boolean"})
                continue
            kind, fmt = infer_kind(slot, "", zh)
            attrs.append({"name": slot, "kind": kind, **({"format": fmt} if fmt else {})})
        entities[domain] = {"attributes": attrs, "id_attribute": None, "resolution": {"session_latest": True}}
        events.append({"name": f"{domain}_noted", "description": domain, "entity": domain, "attributes": list(slots)})
    return parse_schema(
        {
            "schema_version": "1.0",
            "domain": "crosswoz",
            "languages": ["zh", "en"],
            "entities": entities,
            "event_types": events,
        }
    )


def sample_dialogues(turns: list[Turn], n: int | None, seed: int) -> tuple[list[Turn], list[Turn]]:
    """Whole dialogues, shuffled, until at least ``n`` turns (all when n is None); the rest."""
    by_dialogue: dict[str, list[Turn]] = defaultdict(list)
    for t in turns:
        by_dialogue[t.dialogue].append(t)
    ids = sorted(by_dialogue)
    random.Random(seed).shuffle(ids)
    picked: list[Turn] = []
    used: set[str] = set()
    for d in ids:
        if n is not None and len(picked) >= n:
            break
        picked += by_dialogue[d]
        used.add(d)
    rest = [t for d in ids if d not in used for t in by_dialogue[d]]
    return picked, rest


# --- scoring ------------------------------------------------------------------------------------------
def gold_norm(kind: str, text: str, now: datetime = NOW) -> Any:
    """A gold value as the product's readers normalise it (relative dates against ``now``)."""
    t = text.strip()
    if kind == "date":
        found = [d.value for d in find_dates(LANG, t, now) if d.value]
        return found[0] if found else t.lower()
    if kind == "time":
        found = [x.value for x in find_times(LANG, t)]
        return found[0] if found else t.lower()
    if kind == "number":
        nums = find_numbers(LANG, t)
        if nums:
            v = nums[0].value
            return v if isinstance(v, str) else float(v)
        return t.lower()
    if kind == "boolean":
        return t.lower() in ("true", "是", "yes")
    return t.lower()


def predicted_norm(kind: str, value: Any) -> Any:
    if kind == "number" and not isinstance(value, str):
        return float(value)
    if kind == "boolean":
        return bool(value)
    if isinstance(value, list):
        return str(value[0]).lower() if value else ""
    return str(value).strip().lower()


def score(r: Result, schema: MemorySchema, entity: str | None) -> None:
    ent = schema.entity(entity) if entity and entity in schema.entity_names else None
    kinds = {a.name: a.kind for e in schema.entities for a in e.attributes}
    enum_values = {str(v).lower() for e in schema.entities for a in e.attributes for v in a.enum_values}
    gold = r.turn.slots
    matched: set[str] = set()
    for name, value in r.values.items():
        if value is None:
            continue
        kind = kinds.get(name, "string")
        surface = r.spans.get(name, "")
        if surface and surface not in r.turn.text and str(value).lower() not in enum_values and kind != "boolean":
            r.hallucinated += 1
        golds = gold.get(name, [])
        ok = any(surface and surface.lower() == g.lower() for g in golds) or any(
            predicted_norm(kind, value) == gold_norm(kind, g) for g in golds
        )
        if ok:
            r.tp += 1
            matched.add(name)
        else:
            r.fp += 1
            r.misses.append(f"FP {name}={value!r} (surface {surface!r}; gold {golds})")
    for name, golds in gold.items():
        if name not in matched:
            r.fn += 1
            r.misses.append(f"FN {name} gold {golds} got {r.values.get(name)!r}")
    del ent


def right(r: Result) -> bool:
    return r.intent == r.turn.intent and r.fp == 0 and r.fn == 0


def wrong(r: Result) -> bool:
    return r.intent != r.turn.intent or (bool(r.turn.slots) and r.tp == 0)


def summary(results: list[Result]) -> dict[str, Any]:
    n = len(results)
    tp = sum(r.tp for r in results)
    fp = sum(r.fp for r in results)
    fn = sum(r.fn for r in results)
    p = tp / (tp + fp) if tp + fp else 0.0
    rc = tp / (tp + fn) if tp + fn else 0.0
    values = tp + fp
    review = [r for r in results if r.status == "needs_review"]
    lat = sorted(r.seconds for r in results) or [0.0]
    return {
        "turns": n,
        "intent": sum(r.intent == r.turn.intent for r in results) / n if n else 0.0,
        "slot_p": p,
        "slot_r": rc,
        "slot_f1": 2 * p * rc / (p + rc) if p + rc else 0.0,
        "hallucinated": sum(r.hallucinated for r in results) / values if values else 0.0,
        "silent_miss": sum(r.status == "ok" and wrong(r) for r in results) / n if n else 0.0,
        "review_share": len(review) / n if n else 0.0,
        "review_precision": sum(wrong(r) for r in review) / len(review) if review else 0.0,
        "exact": sum(right(r) for r in results) / n if n else 0.0,
        "p50_s": statistics.median(lat),
        "p95_s": lat[int(0.95 * (len(lat) - 1))],
    }


def reliability(results: list[Result]) -> list[tuple[str, int, float]]:
    bins = [(0.0, 0.5), (0.5, 0.7), (0.7, 0.8), (0.8, 0.9), (0.9, 1.01)]
    out = []
    for lo, hi in bins:
        inside = [r for r in results if lo <= r.confidence < hi]
        acc = sum(r.intent == r.turn.intent and r.fp == 0 for r in inside) / len(inside) if inside else 0.0
        out.append((f"{lo:.1f}-{min(hi, 1.0):.1f}", len(inside), acc))
    return out


# --- runners -------------------------------------------------------------------------------------------
def run_appliance(
    turns: list[Turn],
    schemas: dict[str, MemorySchema],
    engine: Any,
    embedder: Any,
    tmp: Path,
    corrections: dict[str, list[Turn]] | None = None,
) -> list[Result]:
    settings = Settings.from_env({"APPLIANCE_HOME": str(tmp), "APPLIANCE_GRAMMARS": str(tmp / "g")})
    results: list[Result] = []
    by_schema: dict[str, list[Turn]] = defaultdict(list)
    for t in turns:
        by_schema[t.schema].append(t)
    for name, group in by_schema.items():
        schema = schemas[name]
        db = tmp / f"{name}-{random.randrange(1 << 30)}.duckdb"
        app = Appliance(schema=schema, db=db, model=engine, settings=settings, embedder=embedder)
        for t in (corrections or {}).get(name, []):
            app.teach(t.text, _gold_record(schema, t), session_id=f"teach-{t.dialogue}", now=NOW)
        for i, t in enumerate(group):
            start = time.perf_counter()
            rec = app.record(t.text, session_id=t.dialogue, now=NOW + timedelta(seconds=i))
            secs = time.perf_counter() - start
            intent = rec.event_type if name != "crosswoz" else rec.entity_type
            r = Result(t, intent, dict(rec.attributes), dict(rec.spans), rec.status, rec.confidence, secs)
            score(r, schema, rec.entity_type)
            results.append(r)
        app.close()
    return results


def _gold_record(schema: MemorySchema, t: Turn) -> dict[str, Any]:
    """A corrected record for a teaching turn: its gold event, entity and values."""
    if t.schema == "crosswoz":
        ent = schema.entity(t.intent)
        event = next(ev.name for ev in schema.event_types if ev.entity == ent.name)
    else:
        event = t.intent
        ent = schema.entities[0]
    attrs: dict[str, Any] = {}
    for name, golds in t.slots.items():
        a = ent.attribute(name)
        if a is None or not golds or golds[0] == "dontcare":
            continue
        g = golds[0]
        if a.kind == "number":
            v = gold_norm("number", g)
            attrs[name] = v if not isinstance(v, str) or any(ch.isdigit() for ch in v) else None
        elif a.kind == "boolean":
            attrs[name] = gold_norm("boolean", g)
        elif a.kind == "enum":
            attrs[name] = g if g in a.enum_values else None
        elif a.kind in ("date", "time"):
            v = gold_norm(a.kind, g)
            attrs[name] = v if v != g.lower() else None
        else:
            attrs[name] = g
    return {
        "event_type": event,
        "entity_type": ent.name,
        "attributes": {k: v for k, v in attrs.items() if v is not None},
    }


def run_peer(turns: list[Turn], schemas: dict[str, MemorySchema], model_path: Path) -> list[Result]:
    """The naive peer: one outlines JSON-Schema call per turn with the same GGUF."""
    import llama_cpp
    import outlines
    from outlines.types import JsonSchema

    llm = llama_cpp.Llama(model_path=str(model_path), n_ctx=2048, verbose=False)
    model = outlines.from_llamacpp(llm)
    results = []
    for t in turns:
        schema = schemas[t.schema]
        js = record_json_schema(schema)
        prompt = (
            "Extract one memory record from the message as JSON that follows this schema.\n"
            f"Schema: {json.dumps(js, ensure_ascii=False)}\nMessage: {t.text}\nJSON: "
        )
        start = time.perf_counter()
        try:
            raw = model(prompt, output_type=JsonSchema(json.dumps(js)), max_tokens=256, temperature=0.0)
            data = json.loads(raw)
            intent = data.get("event_type") if t.schema != "crosswoz" else data.get("entity", {}).get("type")
            values = {k: v for k, v in data.get("entity", {}).get("attributes", {}).items() if v is not None}
            status = "ok"
        except Exception as exc:  # noqa: BLE001 - the peer's failures are part of the result
            intent, values, status = None, {}, f"failed: {type(exc).__name__}"
        secs = time.perf_counter() - start
        spans = {k: str(v) for k, v in values.items() if str(v) in t.text}
        r = Result(t, intent, values, spans, status, 1.0, secs)
        score(r, schema, None)
        r.hallucinated = sum(1 for k, v in values.items() if str(v) not in t.text and not isinstance(v, bool))
        results.append(r)
    return results


def majority(turns: list[Turn]) -> float:
    """Always choosing each schema's most common intent (computed on the scored turns)."""
    by: dict[str, Counter[str]] = defaultdict(Counter)
    for t in turns:
        by[t.schema][t.intent] += 1
    return sum(c.most_common(1)[0][1] for c in by.values()) / len(turns) if turns else 0.0


# --- main ------------------------------------------------------------------------------------------------
COLS = [
    "turns",
    "intent",
    "slot_p",
    "slot_r",
    "slot_f1",
    "hallucinated",
    "silent_miss",
    "review_share",
    "review_precision",
    "exact",
    "p50_s",
    "p95_s",
]


def _row(label: str, s: dict[str, Any]) -> str:
    return (
        "| " + label + " | " + " | ".join(f"{s[c]:.2f}" if isinstance(s[c], float) else str(s[c]) for c in COLS) + " |"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", default="sgd,crosswoz")
    ap.add_argument("--sample", type=int, default=300, help="turns per set (whole dialogues); ignored with --all")
    ap.add_argument("--all", action="store_true", help="every turn of each set")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--k", default="0", help="corrected turns per schema, comma-separated (e.g. 0,5)")
    ap.add_argument("--peer", action="store_true", help="also run the naive outlines peer on the same turns")
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--encoder", default="use3")
    ap.add_argument("--errors", type=Path, help="write each turn's misses here (JSON lines)")
    ap.add_argument("--every", action="store_true", help="with --errors: write every turn, right ones too")
    args = ap.parse_args()
    path = resolve_model_path(args.model, PROJECT_ROOT / "models")
    engine = LlamaCppEngine(path)
    embedder = shared_embedder(args.encoder) if embedder_available(args.encoder) else None
    table: list[str] = []
    errors: list[dict[str, Any]] = []
    report: dict[str, Any] = {"model": args.model, "encoder": args.encoder if embedder else None}
    names = [n for x in args.set.split(",") for n in ([f"sgdx-v{i}" for i in range(1, 6)] if x == "sgdx" else [x])]
    for set_name in names:
        all_turns, schemas = load_set(set_name)
        turns, rest = sample_dialogues(all_turns, None if args.all else args.sample, args.seed)
        report[f"{set_name}.majority_intent"] = majority(turns)
        for k in (int(x) for x in args.k.split(",")):
            corrections: dict[str, list[Turn]] = defaultdict(list)
            scored = turns
            if k:
                pool = (rest or turns)[:]  # --all: nothing is left over, so some dialogues are set aside
                random.Random(args.seed + k).shuffle(pool)
                by_domain: dict[str, list[Turn]] = defaultdict(list)
                for t in pool:
                    key = t.schema if t.schema != "crosswoz" else t.intent
                    if len(by_domain[key]) < k:
                        by_domain[key].append(t)
                for ts in by_domain.values():
                    corrections[ts[0].schema] += ts
                if not rest:  # the corrected turns' dialogues are not scored
                    aside = {t.dialogue for ts in by_domain.values() for t in ts}
                    scored = [t for t in turns if t.dialogue not in aside]
            with tempfile.TemporaryDirectory() as d:
                results = run_appliance(scored, schemas, engine, embedder, Path(d), corrections)
            overall = summary(results)
            report[f"{set_name}.k{k}"] = overall
            report[f"{set_name}.k{k}.reliability"] = reliability(results)
            table.append(_row(f"{set_name} | appliance k={k} | all", overall))
            by_schema: dict[str, list[Result]] = defaultdict(list)
            for r in results:
                by_schema[r.turn.schema if r.turn.schema != "crosswoz" else r.turn.intent].append(r)
            for name, rs in sorted(by_schema.items()):
                s = summary(rs)
                report[f"{set_name}.k{k}.{name}"] = s
                table.append(_row(f"{set_name} | appliance k={k} | {name}", s))
            print(json.dumps({"set": set_name, "k": k, **overall}), file=sys.stderr, flush=True)
            if args.errors is not None:
                errors += [
                    {
                        "set": set_name,
                        "k": k,
                        "schema": r.turn.schema,
                        "dialogue": r.turn.dialogue,
                        "text": r.turn.text,
                        "gold_intent": r.turn.intent,
                        "intent": r.intent,
                        "status": r.status,
                        "confidence": r.confidence,
                        "wrong": wrong(r),
                        "misses": r.misses,
                    }
                    for r in results
                    if args.every or r.misses or r.intent != r.turn.intent
                ]
            # each configuration's rows and misses as soon as they exist: a run stopped during the
            # (slow) peer keeps the per-schema numbers
            print("\n".join(table), file=sys.stderr, flush=True)
            if args.errors is not None:
                args.errors.write_text("".join(json.dumps(e, ensure_ascii=False) + "\n" for e in errors))
        if args.peer:
            peer = run_peer(turns, schemas, path)
            s = summary(peer)
            report[f"{set_name}.peer"] = s
            table.append(_row(f"{set_name} | naive outlines peer | all", s))
            print(json.dumps({"set": set_name, "peer": True, **s}), file=sys.stderr, flush=True)
    if args.errors is not None:
        args.errors.write_text("".join(json.dumps(e, ensure_ascii=False) + "\n" for e in errors))
    print("| set | system | schema | " + " | ".join(COLS) + " |")
    print("|" + "---|" * (len(COLS) + 3))
    print("\n".join(table))
    print(json.dumps(report, ensure_ascii=False, default=str), file=sys.stderr)


if __name__ == "__main__":
    main()
