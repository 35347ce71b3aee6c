"""Fit the attribute scorer (``appliance/extract/scorer.json``) on development dialogues only.

The attribute score of ``extract/evidence.py`` is a small network over schema-agnostic features
(similarity of span and label, cues, roles, shapes, kinds; see ``FEATURES``). This script fits
it instead of guessing weights: each (attribute, candidate span) pair of a *fit split* is labelled
1 when the span is the attribute's gold value, a one-hidden-layer network (tanh, Adam, L2,
fixed seed: the same file comes out every run) is trained on them, and the threshold is the
middle of the best region of the slot-F1 curve after assignment on the fit split
(``neighbourhood_means``: the surface is flat and noisy).

The fit split is whole dialogues of ../shared/sgd-fit's services that sgd-dev does not have and
of the fit half of ../shared/crosswoz-dev (``splits/crosswoz-dev.json``): every sgd-dev, SGD-X and
CrossWOZ validation-half number stays zero-shot. The validation sample (sgd-dev and the CrossWOZ
validation half, ``bench/zero_shot.py``'s validation sample, seed 7) is printed for comparison only;
nothing is chosen on it. The logistic-regression baseline over the
same features is printed too (the reason the scorer is a network).

Run: .venv/bin/python bench/fit_weights.py [--turns 2000] [--write]   (the scorer, then the
     weights of corrected examples on it, --taught alone)
     .venv/bin/python bench/fit_weights.py --events --turns 500 [--write]   (event weights)
     .venv/bin/python bench/fit_weights.py --review --turns 500 [--write]   (the review model)
     .venv/bin/python bench/fit_weights.py --keys [--write]   (only the key threshold, on the shipped scorer)
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import sys
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from notes import SETS as NOTE_SETS  # noqa: E402
from notes import Scored, same_value  # noqa: E402
from notes import load_set as load_notes  # noqa: E402
from notes import score as score_note  # noqa: E402
from zero_shot import (  # noqa: E402
    NOW,
    Result,
    Turn,
    _gold_record,
    crosswoz_schema,
    gold_norm,
    load_set,
    predicted_norm,
    right,
    sample_dialogues,
    sgd_schemas,
)
from zero_shot import score as score_turn  # noqa: E402

from appliance.domain.records import MemoryRecord  # noqa: E402
from appliance.domain.schema import MemorySchema  # noqa: E402
from appliance.extract import evidence as evidence_module  # noqa: E402
from appliance.extract.events import EVENT_FEATURES  # noqa: E402
from appliance.extract.evidence import (  # noqa: E402
    FEATURES,
    SCORER_FILE,
    Candidate,
    SchemaEvidence,
    Scorer,
    mean_score,
    shipped_negation_scope,
    without_similarity,
)
from appliance.extract.examples import ExampleBank  # noqa: E402
from appliance.extract.extractor import assign, keys_besides  # noqa: E402
from appliance.extract.spans import find_spans  # noqa: E402
from appliance.model.embed import shared_embedder  # noqa: E402

FIT_SETS = "sgd-fit (its services not in sgd-dev) + crosswoz-dev fit half + notes-fit, each set weighted alike"
HIDDEN = 24
EPOCHS = 60
SEEDS = tuple(range(10))  # one network per seed, scores averaged (the mean of five still moved with them)
THRESHOLDS = np.arange(-3.0, 0.76, 0.25)
KEY_FLOOR = -8.0  # the lowest key threshold tried (below it no candidate of the fit notes is left)


def fit_turns(n: int, seed: int) -> list[Turn]:
    """Whole dialogues of the fit sets: sgd-fit's services unseen by sgd-dev, CrossWOZ's fit half."""
    return (
        sample_dialogues(load_set("sgd-fit")[0], n, seed)[0] + sample_dialogues(load_set("crosswoz-fit")[0], n, seed)[0]
    )


def validation_turns() -> list[Turn]:
    """zero_shot.py's validation sample of the validation sets (seed 7, 300 turns each)."""
    return sample_dialogues(load_set("sgd")[0], 300, 7)[0] + sample_dialogues(load_set("crosswoz-val")[0], 300, 7)[0]


def all_schemas() -> dict[str, MemorySchema]:
    return {**load_set("sgd-fit")[1], **sgd_schemas(), "crosswoz": crosswoz_schema()}


def label(c: Candidate, kind: str, golds: list[Any], typed: bool = False) -> bool:
    """Is ``c`` a gold value? Dialogue golds are surface strings; a note's golds are typed values
    (``bench/notes.py``: booleans, numbers, ISO dates, the key and its alternatives)."""
    if typed:
        return any(same_value(kind, c.value, g) for g in golds)
    return any(c.surface and c.surface.lower() == g.lower() for g in golds) or any(
        predicted_norm(kind, c.value) == gold_norm(kind, g) for g in golds
    )


def collect(
    turns: list[Turn], schemas: dict[str, MemorySchema], evidences: dict[str, SchemaEvidence]
) -> list[dict[str, Any]]:
    rows = []
    for i, t in enumerate(turns):
        schema = schemas[t.schema]
        ent = schema.entity(t.intent) if t.schema == "crosswoz" else schema.entities[0]
        spans = find_spans(schema.language, t.text, NOW + timedelta(seconds=i))
        cands = evidences[t.schema].candidates(ent.name, t.text, spans, score=False)
        golds = {k: [g for g in v if g != "dontcare"] for k, v in t.slots.items()}
        rows.append(
            {
                "set": "crosswoz" if t.schema == "crosswoz" else "sgd",
                "cands": cands,
                "golds": golds,
                "typed": False,
                "kinds": {a.name: a.kind for a in ent.attributes},
            }
        )
    return rows


