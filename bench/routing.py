"""Schema routing benchmark: with both shipped schemas loaded, how often does the appliance
pick the schema an utterance's gold record belongs to? Uses the labelled dev set.

    .venv/bin/python bench/routing.py [--model smollm2]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from appliance.domain.loading import load_schema  # noqa: E402
from appliance.extract.routing import choose_schema  # noqa: E402
from appliance.model.engine import LlamaCppEngine, resolve_model_path  # noqa: E402
from bench.devset import customer_service, travel_assistant  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", default="smollm2")
    args = ap.parse_args()
    schemas = [load_schema(ROOT / "schemas" / f"{n}.json") for n in ("customer_service", "travel_assistant")]
    engine = LlamaCppEngine(resolve_model_path(args.model, ROOT / "models"))
    cases = [(c[0], "customer_service") for c in customer_service.CASES]
    cases += [(c[0], "travel_assistant") for c in travel_assistant.CASES]
    for mode, eng in (("lexical only", None), ("model + lexical", engine)):
        right, times, wrong = 0, [], []
        for text, gold in cases:
            t = time.perf_counter()
            got = choose_schema(schemas, eng, text).domain
            times.append(time.perf_counter() - t)
            right += got == gold
            if got != gold:
                wrong.append(text)
        times.sort()
        print(
            f"| {args.model} | {mode} | {len(cases)} | {right / len(cases):.3f} | "
            f"{statistics.median(times) * 1000:.0f} ms | {times[int(0.95 * (len(times) - 1))] * 1000:.0f} ms |"
        )
        for w in wrong[:8]:
            print(f"    wrong: {w}")


if __name__ == "__main__":
    main()
