"""Recall benchmark: does the appliance find the memory that answers a question?

Sets:
* ``conv`` (``conv-fit``, ``conv-heldout``: halves by conversation, bench/splits/convsets.json) —
  bench/convsets/*.json: six long multi-session conversations (English, Chinese)
  written before any recall tuning, recorded turn by turn with the shipped personal_memory
  schema at their real message times; questions asked at their own time, with gold evidence
  turns; types single / multi / temporal / not_stored.
* ``sgd`` — ../shared/sgd-dev/dialogues.jsonl: each dialogue's user turns recorded (its
  services' schemas, imported by the product), then one question per settled slot, phrased
  mechanically from the slot's description ("What is the city where bus is leaving from?");
  a hit is a returned memory that holds the gold value; the structured answer is right when an
  answered entity holds it.

* ``para`` (``para-fit``, ``para-heldout``) — bench/convsets/paraphrase: four two-friend
  conversations of about 300 turns (two English, two Chinese) whose questions share at most
  one content word with their evidence; one English and one Chinese to fit on, two held out.
  Types single / multi / temporal / open / not_stored.
* ``own`` — the shipped customer_service and travel_assistant schemas' labelled messages (the
  extraction dev and held-out sets) recorded in one session each, with questions phrased
  mechanically from their gold labels (ids, free-text values, ids no message holds): regressions.

Metrics: hit@5, recall@5, hit@10, MRR, not-stored questions answered "not found", stored
questions wrongly answered "not found", p50/p95 latency — per question type, with the plain
alternatives over the raw turns in the same run (bench/baselines.py): BM25 (the same tokens the
appliance indexes), BM25+ tuned with session dates and neighbour smoothing, dense retrieval with
the appliance's recall encoder, and the tuned BM25+ fused with it — the tuned settings fitted on
the paraphrased set's fit half, as the appliance's are.

Run: .venv/bin/python bench/recall.py [--set conv,sgd,own,para,conv-heldout,para-heldout] [--dialogues 150] [--seed 3] [--misses FILE] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from baselines import BM25, Dense, Fusion, TunedBM25, TunedParams, Turn, fit_fusion, fit_tuned  # noqa: E402
from zero_shot import gold_norm, predicted_norm  # noqa: E402

from appliance.api import Appliance  # noqa: E402
from appliance.config import PROJECT_ROOT, Settings  # noqa: E402
from appliance.domain.importers import from_sgd  # noqa: E402
from appliance.domain.loading import parse_schema  # noqa: E402
from appliance.model.embed import shared_embedder  # noqa: E402
from appliance.model.engine import LlamaCppEngine, resolve_model_path  # noqa: E402

SHARED = PROJECT_ROOT.parent / "shared"
CONV = Path(__file__).resolve().parent / "convsets"
PARA = CONV / "paraphrase"


@dataclass
class Question:
    qid: str
    text: str
    qtype: str
    at: datetime
    gold: set[str]  # evidence turn ids (conv) — or gold values (sgd)
    session: str
    answer_values: list[str] = field(default_factory=list)
    slot: str = ""
    swapped: bool = False  # not stored: asks one speaker what only the other told

    @property
    def group(self) -> str:
        return f"{self.qtype} (swapped)" if self.swapped else self.qtype


Outs = dict[str, list["Outcome"]]  # system → its outcomes, the appliance first


def settle(app: Any) -> None:
    """Wait for the background semantic index (recall latency is measured without it)."""
    if getattr(app, "indexer", None) is not None:
        app.indexer.drain()


@dataclass
class Outcome:
    q: Question
    ranked: list[str]  # turn ids, best first
    not_found: bool
    seconds: float
    structured_right: bool = False


# --- baselines over raw turns (bench/baselines.py) ----------------------------------------------------
@dataclass
class Plain:
    """The plain alternatives, their settings fitted on the paraphrased set's fit half."""

    embedder: Any  # the appliance's recall encoder
    tuned: TunedParams
    fusion_weight: float

    def rankers(self, turns: list[Turn], chinese: bool) -> dict[str, Any]:
        tuned, dense = TunedBM25(turns, self.tuned, chinese), Dense(turns, self.embedder)
        return {
            "bm25 raw turns": BM25(turns),
            "bm25+ tuned (dates, neighbours)": tuned,
            f"dense raw turns ({self.embedder.name})": dense,
            f"bm25+ tuned fused with {self.embedder.name}": Fusion(tuned, dense, self.fusion_weight),
        }