class KnownKeys(dict[str, frozenset[str]]):
    """The keys the session's store would hold before each note (teacher forcing: the gold keys
    of the earlier notes of the file, lower-case, per entity type)."""

    def add(self, schema: MemorySchema, note: dict[str, Any]) -> None:
        gold = note["gold"]
        ent = schema.entity(gold["entity_type"])
        if ent.key and isinstance(gold["attributes"].get(ent.key[0]), str):
            self[ent.name] = self.get(ent.name, frozenset()) | {gold["attributes"][ent.key[0]].lower()}


def collect_notes(folder: Path, embedder: Any, negation_scope: int | None = None) -> list[dict[str, Any]]:
    """Rows of a notes set: each note's candidates for its gold entity type, its gold values
    typed (the key attribute also accepts the note's ``key_alts``)."""
    rows = []
    for _, schema, notes in load_notes(folder, None):
        evidence = SchemaEvidence(schema, embedder)
        if negation_scope is not None:
            evidence.negation_scope = negation_scope
        known = KnownKeys()
        for note in notes:
            gold = note["gold"]
            ent = schema.entity(gold["entity_type"])
            at = datetime.fromisoformat(note["at"]).replace(tzinfo=UTC)
            spans = find_spans(schema.language, note["text"], at)
            cands = evidence.candidates(
                ent.name,
                note["text"],
                spans,
                score=False,
                known=known.get(ent.name),
                known_other=keys_besides(known, ent.name),
            )
            known.add(schema, note)
            golds: dict[str, list[Any]] = {k: [v] for k, v in gold["attributes"].items()}
            if ent.key and ent.key[0] in golds:
                golds[ent.key[0]] += note.get("key_alts", [])
            rows.append(
                {
                    "set": "notes",
                    "cands": cands,
                    "keys": frozenset(ent.key),
                    "golds": golds,
                    "typed": True,
                    "kinds": {a.name: a.kind for a in ent.attributes},
                }
            )
    return rows


