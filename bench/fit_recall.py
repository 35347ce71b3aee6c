"""Fit the read path's numbers (``appliance/recall/weights.json``) on the fit split of the
conversational sets, and report them on the held-out half.

Each conversation is read from databases recorded by ``bench/recall.py --keep DIR`` (the write
path is not what is fitted here); every question is parsed once, then asked of recall services
that differ only in their weights. The objective counts, per question, a hit in the top 5 for
a stored question and the right "not found" decision for every question (a stored one must not
be called not found, a false-premise one must), so ranking and "not found" are fitted together.

Coordinate ascent from the shipped values, in a fixed order over fixed grids (the same file
comes out every run): each channel's fusion weight, the lexical reach, the text channel's BM25
share and parameters, the rank fusion's constant, how bare a question turn must be to go after
the statements, and the active encoder's semantic cuts. A step must gain at least one question
to be taken (ties keep the current value).

Then the "not found" rules (``RecallService.reasons``): every rule is read for every fit
question once, and the subset deciding the most of them right is kept (over all subsets; a
rule goes only when the fit split is better without it).

Fit split: ``para-fit`` (bench/convsets/paraphrase/split.json) and ``conv-fit``, half of the
older conversations (bench/splits/convsets.json): a fit on paraphrases alone, which share at most
one content word with their evidence, gives the words no weight, while people's questions
elsewhere share many. Reported: the same, ``para-heldout`` and ``conv-heldout``; nothing is chosen
on them.

Run: .venv/bin/python bench/recall.py --set conv,para --keep /tmp/keep   (records once)
     .venv/bin/python bench/fit_recall.py --keep /tmp/keep [--write]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from recall import conv_files  # noqa: E402

from appliance.api import Appliance  # noqa: E402
from appliance.config import PROJECT_ROOT, Settings  # noqa: E402
from appliance.model.engine import LlamaCppEngine, resolve_model_path  # noqa: E402
from appliance.recall.service import RecallService  # noqa: E402
from appliance.recall.weights import NOT_FOUND_RULES, WEIGHTS_FILE, RecallWeights  # noqa: E402

CHANNEL_GRID = (0.0, 0.5, 1.0, 2.0, 3.0)
REACH_GRID = (0.0, 0.15, 0.3, 0.45, 0.6)
TEXT_GRID = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7)
RANK_GRID = (5.0, 10.0, 20.0, 40.0, 60.0, 100.0)
BARE_GRID = (-1, 0, 1, 2, 3, 4, 6, 10, 100)  # -1: off; 100: every question turn
ROUNDS = 2


@dataclass
class Asked:
    app: Appliance
    schema: Any
    parsed: Any
    text: str
    session: str
    at: datetime
    gold: set[str]
    stored: bool
    turn_of: dict[str, str]


def load(keep: Path, names: list[str], engine: Any, settings: Settings) -> list[Asked]:
    out: list[Asked] = []
    for path in [p for name in names for p in conv_files(name)]:
        data = json.loads(path.read_text(encoding="utf-8"))
        db, turns = keep / f"{path.stem}.duckdb", keep / f"{path.stem}.turns.json"
        if not turns.exists():
            raise SystemExit(f"{turns} missing: record with bench/recall.py --set conv,para --keep {keep}")
        app = Appliance(schema="personal_memory", db=db, model=engine, settings=settings)
        if app.indexer is not None:  # vectors of the recall encoder for every turn
            app.indexer.drain()
        turn_of = json.loads(turns.read_text(encoding="utf-8"))
        for q in data["questions"]:
            at = datetime.fromisoformat(q["at"]).replace(tzinfo=UTC)
            parsed = app.parser_for(app.schema).parse(q["question"], at)
            out.append(
                Asked(
                    app,
                    app.schema,
                    parsed,
                    q["question"],
                    data["user"],
                    at,
                    set(q["evidence"]),
                    q["type"] != "not_stored",
                    turn_of,
                )
            )
    return out


def outcomes(weights: RecallWeights, asked: list[Asked]) -> list[tuple[bool, bool]]:
    """(hit in the top 5, "not found" decided right) per question."""
    services: dict[int, RecallService] = {}
    out = []
    for a in asked:
        svc = services.setdefault(id(a.app), RecallService(a.app.store, a.app.recall_embedder, weights))
        res = svc.recall(a.schema, a.parsed, a.text, a.session, a.at)
        top = {a.turn_of.get(m.memory.memory_id) for m in res.memories[:5]}
        out.append((a.stored and bool(top & a.gold), bool(res.not_found) != a.stored))
    return out


def score(weights: RecallWeights, asked: list[Asked]) -> int:
    return sum(hit + right for hit, right in outcomes(weights, asked))


def summary(weights: RecallWeights, asked: list[Asked]) -> dict[str, float]:
    got = outcomes(weights, asked)
    stored = [g for g, a in zip(got, asked) if a.stored]
    absent = [g for g, a in zip(got, asked) if not a.stored]
    return {
        "questions": len(asked),
        "hit@5": round(sum(h for h, _ in stored) / max(1, len(stored)), 3),
        "false_not_found": round(sum(not r for _, r in stored) / max(1, len(stored)), 3),
        "not_found": round(sum(r for _, r in absent) / max(1, len(absent)), 3),
    }


def ascend(
    start: RecallWeights,
    asked: list[Asked],
    encoder: str,
    log: Callable[[str], None],
    rounds: int = ROUNDS,
    after_round: Callable[[RecallWeights], None] = lambda w: None,
) -> RecallWeights:
    best, best_score = start, score(start, asked)
    log(f"start: {best_score} of {2 * len(asked)}")
    cut = start.cuts(encoder)
    cut_grids = {
        "min_score": sorted({round(cut.min_score + d, 2) for d in (-0.1, -0.05, -0.02, 0, 0.02, 0.05, 0.1)}),
        "not_found_below": sorted(
            {round(cut.not_found_below + d, 2) for d in (-0.1, -0.05, -0.02, 0, 0.02, 0.05, 0.1)}
        ),
    }
    for _ in range(rounds):
        moved = False
        # each step varies one number of the best point so far (true coordinate ascent)
        steps: list[tuple[str, Callable[[RecallWeights], list[RecallWeights]]]] = [
            (ch, lambda w, ch=ch: [replace(w, channels={**w.channels, ch: v}) for v in CHANNEL_GRID])  # type: ignore[misc]
            for ch in start.channels
        ]
        steps += [
            ("lexical_reach", lambda w: [replace(w, lexical_reach=v) for v in REACH_GRID]),
            ("text_lexical_weight", lambda w: [replace(w, text_lexical_weight=v) for v in TEXT_GRID]),
            ("bm25_k1", lambda w: [replace(w, bm25_k1=v) for v in (0.9, 1.2, 1.5, 2.0)]),
            ("bm25_b", lambda w: [replace(w, bm25_b=v) for v in (0.1, 0.3, 0.5, 0.75)]),
            ("rank_constant", lambda w: [replace(w, rank_constant=v) for v in RANK_GRID]),
            ("bare_question_terms", lambda w: [replace(w, bare_question_terms=v) for v in BARE_GRID]),
        ]
        for name, grid in cut_grids.items():
            steps.append(
                (
                    f"{encoder}.{name}",
                    lambda w, name=name, grid=grid: [  # type: ignore[misc]
                        replace(w, semantic={**w.semantic, encoder: replace(w.cuts(encoder), **{name: v})})
                        for v in grid
                    ],
                )
            )
        for label, vary in steps:
            for cand in vary(best):
                if cand == best:
                    continue
                s = score(cand, asked)
                if s > best_score:
                    best, best_score, moved = cand, s, True
                    log(f"{label}: {s}")
        after_round(best)
        if not moved:
            break
    return best


def fired_rules(weights: RecallWeights, asked: list[Asked]) -> list[frozenset[str]]:
    """Per question, every "not found" rule that finds so (all of them read, whatever is
    shipped): the decision of any subset of rules is then known without asking again."""
    out: list[frozenset[str]] = []
    services: dict[int, _AllRules] = {}
    for a in asked:
        svc = services.setdefault(id(a.app), _AllRules(a.app.store, a.app.recall_embedder, weights))
        svc.recall(a.schema, a.parsed, a.text, a.session, a.at)
        out.append(svc.fired)
    return out


class _AllRules(RecallService):
    fired: frozenset[str] = frozenset()

    def reasons(self, *args: Any, **kwargs: Any) -> Iterator[tuple[str, str]]:
        kwargs["rules"] = frozenset(NOT_FOUND_RULES)
        found = list(super().reasons(*args, **kwargs))
        self.fired = frozenset(rule for rule, _ in found)
        yield from found


def fit_rules(fired: list[frozenset[str]], asked: list[Asked]) -> frozenset[str]:
    """The subset of "not found" rules deciding the most fit questions right (a stored one not
    called not found, a false-premise one called so), over every subset; ties keep more rules
    (a rule goes only when the fit split is better without it)."""
    best: tuple[int, int] = (-1, -1)
    chosen: frozenset[str] = frozenset(NOT_FOUND_RULES)
    for n in range(len(NOT_FOUND_RULES), -1, -1):
        for subset in itertools.combinations(NOT_FOUND_RULES, n):
            on = frozenset(subset)
            right = sum(bool(f & on) != a.stored for f, a in zip(fired, asked))
            if (right, n) > best:
                best, chosen = (right, n), on
    return chosen


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keep", type=Path, required=True)
    ap.add_argument("--fit", default="para-fit,conv-fit")
    ap.add_argument("--report", default="para-heldout,conv-heldout")
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--rounds", type=int, default=ROUNDS)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    # APPLIANCE_ENCODER chooses recall's encoder here too (e5 by default)
    chosen = {"APPLIANCE_ENCODER": os.environ["APPLIANCE_ENCODER"]} if "APPLIANCE_ENCODER" in os.environ else {}
    settings = Settings.from_env({"APPLIANCE_HOME": str(tmp), "APPLIANCE_GRAMMARS": str(tmp / "g"), **chosen})
    engine = LlamaCppEngine(resolve_model_path("smollm2", PROJECT_ROOT / "models"))
    fit = load(args.keep, args.fit.split(","), engine, settings)
    reported = {name: load(args.keep, [name], engine, settings) for name in args.report.split(",")}
    shipped = RecallWeights.load()
    encoder = settings.encoder
    if shipped.fitted_encoder != encoder:  # fitting for another encoder: start from the unfitted weights
        shipped = replace(shipped, channels=dict(shipped.unfitted_channels), fitted_encoder=encoder)
    if encoder not in shipped.semantic:
        shipped = replace(shipped, semantic={**shipped.semantic, encoder: shipped.cuts(encoder)})
    print(
        "shipped:", {"fit": summary(shipped, fit)} | {k: summary(shipped, v) for k, v in reported.items()}, flush=True
    )
    fitted = ascend(
        shipped, fit, encoder, lambda line: print(line, flush=True), args.rounds, lambda w: print(w, flush=True)
    )
    rules = fit_rules(fired_rules(fitted, fit), fit)
    print("not-found rules kept:", sorted(rules), "left out:", sorted(set(NOT_FOUND_RULES) - rules), flush=True)
    fitted = replace(fitted, not_found_rules=rules)
    figures = {"fit": summary(fitted, fit)} | {k: summary(fitted, v) for k, v in reported.items()}
    print("fitted:", figures)
    print(fitted)
    if args.write:
        WEIGHTS_FILE.write_text(
            fitted.to_json(
                fitted_on=f"bench/fit_recall.py: {args.fit} (coordinate ascent, hit@5 + right not-found per question)",
                figures=figures,
            ),
            encoding="utf-8",
        )
        print("wrote", WEIGHTS_FILE)


if __name__ == "__main__":
    main()
