"""Ablate each language-pack rule on the validation sets: a rule earns its place on sets it was
not written for, or goes.

A *rule* is one field of a ``Lexicon`` (a word list or table, ``appliance/lang/lexicon.py``) or
one of its named patterns. Each ablation empties it in every shipped pack, in a fresh process
(compiled languages are cached per process), and measures the write path without the model,
with the shipped scorer: slot F1 on samples of sgd-dev, SGD-X v1–v5 (the same turns, reworded
schemas) and the CrossWOZ validation half (whole dialogues, seed 7), and key accuracy and
attribute F1 on the validation notes. Nothing here fits anything: it reads the validation sets
only to say which rules pay there.

The table gives, per rule, the change of each measure when the rule is removed (negative: the
rule pays), the mean change over the five measures, and the modules that read the field
(found in the source), so a rule that pays nowhere and that only extraction reads can go.
Event choice is not measured here (it needs the model): a rule read by ``extract/events.py`` or
``extract/routing.py`` is marked so.

Run: .venv/bin/python bench/audit_rules.py [--turns 400] [--jobs 2] [--out rules.json]
     .venv/bin/python bench/audit_rules.py --only greetings,other_words
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import fields, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

# not rules of the write path: identity, the model's prompts, the schema importer's kind words
NOT_RULES = ("code", "script", "prompts", "kind_words", "patterns")
SGDX = tuple(f"sgdx-v{i}" for i in range(1, 6))
MEASURES = ("sgd", "sgdx", "crosswoz", "notes_f1", "notes_keys")
MODEL_MEASURES = (
    "sgd_intent",
    "sgd",
    "crosswoz_domain",
    "crosswoz",
    "notes_event",
    "notes_keys",
    "notes_f1",
    "negated",
)


def rules() -> list[str]:
    """Every field of the shipped packs, and every pattern as ``patterns:name``."""
    from appliance.lang import PACKS, Lexicon

    names = [f.name for f in fields(Lexicon) if f.name not in NOT_RULES]
    patterns = sorted({p for lex in PACKS.values() for p in lex.patterns})
    return names + [f"patterns:{p}" for p in patterns]


def without(rule: str) -> None:
    """Empty ``rule`` in every shipped pack (before any language is compiled)."""
    from appliance.lang import PACKS

    for code, lex in list(PACKS.items()):
        if rule.startswith("patterns:"):
            name = rule.removeprefix("patterns:")
            PACKS[code] = replace(lex, patterns={k: v for k, v in lex.patterns.items() if k != name})
        elif rule != "none":
            PACKS[code] = replace(lex, **{rule: type(getattr(lex, rule))()})


def measure(turns: int) -> dict[str, float]:
    """The five measures of the write path with the shipped scorer, no model."""
    from fit_weights import NOTE_SETS, collect, collect_notes, key_accuracy, slot_f1
    from zero_shot import load_set, sample_dialogues

    from appliance.extract.evidence import SchemaEvidence, Scorer
    from appliance.model.embed import shared_embedder

    embedder = shared_embedder("use3")
    scorer = Scorer()
    out: dict[str, float] = {}
    f1s: dict[str, float] = {}
    for name in ("sgd", *SGDX, "crosswoz-val"):
        sample, schemas = load_set(name)
        sample = sample_dialogues(sample, turns, 7)[0]
        evidence = {k: SchemaEvidence(v, embedder) for k, v in schemas.items()}
        per_set = slot_f1(collect(sample, schemas, evidence), scorer.score, scorer.threshold)
        f1s[name] = next(iter(per_set.values()))[2]
    out["sgd"] = f1s["sgd"]
    out["sgdx"] = round(sum(f1s[v] for v in SGDX) / len(SGDX), 4)
    out["crosswoz"] = f1s["crosswoz-val"]
    rows = collect_notes(NOTE_SETS["val"], embedder)
    out["notes_f1"] = slot_f1(rows, scorer.score, scorer.threshold, key_threshold=scorer.key_threshold)["notes"][2]
    out["notes_keys"] = round(key_accuracy(rows, scorer.threshold, scorer.key_threshold), 4)
    return out


@lru_cache(maxsize=1)
def _sources() -> dict[str, str]:
    """The text of every module of ``appliance/`` outside ``lang``, by its name (read once)."""
    return {
        str(path.relative_to(ROOT / "appliance").with_suffix("")): path.read_text(encoding="utf-8")
        for path in sorted((ROOT / "appliance").rglob("*.py"))
        if path.parent.name != "lang"
    }


@lru_cache(maxsize=1)
def _lang_functions() -> dict[str, str]:
    """Source of every function and method of ``appliance/lang`` (not the packs), by name."""
    out: dict[str, str] = {}
    for path in sorted((ROOT / "appliance" / "lang").glob("*.py")):
        if path.stem in ("en", "zh", "lexicon"):
            continue
        src = path.read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, ast.FunctionDef):
                out[node.name] = out.get(node.name, "") + (ast.get_source_segment(src, node) or "")
    return out


def measure_with_model(turns: int) -> dict[str, float]:
    """The whole write path with the shipped model (event choice, states, negation included):
    intent and slot F1 on sgd-dev and the CrossWOZ validation half, the validation notes' event,
    key, attribute F1 and share of negated values decided right."""
    import tempfile

    from notes import SETS, run_set
    from notes import load_set as load_notes
    from notes import summary as notes_summary
    from zero_shot import load_set, run_appliance, sample_dialogues, summary

    from appliance.config import PROJECT_ROOT
    from appliance.model.embed import shared_embedder
    from appliance.model.engine import LlamaCppEngine, resolve_model_path

    engine = LlamaCppEngine(resolve_model_path("smollm2", PROJECT_ROOT / "models"))
    embedder = shared_embedder("use3")
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, intent, f1 in (("sgd", "sgd_intent", "sgd"), ("crosswoz-val", "crosswoz_domain", "crosswoz")):
            sample, schemas = load_set(name)
            s = summary(run_appliance(sample_dialogues(sample, turns, 7)[0], schemas, engine, embedder, Path(tmp)))
            out[intent] = round(s["intent"], 4)
            out[f1] = round(s["slot_f1"], 4)
        n = notes_summary(run_set(load_notes(SETS["val"], None), engine, embedder, Path(tmp)))
    out["notes_event"] = round(n["event"], 4)
    out["notes_keys"] = round(n["key"], 4)
    out["notes_f1"] = round(n["attr_f1"], 4)
    out["negated"] = round(n["negated_right"] / max(1, n["negated"]), 4)
    return out


def readers(rule: str) -> list[str]:
    """Modules outside ``appliance/lang`` that use the field: directly (``lex.<field>``, the
    pattern's name) or through the language functions that read it, followed within ``lang``."""
    name = rule.removeprefix("patterns:")
    token = rf"pattern\(\"{name}\"\)" if rule.startswith("patterns:") else rf"\.{name}\b"
    functions = _lang_functions()
    through = {f for f, src in functions.items() if re.search(token, src)}
    while True:  # a language function that calls one that reads the field reads it too
        more = {f for f, src in functions.items() if f not in through and re.search(_any_call(through), src)}
        if not more:
            break
        through |= more
    uses = re.compile(token + ("|" + _any_call(through) if through else ""))
    return [module for module, src in _sources().items() if uses.search(src)]


def _any_call(names: set[str]) -> str:
    """A use of any of ``names``: an attribute (``.name``) or a call (``name(``)."""
    if not names:
        return "(?!)"
    alternatives = "|".join(sorted(map(re.escape, names)))
    return rf"(?:\.(?:{alternatives})\b|\b(?:{alternatives})\()"


def run_child(rule: str, turns: int, model: bool) -> dict[str, Any]:
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, __file__, "--child", rule, "--turns", str(turns), *(["--model"] if model else [])],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"rc {done.returncode}"}
    measures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return measures