def matrix(rows: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Features, labels, and each row's ``set_weights``."""
    xs, ys, sets = [], [], []
    for r in rows:
        for name, cs in r["cands"].items():
            golds = r["golds"].get(name, [])
            for c in cs:
                xs.append([c.features.get(f, 0.0) for f in FEATURES])
                ys.append(float(label(c, r["kinds"].get(name, "string"), golds, r["typed"])))
                sets.append(r["set"])
    # rows in a fixed order (by value): the candidates come out of string sets whose order
    # changes with each process's hash seed, and the mini-batches follow the row order — unsorted,
    # two runs on the same pairs fitted scorers 0.01–0.02 F1 apart
    x, y, w = np.array(xs), np.array(ys), set_weights(sets)
    order = np.lexsort(np.column_stack([x, y, w]).T[::-1]) if len(y) else np.arange(0)
    return x[order], y[order], w[order]


def slot_f1(
    rows: list[dict[str, Any]],
    score: Callable[[np.ndarray], np.ndarray],
    threshold: float,
    rescore: bool = True,
    key_threshold: float | None = None,
) -> dict[str, tuple[float, float, float]]:
    """(P, R, F1) per set after scoring every candidate (``rescore``; else as they stand) and
    assigning."""
    counts: dict[str, list[int]] = {}
    for r in rows:
        flat = [c for cs in r["cands"].values() for c in cs]
        if flat and rescore:
            for c, s in zip(flat, score(np.array([[c.features.get(f, 0.0) for f in FEATURES] for c in flat]))):
                c.score = float(s)
        keys = r.get("keys", frozenset())
        chosen = assign(r["cands"], threshold, keys, threshold if key_threshold is None else key_threshold)
        gold = r["golds"]
        a = counts.setdefault(r["set"], [0, 0, 0])
        for name, c in chosen.items():
            a[0 if label(c, r["kinds"].get(name, "string"), gold.get(name, []), r["typed"]) else 1] += 1
        a[2] += sum(
            1 for n in gold if n not in chosen or not label(chosen[n], r["kinds"].get(n, "string"), gold[n], r["typed"])
        )
    out = {}
    for k, (tp, fp, fn) in counts.items():
        p = tp / (tp + fp) if tp + fp else 0.0
        rc = tp / (tp + fn) if tp + fn else 0.0
        out[k] = (round(p, 3), round(rc, 3), round(2 * p * rc / (p + rc) if p + rc else 0.0, 3))
    return out


def neighbourhood_means(values: dict[tuple[int, ...], float]) -> dict[tuple[int, ...], float]:
    """Each grid point's mean with its neighbours one step along each axis. The F1 surfaces of
    these fits are flat and noisy (a point moves with a few turns): the best neighbourhood is the
    middle of the best region, not a lucky point or the edge of the plateau."""
    return {
        index: float(
            np.mean([values[n] for n in itertools.product(*((j - 1, j, j + 1) for j in index)) if n in values])
        )
        for index in values
    }


def best_threshold(rows: list[dict[str, Any]], score: Callable[[np.ndarray], np.ndarray]) -> float:
    """The threshold with the best ``neighbourhood_means`` of the mean slot F1 of the sets (ties:
    the higher). The highest threshold within one standard error of the top, used before, sat
    at the plateau's edge: on the validation dialogues 0.007 slot F1 below its middle."""
    order = [float(t) for t in THRESHOLDS]
    curve = {t: float(np.mean([f for _, _, f in slot_f1(rows, score, t).values()])) for t in order}
    print("F1 by threshold:", {t: round(f, 4) for t, f in curve.items()}, file=sys.stderr)
    smoothed = neighbourhood_means({(i,): curve[t] for i, t in enumerate(order)})
    return order[max(range(len(order)), key=lambda i: (round(smoothed[(i,)], 6), i))]


def key_accuracy(rows: list[dict[str, Any]], threshold: float, key_threshold: float) -> float:
    """The share of the notes rows' gold keys that assignment gets right (candidates scored)."""
    right = total = 0
    for r in rows:
        chosen = assign(r["cands"], threshold, r["keys"], key_threshold)
        for k in r["keys"] & r["golds"].keys():
            total += 1
            right += k in chosen and label(chosen[k], r["kinds"].get(k, "string"), r["golds"][k], r["typed"])
    return right / total if total else 0.0


def fit_key_threshold(rows: list[dict[str, Any]], score: Callable[[np.ndarray], np.ndarray], threshold: float) -> float:
    """The floor an empty key attribute's best candidate must pass (``extractor.assign``): the
    one that gets the most keys of the notes rows right (the only fit rows whose schemas declare
    keys), the highest of the best. Its objective is the keys, not attribute F1: F1 counts a
    wrong key twice and an empty one once, so it prefers leaving keys empty, while an empty key
    and a wrong one are both a record tied to the wrong entity."""
    notes = [r for r in rows if r.get("keys")]
    if not notes:
        return threshold
    slot_f1(notes, score, threshold)  # scores every candidate once
    curve = {float(t): key_accuracy(notes, threshold, float(t)) for t in np.arange(threshold, KEY_FLOOR - 0.01, -0.25)}
    top = max(curve.values())
    print("notes key accuracy by key threshold:", {t: round(f, 4) for t, f in curve.items()}, file=sys.stderr)
    return max(t for t, f in curve.items() if f >= top)


def main_keys(embedder: Any, write: bool) -> None:
    """Refit only the key threshold on the shipped scorer (``--keys``); the validation notes are
    printed beside, never chosen on."""
    shipped = Scorer()
    rows = collect_notes(NOTE_SETS["fit"], embedder)
    check = collect_notes(NOTE_SETS["val"], embedder)
    before = shipped.key_threshold
    best = fit_key_threshold(rows, shipped.score, shipped.threshold)
    for label_, t in (("before", before), ("after", best)):
        fit_f1 = slot_f1(rows, shipped.score, shipped.threshold, key_threshold=t)
        check_f1 = slot_f1(check, shipped.score, shipped.threshold, key_threshold=t)
        print(
            f"key threshold {t} ({label_}): notes-fit keys {key_accuracy(rows, shipped.threshold, t):.3f} F1 {fit_f1}; "
            f"validation notes keys {key_accuracy(check, shipped.threshold, t):.3f} F1 {check_f1}",
            file=sys.stderr,
        )
    if write:
        data = json.loads(SCORER_FILE.read_text())
        SCORER_FILE.write_text(json.dumps({**data, "key_threshold": best}) + "\n")
        print(f"wrote key_threshold {best} to {SCORER_FILE}", file=sys.stderr)


NEGATION_SCOPES = range(0, 6)


def shipped_scope() -> int:
    """The shipped negation scope, kept through a refit of the scorer (``--negation`` fits it)."""
    try:
        return shipped_negation_scope(SCORER_FILE)
    except (OSError, ValueError):
        return 0


def main_negation(n: int, seed: int, schemas: dict[str, MemorySchema], embedder: Any, write: bool) -> None:
    """Fit how many words a negation reaches past (``--negation``): the scope whose candidates
    give the shipped scorer the best mean slot F1 over the fit sets (the smallest of equals);
    the validation sets are printed beside, never chosen on."""
    shipped = Scorer()
    fit, sample = fit_turns(n, seed), validation_turns()
    curve: dict[int, float] = {}
    evidences = {name: SchemaEvidence(v, embedder) for name, v in schemas.items()}
    for k in NEGATION_SCOPES:
        for e in evidences.values():
            e.negation_scope = k
        rows = collect(fit, schemas, evidences) + collect_notes(NOTE_SETS["fit"], embedder, k)
        check = collect(sample, schemas, evidences) + collect_notes(NOTE_SETS["val"], embedder, k)
        fit_f1 = slot_f1(rows, shipped.score, shipped.threshold, key_threshold=shipped.key_threshold)
        check_f1 = slot_f1(check, shipped.score, shipped.threshold, key_threshold=shipped.key_threshold)
        curve[k] = float(np.mean([f for _, _, f in fit_f1.values()]))
        print(f"negation scope {k}: fit {fit_f1} (mean {curve[k]:.4f}); validation {check_f1}", file=sys.stderr)
    best = min(k for k, f in curve.items() if f >= max(curve.values()))
    print(f"negation scope fitted: {best}", file=sys.stderr)
    if write:
        data = json.loads(SCORER_FILE.read_text())
        SCORER_FILE.write_text(json.dumps({**data, "negation_scope": best}) + "\n")
        print(f"wrote negation_scope {best} to {SCORER_FILE}", file=sys.stderr)


def _as_lists(nets: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: (v.round(6).tolist() if isinstance(v, np.ndarray) else v) for k, v in n.items()} for n in nets]