def fit_plain(embedder: Any) -> Plain:
    """Fit the tuned baselines on the paraphrased set's fit half (as the appliance is)."""
    convs = []
    for path in conv_files("para-fit"):
        data = json.loads(path.read_text(encoding="utf-8"))
        turns = conv_turns(data)
        qs = [(q["question"], set(q["evidence"])) for q in data["questions"] if q["evidence"]]
        convs.append((turns, data["language"] == "zh", qs))
    tuned = fit_tuned(convs)
    return Plain(embedder, tuned, fit_fusion(convs, tuned, embedder))


def conv_turns(data: dict[str, Any]) -> list[Turn]:
    return [
        Turn(f"s{si}t{ti}", text, si, datetime.fromisoformat(session["at"]).replace(tzinfo=UTC) + timedelta(minutes=ti))
        for si, session in enumerate(data["sessions"], 1)
        for ti, text in enumerate(session["turns"], 1)
    ]


# --- metrics ---------------------------------------------------------------------------------------------
def metrics(outcomes: list[Outcome], hit: Any) -> dict[str, float]:
    stored = [o for o in outcomes if o.q.qtype != "not_stored"]
    absent = [o for o in outcomes if o.q.qtype == "not_stored"]
    out: dict[str, float] = {"questions": len(outcomes)}
    if stored:
        out["hit@5"] = sum(any(hit(o, r) for r in o.ranked[:5]) for o in stored) / len(stored)
        out["recall@5"] = statistics.mean(
            len({r for r in o.ranked[:5] if hit(o, r)}) / max(1, len(o.q.gold)) if o.q.gold else 0.0 for o in stored
        )
        out["hit@10"] = sum(any(hit(o, r) for r in o.ranked[:10]) for o in stored) / len(stored)
        out["mrr"] = statistics.mean(
            next((1 / (i + 1) for i, r in enumerate(o.ranked[:10]) if hit(o, r)), 0.0) for o in stored
        )
        out["false_not_found"] = sum(o.not_found for o in stored) / len(stored)
    if absent:
        out["not_found"] = sum(o.not_found for o in absent) / len(absent)
    lat = sorted(o.seconds for o in outcomes) or [0.0]
    out["p50_s"] = statistics.median(lat)
    out["p95_s"] = lat[int(0.95 * (len(lat) - 1))]
    return out


def ask(app: Any, q: Question, turn_of: dict[str, str], rankers: dict[str, Any], outs: Outs) -> None:
    """One question to the appliance and to every baseline over the raw turns, each timed."""
    t = time.perf_counter()
    res = app.recall(q.text, session_id=q.session, now=q.at)
    secs = time.perf_counter() - t
    ranked = [turn_of.get(m.memory.memory_id, "?") for m in res.memories]
    outs["appliance"].append(Outcome(q, ranked, bool(res.not_found), secs))
    for name, system in rankers.items():
        t = time.perf_counter()
        outs[name].append(Outcome(q, system.rank(q.text), False, time.perf_counter() - t))


# --- conversational set -------------------------------------------------------------------------------
def conv_files(name: str) -> list[Path]:
    """The conversations of set ``name``: ``conv`` (the older conversations), ``conv-fit`` /
    ``conv-heldout`` (one half of them, ``splits/convsets.json``), ``para`` (the paraphrased set,
    both halves), ``para-fit`` / ``para-heldout`` (one half, ``paraphrase/split.json``)."""
    if name == "conv":
        return sorted(CONV.glob("*.json"))
    if name in ("conv-fit", "conv-heldout"):
        halves = json.loads((CONV.parent / "splits" / "convsets.json").read_text(encoding="utf-8"))
        return [CONV / f for f in halves[name.removeprefix("conv-")]]
    split = json.loads((PARA / "split.json").read_text(encoding="utf-8"))
    halves = ["fit", "heldout"] if name == "para" else [name.removeprefix("para-")]
    return [PARA / f for half in halves for f in split[half]]


