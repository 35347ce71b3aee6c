"""Clock times in text, normalised to "HH:MM": "4:30 pm", "quarter past 7 in the morning",
"half past six", "noon", "morning 11:30", "3:30 in the afternoon", "下午三点", "3点半"."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from .language import Language, alternation
from .numbers import word_number

__all__ = ["TimeSpan", "find_times"]


@dataclass(frozen=True)
class TimeSpan:
    start: int
    end: int
    surface: str
    value: str  # HH:MM


# an hour is a whole number: "this morning 13.6kg" states a weight, "morning 135" no hour
_WHOLE = r"(?!\d|[.,]\d)"


@lru_cache(maxsize=16)
def _patterns(
    codes: tuple[str, ...],
    periods: tuple[str, ...],
    quarters: tuple[str, ...],
    clock: tuple[str, ...],
    oclock: tuple[str, ...],
    numwords: tuple[str, ...],
) -> list[re.Pattern[str]]:
    per = alternation(periods, boundary=True)
    # after the hour the period may be glued to it ("7pm", "10am"), where \b cannot stand
    per_after = rf"(?<![A-Za-z]){alternation(periods, boundary=False)}(?![A-Za-z])"
    quart = alternation(quarters, boundary=True)
    clk = alternation(clock, boundary=True)
    ocl = alternation(oclock, boundary=False)
    latin_words = "|".join(
        sorted((re.escape(w) for w in numwords if w.isascii() and len(w) > 2), key=len, reverse=True)
    )
    han_digits = "".join(sorted({c for w in numwords if not w.isascii() for c in w}))
    hour = rf"(?:\d{{1,2}}|{latin_words})" if latin_words else r"\d{1,2}"
    pats = [
        # "quarter past 7", "half past six", "quarter to 8" (+ optional period)
        rf"(?P<q>{quart})\s+(?P<h>{hour})(?:\s*(?:{ocl}))?(?:\s*(?P<p>{per_after}))?",
        # "11:30", "4:30 pm", "morning 11:30", "3:30 in the afternoon", "7 am", "7 o'clock", "three pm"
        rf"(?:(?P<p0>{per})\s*)?(?P<h>\d{{1,2}}|\b(?:{latin_words})\b){_WHOLE}(?::(?P<m>\d{{2}}))?\s*(?:(?P<oc>{ocl})\s*)?(?P<p>{per_after})?"
        if latin_words
        else rf"(?:(?P<p0>{per})\s*)?(?P<h>\d{{1,2}}){_WHOLE}(?::(?P<m>\d{{2}}))?\s*(?:(?P<oc>{ocl})\s*)?(?P<p>{per_after})?",
        # "noon", "midnight"
        rf"(?P<c>{clk})",
    ]
    if han_digits:
        # "下午三点半", "3点15分", "晚上8点" (before the digit forms, which would take "3点" alone)
        pats.insert(
            0,
            rf"(?P<p0>{per})?\s*(?P<h>\d{{1,2}}|[{han_digits}]{{1,3}})\s*(?P<oc>点|时)\s*(?:(?P<m>\d{{1,2}}|[{han_digits}]{{1,3}})\s*分?|(?P<q2>半|一刻|三刻))?",
        )
    return [re.compile(p, re.IGNORECASE) for p in pats]


def find_times(lang: Language, text: str) -> list[TimeSpan]:
    """Every clock time the text states (a bare number is a time only with a period, an
    "o'clock" word, or minutes: "7" alone is not)."""
    lx = lang.lex
    periods = {k.lower(): v for k, v in lx.day_periods.items()}
    pats = _patterns(
        lang.codes,
        tuple(lx.day_periods),
        tuple(lx.quarter_words),
        tuple(lx.clock_words),
        tuple(lx.oclock),
        tuple(lx.number_words),
    )
    quarters = {k.lower(): v for k, v in lx.quarter_words.items()}
    out: list[TimeSpan] = []
    taken: list[tuple[int, int]] = []
    for rx in pats:
        for m in rx.finditer(text):
            if any(a < m.end() and m.start() < b for a, b in taken) or not m.group(0).strip():
                continue
            groups = m.groupdict()
            if groups.get("c"):
                value = f"{lx.clock_words.get(groups['c'].lower(), lx.clock_words.get(groups['c'], 12)):02d}:00"
            else:
                h_text = groups.get("h") or ""
                h = int(h_text) if h_text.isdigit() else word_number(lang, h_text)
                if h is None:
                    continue
                minutes = 0
                m_text = groups.get("m")
                if m_text:
                    mm = int(m_text) if m_text.isdigit() else word_number(lang, m_text)
                    minutes = mm if mm is not None else 0
                q = (groups.get("q") or groups.get("q2") or "").lower()
                if q:
                    delta = quarters.get(q, 0)
                    if delta < 0:
                        h, minutes = h - 1, 60 + delta
                    else:
                        minutes = delta
                period = (groups.get("p") or groups.get("p0") or "").lower()
                if not (m_text or q or period or groups.get("oc")):
                    continue  # a bare number is not a time
                if h > 24 or minutes > 59:
                    continue
                kind = periods.get(period, "")
                if kind == "pm" and h < 12:
                    h += 12
                elif kind == "am" and h == 12:
                    h = 0
                elif kind == "noon" and h < 11:
                    h += 12
                value = f"{h % 24:02d}:{minutes:02d}"
            surface = m.group(0).strip()
            start = m.start() + (len(m.group(0)) - len(m.group(0).lstrip()))
            out.append(TimeSpan(start, start + len(surface), surface, value))
            taken.append((start, start + len(surface)))
    return sorted(out, key=lambda t: t.start)