def logistic(
    x: np.ndarray, y: np.ndarray, l2: float = 1.0, steps: int = 50, weight: np.ndarray | None = None
) -> np.ndarray:
    """L2-regularised logistic regression by Newton's method (the linear baseline)."""
    w = np.zeros(x.shape[1])
    wt = np.ones(len(y)) if weight is None else weight
    reg = l2 * np.eye(x.shape[1])
    for _ in range(steps):
        p = 1 / (1 + np.exp(-np.clip(x @ w, -30, 30)))
        step = np.linalg.solve(
            (x * (wt * p * (1 - p))[:, None]).T @ x + reg + 1e-6 * np.eye(x.shape[1]), x.T @ (wt * (p - y)) + reg @ w
        )
        w -= step
        if np.abs(step).max() < 1e-6:
            break
    return w


def train_mlp(x: np.ndarray, y: np.ndarray, seed: int, weight: np.ndarray | None = None) -> dict[str, Any]:
    wt = np.ones(len(y)) if weight is None else weight
    rng = np.random.default_rng(seed)
    mu, sd = x.mean(0), x.std(0) + 1e-6
    xn = (x - mu) / sd
    params = [rng.normal(0, 0.3, (x.shape[1], HIDDEN)), np.zeros(HIDDEN), rng.normal(0, 0.3, HIDDEN), np.zeros(1)]
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    for _ in range(EPOCHS):
        order = rng.permutation(len(y))
        for start in range(0, len(y), 256):
            b = order[start : start + 256]
            h = np.tanh(xn[b] @ params[0] + params[1])
            p = 1 / (1 + np.exp(-np.clip(h @ params[2] + params[3][0], -30, 30)))
            dz = (p - y[b]) * wt[b] / len(b)
            dh = np.outer(dz, params[2]) * (1 - h**2)
            grads = [xn[b].T @ dh + 1e-4 * params[0], dh.sum(0), h.T @ dz + 1e-4 * params[2], np.array([dz.sum()])]
            for i, g in enumerate(grads):
                m[i] = 0.9 * m[i] + 0.1 * g
                v[i] = 0.999 * v[i] + 0.001 * g * g
                params[i] -= 0.01 * m[i] / (np.sqrt(v[i]) + 1e-8)
    return {"mu": mu, "sd": sd, "w1": params[0], "b1": params[1], "w2": params[2], "b2": float(params[3][0])}


@dataclass
class Forced:
    """One record extracted in its session under teacher forcing (``teacher_forced``)."""

    set: str  # sgd | crosswoz | notes
    schema: MemorySchema
    gold_event: str
    extraction: Any  # extractor.Extraction
    turn: Turn | None = None
    note: dict[str, Any] | None = None
    slug: str = ""


def teacher_forced(
    turns: list[Turn], notes_folder: Path | None, schemas: dict[str, MemorySchema], engine: Any, embedder: Any
) -> Iterator[Forced]:
    """Each dialogue turn, then each note of ``notes_folder``, extracted with what its session
    would know taken from the gold (teacher forcing): the previous event is the gold one of the
    session's previous turn or note; a dialogue's told attributes are the gold slots of its earlier
    turns; a notes file's known keys are the gold keys of its earlier notes."""
    import tempfile

    from appliance.extract.extractor import Extractor, SessionHint
    from appliance.model.grammar import GrammarCache

    grammars = GrammarCache(Path(tempfile.mkdtemp()))
    extractors = {k: Extractor(s, engine, grammars, embedder=embedder) for k, s in schemas.items()}
    previous: dict[str, str] = {}
    told: dict[str, set[str]] = {}
    for i, t in enumerate(turns):
        schema = schemas[t.schema]
        gold_event = (
            next(ev.name for ev in schema.event_types if ev.entity == t.intent) if t.schema == "crosswoz" else t.intent
        )
        hint = SessionHint(previous_event=previous.get(t.dialogue), told=frozenset(told.get(t.dialogue, ())))
        res = extractors[t.schema].extract(t.text, NOW + timedelta(seconds=i), hint=hint, retry=False)
        previous[t.dialogue] = gold_event
        told.setdefault(t.dialogue, set()).update(t.slots)
        yield Forced("crosswoz" if t.schema == "crosswoz" else "sgd", schema, gold_event, res, turn=t)
    for slug, schema, notes in load_notes(notes_folder, None) if notes_folder else []:
        x = Extractor(schema, engine, grammars, embedder=embedder)
        prev = None
        known = KnownKeys()
        for note in notes:
            at = datetime.fromisoformat(note["at"]).replace(tzinfo=UTC)
            res = x.extract(note["text"], at, hint=SessionHint(previous_event=prev, known=known), retry=False)
            prev = note["gold"]["event_type"]
            known.add(schema, note)
            yield Forced("notes", schema, note["gold"]["event_type"], res, note=note, slug=slug)


def event_rows(
    turns: list[Turn], notes_folder: Path | None, schemas: dict[str, MemorySchema], engine: Any, embedder: Any
) -> list[dict[str, Any]]:
    """Per record (``teacher_forced``): the event features of every option and the index of the
    gold option."""
    return [
        {
            "set": f.set,
            "features": f.extraction.evidence["event_features"],
            "gold": f.schema.event_names.index(f.gold_event),
            "names": f.schema.event_names,
        }
        for f in teacher_forced(turns, notes_folder, schemas, engine, embedder)
        if f.extraction.evidence.get("event_features")
    ]


