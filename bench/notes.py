"""Everyday notes on schemas users wrote: the write path scored record by record.

A set is a folder of ``<slug>.schema.json`` + ``<slug>.notes.jsonl`` files (the format of
``../shared/notes-fit``, whose README defines it). Each schema gets a fresh database; its notes are
recorded in order through ``Appliance.record`` in one session, each at its own message time, so
a later note naming an entity can update it. Each stored record is scored against its gold one:

* event type, entity type, and the entity's key (the key attribute's value, or one of
  ``key_alts``);
* attribute precision / recall / F1 over the values the note states;
* negated values: booleans and enums of notes tagged ``negation`` (decided by negation or
  paraphrase: "no longer", "isn't", "不再");
* records fully right (event, entity, key and exactly the gold attributes);
* trust of the status flag: wrong records stored ``ok`` (share of the wrong ones) and the
  precision of ``needs_review`` (share of flagged records that are really wrong), with a
  reliability table (confidence bin → share fully right);
* latency p50 per record.

The fit set (``../shared/notes-fit``) and the validation set (``bench/notesets/val``, written and
committed before any run on it) are reported separately: nothing may be fitted on the second.

Run: .venv/bin/python bench/notes.py [--set fit,val] [--model smollm2] [--only pets,bills]
     [--errors FILE] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from appliance.api import Appliance
from appliance.config import PROJECT_ROOT, Settings
from appliance.domain.loading import parse_schema
from appliance.domain.schema import MemorySchema
from appliance.model.embed import shared_embedder
from appliance.model.engine import LlamaCppEngine, resolve_model_path

SETS = {
    "fit": PROJECT_ROOT.parent / "shared" / "notes-fit",
    "val": Path(__file__).resolve().parent / "notesets" / "val",
}
CJK = range(0x4E00, 0xA000)


@dataclass
class Scored:
    note: dict[str, Any]
    schema: str
    event: str | None
    entity: str | None
    attributes: dict[str, Any]
    status: str
    confidence: float
    seconds: float
    event_ok: bool = False
    entity_ok: bool = False
    key_ok: bool = False
    tp: int = 0
    fp: int = 0
    fn: int = 0
    negated: list[bool] = field(default_factory=list)  # one per negation-decided gold value
    misses: list[str] = field(default_factory=list)

    @property
    def fully_right(self) -> bool:
        return self.event_ok and self.entity_ok and self.key_ok and self.fp == 0 and self.fn == 0

    @property
    def chinese(self) -> bool:
        return any(ord(ch) in CJK for ch in self.note["text"])


# --- values ------------------------------------------------------------------------------------------
def _text(v: Any) -> str:
    return " ".join(str(v).split()).strip(" .,;:!?'\"“”‘’。，！？").casefold()


def same_value(kind: str, predicted: Any, gold: Any) -> bool:
    """The predicted value is the gold one under the schema's kind (numbers within a cent,
    dates and times by their ISO text, lists as sets, strings case- and space-insensitively)."""
    if predicted is None:
        return False
    if kind == "boolean" or isinstance(gold, bool):
        return isinstance(predicted, bool) and predicted == gold
    if kind == "number" or (isinstance(gold, (int, float)) and not isinstance(gold, bool)):
        try:
            return abs(float(predicted) - float(gold)) < 0.005
        except (TypeError, ValueError):
            return False
    if kind == "date":
        return str(predicted)[:10] == str(gold)
    if kind == "time":
        return str(predicted)[:5] == str(gold)
    if isinstance(gold, list):
        items = predicted if isinstance(predicted, list) else [predicted]
        return {_text(x) for x in items} == {_text(x) for x in gold}
    if isinstance(predicted, list):
        return len(predicted) == 1 and _text(predicted[0]) == _text(gold)
    return _text(predicted) == _text(gold)


def score(s: Scored, schema: MemorySchema) -> None:
    gold = s.note["gold"]
    s.event_ok = s.event in {gold["event_type"], *s.note.get("event_alts", [])}
    s.entity_ok = s.entity == gold["entity_type"]
    ent = schema.entity(gold["entity_type"])
    kinds = {a.name: a.kind for a in ent.attributes}
    keys = [gold["key"], *s.note.get("key_alts", [])]
    key_attr = ent.key[0] if ent.key else None
    gold_attrs: dict[str, Any] = dict(gold["attributes"])
    if s.entity_ok and key_attr is not None:
        s.key_ok = any(same_value("string", s.attributes.get(key_attr), k) for k in keys)
    negation = "negation" in s.note.get("tags", [])
    for name, value in s.attributes.items():
        if value is None:
            continue
        want = gold_attrs.get(name)
        alts = keys if name == key_attr and s.entity_ok else [want]
        if s.entity_ok and name in gold_attrs and any(same_value(kinds.get(name, "string"), value, w) for w in alts):
            s.tp += 1
        else:
            s.fp += 1
            s.misses.append(f"FP {name}={value!r} (gold {want!r})")
    for name, want in gold_attrs.items():
        got = s.attributes.get(name) if s.entity_ok else None
        alts = keys if name == key_attr else [want]
        hit = any(same_value(kinds.get(name, "string"), got, w) for w in alts)
        if not hit:
            s.fn += 1
            if got is None:
                s.misses.append(f"FN {name} gold {want!r}")
        if negation and kinds.get(name) in ("boolean", "enum"):
            s.negated.append(hit)
    if not s.event_ok:
        s.misses.insert(0, f"EVENT {s.event} gold {gold['event_type']}")
    if not s.entity_ok:
        s.misses.insert(0, f"ENTITY {s.entity} gold {gold['entity_type']}")
    elif not s.key_ok:
        s.misses.insert(0, f"KEY {s.attributes.get(key_attr) if key_attr else None!r} gold {keys}")


# --- runs --------------------------------------------------------------------------------------------
def load_set(folder: Path, only: set[str] | None) -> list[tuple[str, MemorySchema, list[dict[str, Any]]]]:
    out = []
    for path in sorted(folder.glob("*.schema.json")):
        slug = path.name.removesuffix(".schema.json")
        if only and slug not in only:
            continue
        schema = parse_schema(json.loads(path.read_text()))
        notes = [json.loads(line) for line in (folder / f"{slug}.notes.jsonl").read_text().splitlines() if line]
        out.append((slug, schema, notes))
    return out


def run_set(
    schemas: list[tuple[str, MemorySchema, list[dict[str, Any]]]], engine: Any, embedder: Any, tmp: Path
) -> list[Scored]:
    settings = Settings.from_env({"APPLIANCE_HOME": str(tmp), "APPLIANCE_GRAMMARS": str(tmp / "g")})
    results = []
    for slug, schema, notes in schemas:
        app = Appliance(schema=schema, db=tmp / f"{slug}.duckdb", model=engine, settings=settings, embedder=embedder)
        try:
            for note in notes:
                at = datetime.fromisoformat(note["at"]).replace(tzinfo=UTC)
                start = time.perf_counter()
                rec = app.record(note["text"], session_id=f"{slug}-notes", now=at)
                s = Scored(
                    note,
                    slug,
                    rec.event_type,
                    rec.entity_type,
                    dict(rec.attributes),
                    rec.status,
                    rec.confidence,
                    time.perf_counter() - start,
                )
                score(s, schema)
                results.append(s)
        finally:
            app.close()
    return results


def summary(results: list[Scored]) -> dict[str, Any]:
    n = len(results) or 1
    tp, fp, fn = (sum(getattr(r, k) for r in results) for k in ("tp", "fp", "fn"))
    p = tp / (tp + fp) if tp + fp else 0.0
    rc = tp / (tp + fn) if tp + fn else 0.0
    negated = [x for r in results for x in r.negated]
    wrong = [r for r in results if not r.fully_right]
    review = [r for r in results if r.status == "needs_review"]
    lat = sorted(r.seconds for r in results) or [0.0]
    return {
        "notes": len(results),
        "event": sum(r.event_ok for r in results) / n,
        "entity": sum(r.entity_ok for r in results) / n,
        "key": sum(r.key_ok for r in results) / n,
        "attr_p": p,
        "attr_r": rc,
        "attr_f1": 2 * p * rc / (p + rc) if p + rc else 0.0,
        "negated_right": sum(negated),
        "negated": len(negated),
        "fully_right": sum(r.fully_right for r in results),
        "wrong_stored_ok": sum(r.status == "ok" for r in wrong) / len(wrong) if wrong else 0.0,
        "review_share": len(review) / n,
        "review_precision": sum(not r.fully_right for r in review) / len(review) if review else 0.0,
        "unparsed": sum(r.status == "unparsed" for r in results),
        "p50_s": statistics.median(lat),
    }


def reliability(results: list[Scored]) -> list[tuple[str, int, float]]:
    bins = [(0.0, 0.5), (0.5, 0.7), (0.7, 0.8), (0.8, 0.9), (0.9, 1.01)]
    out = []
    for lo, hi in bins:
        inside = [r for r in results if lo <= r.confidence < hi]
        out.append(
            (
                f"{lo:.1f}-{min(hi, 1.0):.1f}",
                len(inside),
                sum(r.fully_right for r in inside) / len(inside) if inside else 0.0,
            )
        )
    return out


def error_classes(results: list[Scored]) -> Counter[str]:
    c: Counter[str] = Counter()
    for r in results:
        for m in r.misses:
            c[m.split(" ", 1)[0]] += 1
    return c


HEADER = (
    "| set | notes | event | entity | key | attr P / R / F1 | negated | fully right | wrong stored ok "
    "| review share / precision | p50 s |\n|---|---|---|---|---|---|---|---|---|---|---|"
)


def row(label: str, s: dict[str, Any]) -> str:
    return (
        f"| {label} | {s['notes']} | {s['event']:.2f} | {s['entity']:.2f} | {s['key']:.2f} "
        f"| {s['attr_p']:.2f} / {s['attr_r']:.2f} / {s['attr_f1']:.2f} | {s['negated_right']} of {s['negated']} "
        f"| {s['fully_right']} | {s['wrong_stored_ok']:.2f} | {s['review_share']:.2f} / {s['review_precision']:.2f} "
        f"| {s['p50_s']:.2f} |"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", default="fit,val", help="comma-separated: fit, val, or a folder")
    ap.add_argument("--only", default="", help="comma-separated schema slugs")
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--encoder", default="use3")
    ap.add_argument("--errors", type=Path, help="write every note's record and misses here (JSON lines)")
    ap.add_argument("--json", type=Path, help="write the summaries here")
    args = ap.parse_args()
    engine = LlamaCppEngine(resolve_model_path(args.model, PROJECT_ROOT / "models"))
    embedder = shared_embedder(args.encoder)
    only = set(filter(None, args.only.split(","))) or None
    report: dict[str, Any] = {"model": args.model}
    table = [HEADER]
    errors = args.errors.open("w") if args.errors else None
    for name in args.set.split(","):
        folder = SETS.get(name, Path(name))
        with tempfile.TemporaryDirectory() as tmp:
            results = run_set(load_set(folder, only), engine, embedder, Path(tmp))
        by_lang: dict[str, list[Scored]] = defaultdict(list)
        by_schema: dict[str, list[Scored]] = defaultdict(list)
        for r in results:
            by_lang["zh" if r.chinese else "en"].append(r)
            by_schema[r.schema].append(r)
        overall = summary(results)
        report[name] = {
            "all": overall,
            **{f"lang.{k}": summary(v) for k, v in by_lang.items()},
            **{f"schema.{k}": summary(v) for k, v in by_schema.items()},
            "reliability": reliability(results),
            "errors": dict(error_classes(results)),
        }
        table.append(row(f"{name} all", overall))
        for k, v in sorted(by_lang.items()):
            table.append(row(f"{name} {k}", summary(v)))
        for k, v in sorted(by_schema.items()):
            table.append(row(f"{name} {k}", summary(v)))
        print(json.dumps({"set": name, **overall}), file=sys.stderr, flush=True)
        for r in results if errors else []:
            assert errors is not None
            errors.write(
                json.dumps(
                    {
                        "set": name,
                        "id": r.note["id"],
                        "text": r.note["text"],
                        "gold": r.note["gold"],
                        "event": r.event,
                        "entity": r.entity,
                        "attributes": r.attributes,
                        "status": r.status,
                        "confidence": r.confidence,
                        "right": r.fully_right,
                        "misses": r.misses,
                    },
                    ensure_ascii=False,
                    default=str,
                )
                + "\n"
            )
    if errors:
        errors.close()
    print("\n".join(table))
    for name in args.set.split(","):
        if name in report:
            print(f"\n{name} reliability (confidence → fully right):", report[name]["reliability"])
            print(f"{name} error classes:", report[name]["errors"])
    if args.json:
        args.json.write_text(json.dumps(report, indent=1, default=str) + "\n")


if __name__ == "__main__":
    main()