def table(base: dict[str, Any], results: dict[str, dict[str, Any]], measures: tuple[str, ...]) -> str:
    lines = [
        "| rule | " + " | ".join(f"Δ {m}" for m in measures) + " | mean Δ | read by |",
        "|---|" + "---|" * (len(measures) + 2),
    ]
    for rule, r in sorted(results.items(), key=lambda kv: kv[1].get("mean", 0.0)):
        if "error" in r:
            lines.append(f"| {rule} | error: {r['error']} |" + " |" * (len(measures) + 1))
            continue
        cells = " | ".join(f"{r[m] - base[m]:+.3f}" for m in measures)
        lines.append(f"| {rule} | {cells} | {r['mean']:+.4f} | {', '.join(r['readers']) or '—'} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", type=int, default=400, help="turns per dialogue set (whole dialogues, seed 7)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", default="", help="comma-separated rules (default: every rule)")
    ap.add_argument("--out", type=Path, help="write the measures as JSON")
    ap.add_argument("--model", action="store_true", help="the whole write path with SmolLM2 (slow: minutes a rule)")
    ap.add_argument("--render", type=Path, help="print the table of an --out file again (readers from today's source)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.render:
        saved = json.loads(args.render.read_text())
        for rule, r in saved["rules"].items():
            r["readers"] = readers(rule)
        print(table(saved["base"], saved["rules"], MODEL_MEASURES if saved.get("model") else MEASURES))
        return
    if args.child:
        without(args.child)
        print(json.dumps(measure_with_model(args.turns) if args.model else measure(args.turns)))
        return
    chosen = [r for r in args.only.split(",") if r] or rules()
    measures = MODEL_MEASURES if args.model else MEASURES
    base = run_child("none", args.turns, args.model)
    if "error" in base:
        raise SystemExit(f"baseline failed: {base['error']}")
    print("with every rule:", base, file=sys.stderr)
    results: dict[str, dict[str, Any]] = {}
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for rule, r in zip(chosen, pool.map(lambda x: run_child(x, args.turns, args.model), chosen)):
            if "error" not in r:
                r["mean"] = round(sum(r[m] - base[m] for m in measures) / len(measures), 4)
            r["readers"] = readers(rule)
            results[rule] = r
            print(rule, r, file=sys.stderr, flush=True)
    print(table(base, results, measures))
    if args.out:
        report = {"turns": args.turns, "model": args.model, "base": base, "rules": results}
        args.out.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