def set_weights(sets: list[str]) -> np.ndarray:
    """Per row, the weight that gives each set (sgd, crosswoz, notes) the same total: 200 notes
    would count for little beside thousands of dialogue turns."""
    size = {k: sets.count(k) for k in set(sets)}
    return np.array([len(sets) / (len(size) * size[k]) for k in sets])


def fit_events(
    rows: list[dict[str, Any]], names: tuple[str, ...], fixed: dict[str, float], l2: float = 1.0
) -> dict[str, float]:
    """Conditional logit over each turn's options: weights of ``names``; ``fixed`` as offsets.
    Each set (sgd, crosswoz, notes) weighs alike, whatever its number of rows."""
    w = np.array([fixed.get(n, 1.0) for n in names], dtype=float)
    share = set_weights([r["set"] for r in rows])
    for _ in range(400):
        grad = -l2 * (w - np.array([fixed.get(n, 0.0) for n in names])) * 0.01
        for r, r_share in zip(rows, share):
            f = np.array([r["features"][n] for n in names]).T  # options × features
            offset = sum(fixed.get(k, 0.0) * np.array(v) for k, v in r["features"].items() if k not in names)
            z = f @ w + offset
            p = np.exp(z - z.max())
            p /= p.sum()
            grad += r_share * (f[r["gold"]] - p @ f)
        w += 0.5 * grad / len(rows)
    return {n: round(float(v), 3) for n, v in zip(names, w)}


def event_accuracy(rows: list[dict[str, Any]], weights: dict[str, float]) -> dict[str, float]:
    hits: dict[str, list[int]] = {}
    for r in rows:
        z = sum(weights.get(k, 0.0) * np.array(v) for k, v in r["features"].items())
        hits.setdefault(r["set"], []).append(int(int(np.argmax(z)) == r["gold"]))
    return {k: round(sum(v) / len(v), 3) for k, v in hits.items()}


# keyword, question, correction and taught keep their set values: the fit sets have no keywords,
# questions are already in the descriptions, and there are no corrections or examples
FIXED_EVENT_FEATURES = ("keyword", "question", "correction", "taught")
FITTED_EVENT_FEATURES = tuple(f for f in EVENT_FEATURES if f not in FIXED_EVENT_FEATURES)


def main_events(n: int, seed: int, schemas: dict[str, MemorySchema], embedder: Any, write: bool) -> None:
    """Fit the zero-shot event weights (``ZERO_SHOT_WEIGHTS``, ``extract/events.py``: schemas
    without keywords or examples) by conditional logit on the fit
    split; keyword, question, correction and taught keep their set values (the dialogues have
    no keywords, questions are already in the descriptions, no corrections, no examples)."""
    from appliance.extract.events import ZERO_SHOT_WEIGHTS
    from appliance.model.engine import LlamaCppEngine, resolve_model_path

    engine = LlamaCppEngine(resolve_model_path("smollm2", Path(__file__).resolve().parents[1] / "models"))
    fit = fit_turns(n, seed)
    sample = validation_turns()
    rows = event_rows(fit, NOTE_SETS["fit"], schemas, engine, embedder)
    check = event_rows(sample, None, schemas, engine, embedder)
    fixed = {k: v for k, v in ZERO_SHOT_WEIGHTS.items() if k not in FITTED_EVENT_FEATURES}
    weights = fit_events(rows, FITTED_EVENT_FEATURES, fixed)
    print(f"event rows: fit {len(rows)}, sample {len(check)}", file=sys.stderr)
    print("current:", ZERO_SHOT_WEIGHTS, file=sys.stderr)
    print("  fit split", event_accuracy(rows, ZERO_SHOT_WEIGHTS), "sample", event_accuracy(check, ZERO_SHOT_WEIGHTS))
    print("fitted:", {**fixed, **weights}, file=sys.stderr)
    print(
        "  fit split", event_accuracy(rows, {**fixed, **weights}), "sample", event_accuracy(check, {**fixed, **weights})
    )
    if write:
        from appliance.extract.events import EVENT_WEIGHTS_FILE

        meta = {
            "fitted_by": "bench/fit_weights.py --events --write",
            "sets": FIT_SETS,
            "rows": len(rows),
            "turns_per_set": n,
            "seed": seed,
        }
        EVENT_WEIGHTS_FILE.write_text(json.dumps({"zero_shot": weights, "meta": meta}, indent=1) + "\n")
        print(f"wrote {EVENT_WEIGHTS_FILE}", file=sys.stderr)


# --- corrected examples -----------------------------------------------------------------------
TAUGHT_K = 5  # corrected turns per service, as bench/zero_shot.py --k 5
TAUGHT_GRID = {
    "context": (0.0, 2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 14.0, 16.0),
    "floor": (0.3, 0.4, 0.5, 0.6),
    "value": (0.0, 0.5, 1.0, 2.0, 3.0),
    "cue": (0.0, 2.0, 4.0, 6.0, 8.0),
}
NEUTRAL_TAUGHT = {"context": 0.0, "floor": 0.5, "value": 0.0, "cue": 0.0}