def run_conv(app_factory: Any, plain: Plain, keep: Path | None = None, files: list[Path] | None = None) -> Outs:
    """``keep``: a directory where each conversation's recorded database (and its turn map) is
    kept and reused by later runs — for iterating on the read path only; a write-path change
    needs a fresh directory."""
    outs: Outs = defaultdict(list)
    for path in files if files is not None else conv_files("conv"):
        data = json.loads(path.read_text(encoding="utf-8"))
        user = data["user"]
        turn_of: dict[str, str] = {}
        texts: dict[str, str] = {}
        kept_map = keep / f"{path.stem}.turns.json" if keep else None
        if keep is not None and kept_map is not None and kept_map.exists():
            app = app_factory("personal_memory", keep / f"{path.stem}.duckdb")
            turn_of = json.loads(kept_map.read_text(encoding="utf-8"))
            for si, session in enumerate(data["sessions"], 1):
                for ti, text in enumerate(session["turns"], 1):
                    texts[f"s{si}t{ti}"] = text
        else:
            app = app_factory("personal_memory", keep / f"{path.stem}.duckdb" if keep else None)
            for si, session in enumerate(data["sessions"], 1):
                start = datetime.fromisoformat(session["at"]).replace(tzinfo=UTC)
                for ti, text in enumerate(session["turns"], 1):
                    tid = f"s{si}t{ti}"
                    rec = app.record(text, session_id=user, now=start + timedelta(minutes=ti))
                    turn_of[rec.memory_id] = tid
                    texts[tid] = text
            if kept_map is not None:
                kept_map.write_text(json.dumps(turn_of), encoding="utf-8")
        settle(app)
        rankers = plain.rankers(conv_turns(data), data["language"] == "zh")
        for q in data["questions"]:
            question = Question(
                q["id"],
                q["question"],
                q["type"],
                datetime.fromisoformat(q["at"]).replace(tzinfo=UTC),
                set(q["evidence"]),
                user,
                swapped=bool(q.get("swapped")),
            )
            ask(app, question, turn_of, rankers, outs)
        app.close()
    return outs


# --- own customer-service / travel sets (regressions) --------------------------------------------------
OWN_AT = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)  # the labelled sets' message time


def own_cases(schema_name: str) -> list[tuple[str, str, str | None, dict[str, Any]]]:
    """(text, entity type, gold id, gold attributes) of the dev and held-out extraction sets."""
    import importlib

    out = []
    for part in ("devset", "heldout"):
        mod = importlib.import_module(f"{part}.{schema_name}")
        out += [(c[0], c[2], c[3], c[5]) for c in mod.CASES]
    return out


