"""Check that each question of a paraphrased conversational set shares at most one content word
with its evidence turns (the set's rule: people ask weeks later in their own words).

A content word is an English word outside the function words below (lower-cased, a trailing
possessive or plural "s" dropped; the speaker's name before a turn counts like any other word),
or a run of two or more Chinese characters that question and evidence share (a maximal common
run counts once; runs of function characters alone do not count). Numbers count as words.

Run: python bench/convsets/paraphrase_check.py bench/convsets/paraphrase/*.json [--max 1] [--show]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

FUNCTION_WORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have
    having he her here hers herself him himself his how i if in into is it its itself just me more most my
    myself no nor not now of off on once only or other our ours ourselves out over own same she should so
    some such than that the their theirs them themselves then there these they this those through to too
    under until up very was we were what when where which while who whom why will with would you your
    yours yourself yourselves what's who's it's i'm i've i'd i'll you're he's she's that's there's don't
    didn't doesn't isn't wasn't won't can't let's ever also still yet much many one get got go going went
    say said tell told ask asked know make made like really actually okay oh yes yeah well""".split()
)
# characters that carry grammar, not content, in Chinese
FUNCTION_CHARS = set(
    "的了吗呢吧啊呀是在有和与就都也还又很太不没么什哪谁几个这那些吗呀嘛哦么怎样为把被给对从到跟让得地着过"
)


def english_words(text: str) -> set[str]:
    out = set()
    for w in re.findall(r"[a-z0-9][a-z0-9']*", text.lower()):
        w = re.sub(r"'s$", "", w)
        if w in FUNCTION_WORDS or len(w) < 2 and not w.isdigit():
            continue
        if len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
            w = w[:-1]
        out.add(w)
    return out


def chinese_runs(question: str, evidence: str) -> set[str]:
    """Maximal runs of ≥2 CJK characters the question shares with the evidence."""
    runs: set[str] = set()
    q = question
    i = 0
    while i < len(q):
        best = ""
        for j in range(len(q), i + 1, -1):
            piece = q[i:j]
            if re.fullmatch(r"[\u4e00-\u9fff]+", piece) and piece in evidence:
                best = piece
                break
        if best and not set(best) <= FUNCTION_CHARS:
            runs.add(best)
            i += len(best)
        else:
            i += 1
    return runs


def shared(question: str, evidence: list[str]) -> set[str]:
    text = " ".join(evidence)
    return (english_words(question) & english_words(text)) | chinese_runs(question, text)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("--max", type=int, default=1)
    ap.add_argument("--show", action="store_true", help="list every question's shared words")
    args = ap.parse_args()
    bad = 0
    for path in args.files:
        data = json.loads(path.read_text(encoding="utf-8"))
        if "sessions" not in data:  # split.json
            continue
        turns = {f"s{i}t{j}": t for i, s in enumerate(data["sessions"], 1) for j, t in enumerate(s["turns"], 1)}
        for q in data["questions"]:
            words = shared(q["question"], [turns[e] for e in q["evidence"]])
            if len(words) > args.max or args.show:
                bad += len(words) > args.max
                print(f"{path.name} {q['id']}: {sorted(words)} — {q['question']}")
    print(f"{bad} question(s) share more than {args.max} content word(s) with their evidence")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