def _taught_record(schema: MemorySchema, t: Turn, i: int) -> MemoryRecord:
    """A turn as the record a person corrected: its gold event, entity, values and their words."""
    g = _gold_record(schema, t)
    return MemoryRecord(
        memory_id=f"taught-{i}",
        session_id=f"teach-{t.dialogue}",
        timestamp=NOW,
        schema_id=schema.schema_id,
        status="reviewed",
        confidence=1.0,
        source_text=t.text,
        event_type=g["event_type"],
        entity_type=g["entity_type"],
        attributes=g["attributes"],
        spans={k: t.slots[k][0] for k in g["attributes"] if t.slots.get(k)},
    )


def taught_rows(
    turns: list[Turn], schemas: dict[str, MemorySchema], evidences: dict[str, SchemaEvidence], embedder: Any, seed: int
) -> list[dict[str, Any]]:
    """Rows of ``turns`` scored with ``TAUGHT_K`` corrected turns per service (CrossWOZ: per
    domain, one bank for its schema) taken from them; the corrected turns' dialogues are not
    scored. Each candidate keeps its zero-shot score and its taught evidence."""
    pool = turns[:]
    random.Random(seed + TAUGHT_K).shuffle(pool)
    chosen: dict[str, list[Turn]] = defaultdict(list)
    for t in pool:
        key = t.schema if t.schema != "crosswoz" else t.intent
        if len(chosen[key]) < TAUGHT_K and t.slots:
            chosen[key].append(t)
    by_schema: dict[str, list[Turn]] = defaultdict(list)
    for ts in chosen.values():
        by_schema[ts[0].schema] += ts
    banks = {
        name: ExampleBank.build(
            schemas[name], [_taught_record(schemas[name], t, i) for i, t in enumerate(ts)], embedder
        )
        for name, ts in by_schema.items()
    }
    aside = {t.dialogue for ts in chosen.values() for t in ts}
    rows = []
    for i, t in enumerate(x for x in turns if x.dialogue not in aside and x.schema in banks):
        schema, ev = schemas[t.schema], evidences[t.schema]
        ent = schema.entity(t.intent) if t.schema == "crosswoz" else schema.entities[0]
        cands = ev.candidates(ent.name, t.text, find_spans(schema.language, t.text, NOW + timedelta(seconds=i)))
        vecs = ev.encode_contexts(cands)
        rows.append(
            {
                "set": "crosswoz" if t.schema == "crosswoz" else "sgd",
                "cands": cands,
                "base": {n: [c.score for c in cs] for n, cs in cands.items()},
                "taught": ev.taught_evidence(banks[t.schema], t.text, cands, vecs),
                "golds": {k: [g for g in v if g != "dontcare"] for k, v in t.slots.items()},
                "typed": False,
                "kinds": {a.name: a.kind for a in ent.attributes},
            }
        )
    return rows


def taught_f1(
    rows: list[dict[str, Any]], w: dict[str, float], threshold: float
) -> dict[str, tuple[float, float, float]]:
    for r in rows:
        for n, cs in r["cands"].items():
            for c, base, (sim, same, cue) in zip(cs, r["base"][n], r["taught"][n]):
                c.score = base + w["context"] * max(0.0, sim - w["floor"]) + w["value"] * same + w["cue"] * cue
    return slot_f1(rows, lambda a: np.zeros(len(a)), threshold, rescore=False)


def fit_taught(rows: list[dict[str, Any]], threshold: float) -> dict[str, float]:
    """The grid point with the best ``neighbourhood_means`` of the mean slot F1 over the sets
    (two thirds of the grid lie within one standard error of its top; ties: the least pull, so
    a few examples drag no more than they need)."""
    axes = list(TAUGHT_GRID.values())

    def weights(index: tuple[int, ...]) -> dict[str, float]:
        return {k: axes[i][j] for i, (k, j) in enumerate(zip(TAUGHT_GRID, index))}

    def pull(w: dict[str, float]) -> float:
        return w["context"] * (1 - w["floor"]) + w["value"] + w["cue"]

    f1 = {
        index: float(np.mean([f for _, _, f in taught_f1(rows, weights(index), threshold).values()]))
        for index in itertools.product(*(range(len(a)) for a in axes))
    }
    smoothed = neighbourhood_means(f1)
    best = max(f1, key=lambda i: (round(smoothed[i], 6), -pull(weights(i))))
    print(
        f"corrected examples: best F1 {max(f1.values()):.4f}, chosen {weights(best)} "
        f"(F1 {f1[best]:.4f}, its neighbourhood {smoothed[best]:.4f})",
        file=sys.stderr,
    )
    return weights(best)


def main_taught(turns: int, seed: int, schemas: dict[str, MemorySchema], embedder: Any, write: bool) -> None:
    """Fit the weights of corrected examples on the shipped scorer (and write them into it)."""
    evidence_module._SCORER = None  # the scorer file as it is now on disk
    shipped = evidence_module.scorer()
    evidences = {k: SchemaEvidence(v, embedder) for k, v in schemas.items()}
    rows = taught_rows(fit_turns(turns, seed), schemas, evidences, embedder, seed)
    check = taught_rows(validation_turns(), schemas, evidences, embedder, seed)
    w = fit_taught(rows, shipped.threshold)
    for label_, weights in (("without examples", NEUTRAL_TAUGHT), ("shipped", shipped.taught), ("fitted", w)):
        print(
            f"k={TAUGHT_K} {label_} {weights}: fit split {taught_f1(rows, weights, shipped.threshold)}; "
            f"validation sample {taught_f1(check, weights, shipped.threshold)}",
            file=sys.stderr,
        )
    if write:
        data = json.loads(SCORER_FILE.read_text())
        data["taught"] = w
        data["meta"]["taught"] = (
            f"bench/fit_weights.py --taught, k={TAUGHT_K}, {len(rows)} fit turns, grid {TAUGHT_GRID}"
        )
        SCORER_FILE.write_text(json.dumps(data) + "\n")
        evidence_module._SCORER = None
        print(f"wrote the weights of corrected examples into {SCORER_FILE}", file=sys.stderr)