def own_questions(schema: Any, cases: list[tuple[str, str, str | None, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Questions phrased mechanically from the sets' gold labels, never from their wording:

    * key — each stored id: "What happened with order 10231?" / "订单10231怎么样了？" (the
      entity's name, or its first Chinese alias, in the language of the message that told it);
      evidence: every message with that id;
    * value — each free-text value a message states verbatim ("Paris"): "What do I have about
      Paris?" / "关于云南有什么记录？"; evidence: every message containing it;
    * not_stored — an id no message holds (the last digit of a stored id moved by five):
      "What happened with order 10236?" must be answered "not found"."""
    from appliance.lang import has_cjk

    texts = [c[0] for c in cases]

    def about(etype: str, key: str, told_in: int) -> str:
        """The question about ``key``, in the language of the message ``told_in``."""
        if has_cjk(texts[told_in]):
            zh = next((a for a in schema.entity(etype).aliases if has_cjk(a)), None)
            if zh:
                return f"{zh}{key}怎么样了？"
        return f"What happened with {re.sub(r'(?<!^)(?=[A-Z])', ' ', etype).lower()} {key}?"

    out: list[dict[str, Any]] = []
    ids: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i, (_, etype, key, _) in enumerate(cases):
        if key:
            ids[(etype, key)].append(i)
    for (etype, key), where in ids.items():
        out.append({"type": "key", "question": about(etype, key, where[0]), "evidence": where})
    values: dict[str, list[int]] = {}
    for _, etype, _, attrs in cases:
        ent = schema.entity(etype)
        for name, v in attrs.items():
            a = ent.attribute(name)
            if isinstance(v, str) and a is not None and a.kind == "string" and len(v) >= 2:
                values.setdefault(v, [j for j, t in enumerate(texts) if v.lower() in t.lower()])
    for v, where in values.items():
        if where:
            q = f"关于{v}有什么记录？" if has_cjk(v) else f"What do I have about {v}?"
            out.append({"type": "value", "question": q, "evidence": where})
    for etype, key in list(ids)[: max(3, len(ids) // 4)]:
        digits = [j for j, ch in enumerate(key) if ch.isdigit()]
        if not digits:
            continue
        j = digits[-1]
        other = key[:j] + str((int(key[j]) + 5) % 10) + key[j + 1 :]
        if any(other in t for t in texts):
            continue
        out.append({"type": "not_stored", "question": about(etype, other, ids[(etype, key)][0]), "evidence": []})
    return out


def run_own(app_factory: Any, plain: Plain) -> Outs:
    """Each shipped schema's labelled messages (dev and held-out sets) recorded in one session,
    one minute apart, then the mechanical questions of ``own_questions``."""
    outs: Outs = defaultdict(list)
    for name in ("customer_service", "travel_assistant"):
        app = app_factory(name)
        cases = own_cases(name)
        turn_of: dict[str, str] = {}
        texts: dict[str, str] = {}
        for i, (text, *_) in enumerate(cases):
            rec = app.record(text, session_id=name, now=OWN_AT + timedelta(minutes=i))
            turn_of[rec.memory_id] = f"m{i}"
            texts[f"m{i}"] = text
        settle(app)
        rankers = plain.rankers([Turn(k, v, 1, OWN_AT) for k, v in texts.items()], name == "")
        now = OWN_AT + timedelta(days=1)
        for n, q in enumerate(own_questions(app.schema, cases)):
            question = Question(f"{name}:{n}", q["question"], q["type"], now, {f"m{i}" for i in q["evidence"]}, name)
            ask(app, question, turn_of, rankers, outs)
        app.close()
    return outs


# --- SGD dialogues ------------------------------------------------------------------------------------------
def slot_question(description: str) -> str:
    d = description.strip().rstrip(".")
    return f"What is the {d[0].lower() + d[1:]}?" if d else "What was it?"


def same_value(kind: str, stored: Any, golds: list[str], now: datetime) -> bool:
    """A stored value answers the slot when it is a gold surface or normalises to a gold's value
    ("2026-03-11" for "11th of March", "13:30" for "1:30 pm"), as the extraction bench scores."""
    return any(
        str(stored).strip().lower() == g.strip().lower() or predicted_norm(kind, stored) == gold_norm(kind, g, now)
        for g in golds
    )


def run_sgd(app_factory: Any, plain: Plain, n: int, seed: int, keep: Path | None = None) -> Outs:
    """``keep``: as for ``run_conv``, one database (and turn map) per dialogue, for read-path runs."""
    services = {s["service_name"]: s for s in json.loads((SHARED / "sgd-dev" / "schema.json").read_text())}
    schemas = {k: parse_schema(from_sgd(v)) for k, v in services.items()}
    dialogues = [json.loads(line) for line in (SHARED / "sgd-dev" / "dialogues.jsonl").read_text().splitlines()]
    random.Random(seed).shuffle(dialogues)
    outs: Outs = defaultdict(list)
    for d in dialogues[:n]:
        kept_map = keep / f"{d['dialogue']}.turns.json" if keep else None
        if keep is not None and kept_map is not None and not kept_map.exists():
            for stale in keep.glob(f"{d['dialogue']}.duckdb*"):  # a run stopped mid-dialogue
                stale.unlink()
        app = app_factory([schemas[s] for s in d["services"]], keep / f"{d['dialogue']}.duckdb" if keep else None)
        start = datetime(2026, 3, 1, 9, tzinfo=UTC)
        users = [t["utterance"] for t in d["turns"] if t["speaker"] == "USER"]
        texts = {f"t{i}": text for i, text in enumerate(users, 1)}
        if kept_map is not None and kept_map.exists():
            turn_of: dict[str, str] = json.loads(kept_map.read_text(encoding="utf-8"))
        else:
            turn_of = {}
            for i, text in enumerate(users, 1):
                rec = app.record(text, session_id=d["dialogue"], now=start + timedelta(minutes=i))
                turn_of[rec.memory_id] = f"t{i}"
            if kept_map is not None:
                kept_map.write_text(json.dumps(turn_of), encoding="utf-8")
        settle(app)
        rankers = plain.rankers([Turn(k, v, 1, start) for k, v in texts.items()], False)
        for service, slots in d["final_slots"].items():
            descriptions = {s["name"]: s["description"] for s in services[service]["slots"]}
            for slot, values in slots.items():
                values = [v for v in values if v != "dontcare"]
                if not values:
                    continue
                gold = {tid for tid, text in texts.items() if any(v.lower() in text.lower() for v in values)}
                q = Question(
                    f"{d['dialogue']}:{slot}",
                    slot_question(descriptions[slot]),
                    "slot",
                    start + timedelta(hours=1),
                    gold,
                    d["dialogue"],
                    values,
                    slot,
                )
                if not gold:
                    continue  # the value was said by the system, not by the user: nothing to find
                t = time.perf_counter()
                res = app.recall(q.text, session_id=d["dialogue"], schema=service, now=q.at)
                secs = time.perf_counter() - t
                ranked = [turn_of.get(m.memory.memory_id, "?") for m in res.memories]
                held = [h.entity.attributes.get(slot) for h in res.hits]
                held += [m.memory.attributes.get(slot) for m in res.memories[:1]]
                kind = next((a.kind for e in schemas[service].entities if (a := e.attribute(slot))), "string")
                right = any(same_value(kind, v, values, start) for v in held if v is not None)
                outs["appliance"].append(Outcome(q, ranked, bool(res.not_found), secs, right))
                for system, ranker in rankers.items():
                    outs[system].append(Outcome(q, ranker.rank(q.text), False, 0.0))
        app.close()
    return outs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", default="conv,sgd")
    ap.add_argument("--dialogues", type=int, default=150, help="SGD dialogues (all: 1091)")
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--misses", type=Path, help="write the appliance's misses here (JSON lines)")
    ap.add_argument("--keep", type=Path, help="keep/reuse recorded databases here (read-path iteration)")
    args = ap.parse_args()
    engine = LlamaCppEngine(resolve_model_path(args.model, PROJECT_ROOT / "models"))
    tmp = Path(tempfile.mkdtemp())
    # APPLIANCE_ENCODER chooses recall's encoder here too (e5 by default)
    chosen = {"APPLIANCE_ENCODER": os.environ["APPLIANCE_ENCODER"]} if "APPLIANCE_ENCODER" in os.environ else {}
    settings = Settings.from_env({"APPLIANCE_HOME": str(tmp), "APPLIANCE_GRAMMARS": str(tmp / "g"), **chosen})
    embedder = shared_embedder(settings.encoder)  # the baselines read the appliance's recall encoder

    def factory(schema: Any, db: Path | None = None) -> Appliance:
        return Appliance(
            schema=schema,
            db=db or tmp / f"r{random.randrange(1 << 30)}.duckdb",
            model=engine,
            settings=settings,
        )

    fitted: list[Plain] = []

    def plain() -> Plain:
        if not fitted:
            fitted.append(fit_plain(embedder))
            print(f"plain baselines fitted on para-fit: {fitted[0].tuned}, fusion weight {fitted[0].fusion_weight}")
        return fitted[0]

    rows = []
    misses = []
    for name in args.set.split(","):
        if name.startswith(("conv", "para")):
            if args.keep:
                args.keep.mkdir(parents=True, exist_ok=True)
            outs = run_conv(factory, plain(), args.keep, conv_files(name))

            def hit(o: Outcome, r: str) -> bool:
                return r in o.q.gold

        elif name == "own":
            outs = run_own(factory, plain())

            def hit(o: Outcome, r: str) -> bool:
                return r in o.q.gold

        else:
            if args.keep:
                (args.keep / "sgd").mkdir(parents=True, exist_ok=True)
            outs = run_sgd(factory, plain(), args.dialogues, args.seed, args.keep / "sgd" if args.keep else None)

            def hit(o: Outcome, r: str) -> bool:
                return r in o.q.gold

        app = outs["appliance"]
        for system, outcomes in outs.items():
            by_type: dict[str, list[Outcome]] = defaultdict(list)
            for o in outcomes:
                by_type[o.q.group].append(o)
            rows.append((name, system, "all", metrics(outcomes, hit)))
            if name == "sgd" and system == "appliance":
                rows[-1][3]["structured_answer"] = sum(o.structured_right for o in outcomes) / max(1, len(outcomes))
            for t, os_ in sorted(by_type.items()):
                if len(by_type) > 1:
                    rows.append((name, system, t, metrics(os_, hit)))
            if name == "own" or name.startswith(
                ("conv", "para")
            ):  # each conversation (schema) too: they differ in language and in who speaks
                by_conv: dict[str, list[Outcome]] = defaultdict(list)
                for o in outcomes:
                    by_conv[o.q.session].append(o)
                rows += [(name, system, f"conv {c}", metrics(os_, hit)) for c, os_ in sorted(by_conv.items())]
        misses += [
            {
                "set": name,
                "id": o.q.qid,
                "q": o.q.text,
                "type": o.q.group,
                "gold": sorted(o.q.gold),
                "got": o.ranked[:5],
                "not_found": o.not_found,
            }
            for o in app
            if (o.q.qtype == "not_stored") != o.not_found
            or (o.q.qtype != "not_stored" and not set(o.ranked[:5]) & o.q.gold)
        ]
    cols = [
        "questions",
        "hit@5",
        "recall@5",
        "hit@10",
        "mrr",
        "not_found",
        "false_not_found",
        "structured_answer",
        "p50_s",
        "p95_s",
    ]
    print("| set | system | type | " + " | ".join(cols) + " |")
    print("|" + "---|" * (len(cols) + 3))
    for name, system, t, m in rows:
        cells = [f"{m[c]:.2f}" if isinstance(m.get(c), float) else str(m.get(c, "")) for c in cols]
        print(f"| {name} | {system} | {t} | " + " | ".join(cells) + " |")
    if args.misses:
        args.misses.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in misses))


if __name__ == "__main__":
    main()
