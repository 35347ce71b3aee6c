"""Dates written in a message, normalised to ISO relative to the message time.

"昨天" / "yesterday" → the day before the message; "3 days ago", "11月30日", "Nov 28",
"28 Nov", "2026-11-28". The words and the language-specific patterns come from the packs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from functools import lru_cache

from .language import Language, alternation

__all__ = ["DateSpan", "find_dates", "safe_date"]


@dataclass(frozen=True)
class DateSpan:
    value: str  # ISO date
    surface: str  # the exact text it came from


def safe_date(y: int, m: int, d: int) -> date | None:
    try:
        return date(y, m, d)
    except ValueError:
        return None


@lru_cache(maxsize=16)
def _month_patterns(months: tuple[str, ...], suffixes: tuple[str, ...]) -> tuple[re.Pattern[str], re.Pattern[str]]:
    # Month words match by their first three letters and any continuation ("Nov", "November").
    stems = sorted({m[:3] for m in months if m.isascii()})
    alt = "|".join(stems) or "(?!)"
    suf = "|".join(suffixes) or "(?!)"
    md = re.compile(rf"\b({alt})[a-z]*\.?\s+(\d{{1,2}})(?:{suf})?\b", re.I)
    dm = re.compile(rf"\b(\d{{1,2}})(?:{suf})?\s+({alt})[a-z]*\b", re.I)
    return md, dm


def find_dates(lang: Language, text: str, now: datetime) -> list[DateSpan]:
    """Every date the text states, in order of the rules (relative words, "N days ago",
    full dates, month-day forms), as ISO strings."""
    lx = lang.lex
    out: list[DateSpan] = []
    today = now.date()
    low = text.lower()
    for phrase, delta in sorted(lx.relative_days.items(), key=lambda kv: -len(kv[0])):
        pos = low.find(phrase)
        if pos >= 0 and not any(phrase in c.surface.lower() for c in out):
            out.append(DateSpan((today + timedelta(days=delta)).isoformat(), text[pos : pos + len(phrase)]))
    for rx in lang.pattern("ago"):
        for m in re.finditer(rx, text, re.I):
            n = m.group("n")
            unit = lx.unit_words.get(m.group("unit").lower(), m.group("unit").lower())
            k = int(n) if n.isdigit() else lx.number_words.get(n.lower())
            if k is not None:
                days = k * (7 if unit == "week" else 1)
                out.append(DateSpan((today - timedelta(days=days)).isoformat(), m.group(0)))
    seen_full: set[str] = set()
    for rx in lang.pattern("ymd"):
        for m in re.finditer(rx, text):
            d = safe_date(int(m.group("year")), int(m.group("month")), int(m.group("day")))
            if d and m.group(0) not in seen_full:
                seen_full.add(m.group(0))
                out.append(DateSpan(d.isoformat(), m.group(0)))
    for rx in lang.pattern("month_day"):
        for m in re.finditer(rx, text):
            d = safe_date(today.year, int(m.group("month")), int(m.group("day")))
            if d:
                out.append(DateSpan(d.isoformat(), m.group(0)))
    md, dm = _month_patterns(tuple(lx.months), tuple(lx.ordinal_suffixes))
    by_stem = {k[:3]: v for k, v in lx.months.items() if k.isascii()}
    for m in list(md.finditer(text)) + list(dm.finditer(text)):
        mon, day = (m.group(1), m.group(2)) if m.re is md else (m.group(2), m.group(1))
        month = by_stem.get(mon[:3].lower())
        d = safe_date(today.year, month, int(day)) if month else None
        if d:
            out.append(DateSpan(d.isoformat(), m.group(0)))
    return out


def relative_day_words(lang: Language) -> str:
    return alternation(lang.lex.relative_days, boundary=False)