# --- review -------------------------------------------------------------------------------------
def review_rows(
    turns: list[Turn], notes_folder: Path | None, schemas: dict[str, MemorySchema], engine: Any, embedder: Any
) -> list[dict[str, Any]]:
    """Per record (``teacher_forced``): its review features and whether it is wrong (any part:
    event, entity, a value missed or wrong)."""
    from appliance.extract import review as review_module
    from appliance.extract.review import REVIEW_FEATURES

    # while fitting, no model flags anything: only the features are read
    n = len(REVIEW_FEATURES)
    review_module._MODEL = review_module.ReviewModel(np.zeros(n), np.zeros(n), np.ones(n), 1.0)
    out = []
    for f in teacher_forced(turns, notes_folder, schemas, engine, embedder):
        res, d = f.extraction, f.extraction.draft
        if d is None or "review_features" not in res.evidence:
            continue
        values = dict(d.entity.attributes)
        if f.turn is not None:
            t = f.turn
            r = Result(t, d.event_type if t.schema != "crosswoz" else d.entity.type, values, res.spans, "", 0.0, 0.0)
            score_turn(r, f.schema, d.entity.type)
            wrong = not right(r)
        else:
            assert f.note is not None
            sc = Scored(f.note, f.slug, d.event_type, d.entity.type, values, "", 0.0, 0.0)
            score_note(sc, f.schema)
            wrong = not sc.fully_right
        out.append({"set": f.set, "x": res.evidence["review_features"], "wrong": wrong})
    review_module._MODEL = None
    return out


def review_matrix(rows: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    from appliance.extract.review import REVIEW_FEATURES

    x = np.array([[1.0 if f == "bias" else float(r["x"].get(f, 0.0)) for f in REVIEW_FEATURES] for r in rows])
    y = np.array([float(r["wrong"]) for r in rows])
    return x, y, set_weights([r["set"] for r in rows])


def flag_report(rows: list[dict[str, Any]], p: np.ndarray, threshold: float) -> dict[str, dict[str, float]]:
    """Per set: the share of records flagged, of wrong records stored ok, of flagged ones wrong."""
    out = {}
    for k in sorted({r["set"] for r in rows}):
        idx = [i for i, r in enumerate(rows) if r["set"] == k]
        flagged = [p[i] >= threshold for i in idx]
        wrong = [rows[i]["wrong"] for i in idx]
        n_wrong = sum(wrong)
        out[k] = {
            "records": len(idx),
            "wrong": round(n_wrong / len(idx), 3),
            "flagged": round(sum(flagged) / len(idx), 3),
            "wrong_stored_ok": round(sum(w and not f for w, f in zip(wrong, flagged)) / max(1, n_wrong), 3),
            "flag_precision": round(sum(w and f for w, f in zip(wrong, flagged)) / max(1, sum(flagged)), 3),
        }
    return out


def main_review(n: int, seed: int, schemas: dict[str, MemorySchema], embedder: Any, write: bool) -> None:
    """Fit the review model (``extract/review.py``) on the fit sets' records: logistic weights
    (sets weighted alike), then the highest threshold that flags ``TARGET_RECALL`` of the wrong
    records in every fit set."""
    from appliance.extract.review import REVIEW_FEATURES, REVIEW_FILE, TARGET_RECALL
    from appliance.model.engine import LlamaCppEngine, resolve_model_path

    engine = LlamaCppEngine(resolve_model_path("smollm2", Path(__file__).resolve().parents[1] / "models"))
    rows = review_rows(fit_turns(n, seed), NOTE_SETS["fit"], schemas, engine, embedder)
    check = review_rows(validation_turns(), None, schemas, engine, embedder)
    x, y, weight = review_matrix(rows)
    mu, sd = x.mean(0), x.std(0) + 1e-6
    mu[0], sd[0] = 0.0, 1.0  # the bias stays 1
    w = logistic((x - mu) / sd, y, weight=weight)

    def prob(rs: list[dict[str, Any]]) -> np.ndarray:
        a = review_matrix(rs)[0] if rs else np.zeros((0, len(REVIEW_FEATURES)))
        return np.asarray(1 / (1 + np.exp(-np.clip(((a - mu) / sd) @ w, -30, 30))))

    p = prob(rows)
    # the highest threshold at which every fit set's wrong records are flagged at TARGET_RECALL
    candidates = sorted(set(np.round(p, 4).tolist()), reverse=True)
    threshold = 0.0
    for t in candidates:
        report = flag_report(rows, p, t)
        if all(v["wrong_stored_ok"] <= 1 - TARGET_RECALL for v in report.values()):
            threshold = float(t)
            break
    print("review weights:", dict(zip(REVIEW_FEATURES, np.round(w, 3).tolist())), file=sys.stderr)
    print(f"threshold {threshold:.4f}: fit {flag_report(rows, p, threshold)}", file=sys.stderr)
    print(f"  validation sample {flag_report(check, prob(check), threshold)}", file=sys.stderr)
    if write:
        meta = {
            "fitted_by": "bench/fit_weights.py --review --write",
            "sets": FIT_SETS,
            "records": len(rows),
            "target_recall": TARGET_RECALL,
        }
        data = {
            "features": list(REVIEW_FEATURES),
            "weights": np.round(w, 6).tolist(),
            "mu": np.round(mu, 6).tolist(),
            "sd": np.round(sd, 6).tolist(),
            "threshold": round(threshold, 4),
            "meta": meta,
        }
        REVIEW_FILE.write_text(json.dumps(data, indent=1) + "\n")
        print(f"wrote {REVIEW_FILE}", file=sys.stderr)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", type=int, default=2000, help="fit turns per set (whole dialogues)")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument(
        "--write", action="store_true", help=f"write {SCORER_FILE.name} (with --events: event_weights.json)"
    )
    ap.add_argument("--events", action="store_true", help="fit the event weights instead (prints them)")
    ap.add_argument("--check", action="store_true", help="only score the shipped scorer on the fit and validation rows")
    ap.add_argument("--taught", action="store_true", help="only fit the weights of corrected examples (k=5)")
    ap.add_argument("--review", action="store_true", help="fit the review model (with --write: review.json)")
    ap.add_argument("--keys", action="store_true", help="only refit the key threshold on the shipped scorer")
    ap.add_argument("--negation", action="store_true", help="only refit how far a negation reaches")
    ap.add_argument("--taught-turns", type=int, default=600, help="fit turns per set for the corrected-example weights")
    args = ap.parse_args()
    embedder = shared_embedder("use3")
    schemas = all_schemas()
    if args.events:
        main_events(args.turns, args.seed, schemas, embedder, args.write)
        return
    if args.review:
        main_review(args.turns, args.seed, schemas, embedder, args.write)
        return
    if args.keys:
        main_keys(embedder, args.write)
        return
    if args.negation:
        main_negation(args.turns, args.seed, schemas, embedder, args.write)
        return
    if args.taught:
        main_taught(args.taught_turns, args.seed, schemas, embedder, args.write)
        return
    evidences = {k: SchemaEvidence(v, embedder) for k, v in schemas.items()}
    fit = fit_turns(args.turns, args.seed)
    sample = validation_turns()
    rows, check = collect(fit, schemas, evidences), collect(sample, schemas, evidences)
    rows += collect_notes(NOTE_SETS["fit"], embedder)
    x, y, weight = matrix(rows)
    print(f"fit turns {len(fit)}, pairs {len(y)}, positive {int(y.sum())}", file=sys.stderr)
    try:  # the shipped scorer on today's features: the before of a refit
        shipped = Scorer()
        print(
            f"shipped scorer: fit split {slot_f1(rows, shipped.score, shipped.threshold)}; "
            f"validation sample {slot_f1(check, shipped.score, shipped.threshold)}",
            file=sys.stderr,
        )
    except ValueError as exc:
        print(f"shipped scorer: {exc}", file=sys.stderr)
    if args.check:
        return
    w = logistic(x, y, weight=weight)
    print("linear, threshold -1:", slot_f1(check, lambda a: a @ w, -1.0), file=sys.stderr)
    nets = [train_mlp(x, y, seed, weight) for seed in SEEDS]

    def score(a: np.ndarray) -> np.ndarray:
        return mean_score(nets, a)

    best = best_threshold(rows, score)
    print(
        f"threshold {best}: fit split {slot_f1(rows, score, best)}; validation sample {slot_f1(check, score, best)}",
        file=sys.stderr,
    )
    # without the sentence encoder (APPLIANCE_SEMANTIC=off) the similarity features are zero: the
    # networks fitted with them read that as a very poor fit, so a second set is fitted without
    plain_x = without_similarity(x)
    plain_nets = [train_mlp(plain_x, y, seed, weight) for seed in SEEDS]

    def plain_score(a: np.ndarray) -> np.ndarray:
        return mean_score(plain_nets, without_similarity(a))

    plain_best = best_threshold(rows, plain_score)
    print(
        f"without the encoder, threshold {plain_best}: fit split {slot_f1(rows, plain_score, plain_best)}; "
        f"validation sample {slot_f1(check, plain_score, plain_best)}",
        file=sys.stderr,
    )
    key_best = fit_key_threshold(rows, score, best)
    print(f"key threshold {key_best}: fit split {slot_f1(rows, score, best, key_threshold=key_best)}", file=sys.stderr)
    data = {
        "features": list(FEATURES),
        "nets": _as_lists(nets),
        "threshold": best,
        "key_threshold": key_best,
        "negation_scope": shipped_scope(),
        "plain": {"nets": _as_lists(plain_nets), "threshold": plain_best},
        "meta": {
            "fitted_by": "bench/fit_weights.py",
            "fit_turns": len(fit),
            "sets": FIT_SETS,
            "hidden": HIDDEN,
            "epochs": EPOCHS,
            "seeds": list(SEEDS),
        },
    }
    if args.write:
        # the corrected examples' weights are in the scorer's units: fitted anew on the new scorer
        SCORER_FILE.write_text(json.dumps({**data, "taught": NEUTRAL_TAUGHT}) + "\n")
        print(f"wrote {SCORER_FILE}", file=sys.stderr)
        main_taught(args.taught_turns, args.seed, schemas, embedder, write=True)


if __name__ == "__main__":
    main()
