"""Dates written in a message, normalised relative to the message time.

Each found date has a surface (the exact text), a value to store (an ISO day "2026-12-01", or an
ISO month "2023-05" when only the month is said) and the range of days it covers (for recall
filters: "last week" covers seven days and has no single value). Forms: relative days
("yesterday", "昨天", "3 days ago", "in 3 days", "3天前"), weekdays ("next Wednesday", "this
Sunday", "下周三"), full dates ("2026-11-28", "2026年11月28日"), month and day ("Nov 28", "28
Nov", "3rd of March", "11月30日"), a day of the month ("the 11th", "13th of this month", "5号"),
months ("May 2023", "in May", "2023年5月", "last month", "上个月") and weeks ("last week", "上周").
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from functools import lru_cache

from .language import Language, alternation

__all__ = ["DateSpan", "find_dates", "safe_date", "date_range"]


@dataclass(frozen=True)
class DateSpan:
    value: str | None  # ISO day or month to store; None for a span with no single value (a week)
    surface: str
    start: int = -1
    end: int = -1
    first: date | None = None  # the days it covers, inclusive
    last: date | None = None


def safe_date(y: int, m: int, d: int) -> date | None:
    try:
        return date(y, m, d)
    except ValueError:
        return None


def _month_end(y: int, m: int) -> date:
    return date(y, m, calendar.monthrange(y, m)[1])


def _shift_month(y: int, m: int, delta: int) -> tuple[int, int]:
    idx = y * 12 + (m - 1) + delta
    return idx // 12, idx % 12 + 1


def date_range(value: str) -> tuple[date, date] | None:
    """The days an ISO day or month value covers."""
    try:
        if len(value) == 7:
            y, m = int(value[:4]), int(value[5:7])
            return date(y, m, 1), _month_end(y, m)
        d = date.fromisoformat(value[:10])
        return d, d
    except ValueError:
        return None


@lru_cache(maxsize=16)
def _en_patterns(
    months: tuple[str, ...],
    weekdays: tuple[str, ...],
    suffixes: tuple[str, ...],
    this: tuple[str, ...],
    nxt: tuple[str, ...],
    last: tuple[str, ...],
    of_month: tuple[str, ...],
) -> dict[str, re.Pattern[str]]:
    # whole month words only: a prefix would read "Margaret", "novel", "Octavia" as months
    mon = "|".join(sorted({m for m in months if m.isascii()}, key=lambda m: (-len(m), m))) or "(?!)"
    wd = alternation([w for w in weekdays if w.isascii()])
    suf = "|".join(suffixes) or "(?!)"
    mod = alternation([*this, *nxt, *last])
    ofm = alternation(of_month, boundary=False)
    return {
        "md": re.compile(
            rf"\b(?P<mon>{mon})\b\.?\s+(?:the\s+)?(?P<day>\d{{1,2}})(?:{suf})?\b(?:,?\s+(?P<year>\d{{4}}))?", re.I
        ),
        "dm": re.compile(
            rf"\b(?:the\s+)?(?P<day>\d{{1,2}})(?:{suf})?\s+(?:of\s+)?(?P<mon>{mon})\b(?:,?\s+(?P<year>\d{{4}}))?",
            re.I,
        ),
        "weekday": re.compile(rf"(?:(?P<mod>{mod})\s+)?(?P<wd>{wd})(?:\s+(?P<after>{mod}))?(?:\s+week)?", re.I),
        "ordinal": re.compile(rf"\b(?:the\s+)?(?P<day>\d{{1,2}})(?P<suf>{suf})\b(?:\s+(?P<of>{ofm}))?", re.I),
        "month": re.compile(rf"\b(?:(?P<mod>{mod})\s+)?(?P<mon>{mon})\b(?:\s+(?P<year>\d{{4}}))?", re.I),
        "relmonth": re.compile(rf"\b(?P<mod>{mod})\s+(?P<unit>month|weekend|week|year)\b", re.I),
        "in_n": re.compile(r"\bin\s+(?P<n>\d{1,2}|a|one|two|three|four|five|six|seven)\s+(?P<unit>day|week)s?\b", re.I),
    }


_ZH_WEEK = re.compile(r"(?P<mod>下下|下个|下|上个|上|这个|这|本)?(?P<wd>(?:周|星期|礼拜)[一二三四五六日天])")
_ZH_DAY = re.compile(r"(?<![月\d])(?P<day>\d{1,2})[号日]")
_ZH_NEXT_MONTH_DAY = re.compile(r"(?P<mod>下个月|下月|上个月|上月|这个月|本月)(?P<day>\d{1,2})[号日]")
_ZH_MONTH = re.compile(r"(?:(?P<year>\d{4})年)?(?P<month>\d{1,2})月(?![\d份]*[日号\d])")
_ZH_RELMONTH = re.compile(
    r"(?P<mod>下个|上个|这个|这|本|下|上)(?P<unit>月|周末|周|星期|礼拜)(?![一二三四五六日天\d])|(?P<year>去年|今年|明年)"
)
_ZH_LATER = re.compile(r"(?P<n>\d{1,2})\s?(?P<unit>天|周)后")
_ZH_AGO = re.compile(r"(?P<n>\d{1,2}|[一二两三四五六七八九十])\s?(?P<unit>天|个?星期|周)前")
_ZH_DIGITS = {c: i for i, c in enumerate("零一二三四五六七八九十")} | {"两": 2}
# a month and day in Chinese numerals ("四月十九号", "八月二号"); digits are the packs' month_day
_ZH_NUMERAL_MONTH_DAY = re.compile(
    r"(?P<month>十[一二]?|[一二三四五六七八九])月(?P<day>[一二三]?十[一二三四五六七八九]?|[一二三四五六七八九])[日号]"
)


def _zh_numeral(text: str) -> int:
    """一 … 三十一 as an integer."""
    if "十" not in text:
        return _ZH_DIGITS[text]
    tens, _, ones = text.partition("十")
    return (_ZH_DIGITS[tens] if tens else 1) * 10 + (_ZH_DIGITS[ones] if ones else 0)


def _weekday_before(today: date, target: int, today_counts: bool = False) -> date:
    """The latest day with weekday ``target`` before ``today`` (or ``today`` itself when
    ``today_counts``): "last Monday", "I ran on Monday", "I ran there this Monday"."""
    back = (today.weekday() - target) % 7
    return today - timedelta(days=back or (0 if today_counts else 7))


def _mod_delta(lang: Language, word: str | None) -> int:
    if not word:
        return 0
    w = word.lower()
    if w in ("下下",):
        return 2
    if w in {x.lower() for x in lang.lex.next_words}:
        return 1
    if w in {x.lower() for x in lang.lex.last_words}:
        return -1
    return 0


def find_dates(lang: Language, text: str, now: datetime) -> list[DateSpan]:
    """Every date the text states, as ``DateSpan``s (overlapping readings: the longest wins)."""
    lx = lang.lex
    today = now.date()
    low = text.lower()
    found: list[DateSpan] = []

    def add(value: str | None, start: int, end: int, first: date | None = None, last: date | None = None) -> None:
        if value is not None and first is None:
            rng = date_range(value)
            if rng:
                first, last = rng
        found.append(DateSpan(value, text[start:end], start, end, first, last))

    def day(d: date | None, m: re.Match[str]) -> None:
        if d is not None:
            add(d.isoformat(), m.start(), m.end())

    for phrase, delta in sorted(lx.relative_days.items(), key=lambda kv: -len(kv[0])):
        for m in re.finditer(re.escape(phrase) if not phrase.isascii() else rf"\b{re.escape(phrase)}\b", low):
            day(today + timedelta(days=delta), m)
    for rx in lang.pattern("ago"):
        for m in re.finditer(rx, text, re.I):
            n = m.group("n")
            unit = lx.unit_words.get(m.group("unit").lower(), m.group("unit").lower())
            k = int(n) if n.isdigit() else lx.number_words.get(n.lower())
            if k is not None:
                day(today - timedelta(days=k * (7 if unit == "week" else 1)), m)
    for rx in lang.pattern("ymd"):
        for m in re.finditer(rx, text):
            day(safe_date(int(m.group("year")), int(m.group("month")), int(m.group("day"))), m)
    for rx in lang.pattern("month_day"):
        for m in re.finditer(rx, text):
            day(safe_date(today.year, int(m.group("month")), int(m.group("day"))), m)
    months = {k[:3].lower(): v for k, v in lx.months.items() if k.isascii()}
    weekdays = {k.lower(): v for k, v in lx.weekdays.items()}
    if months:
        pats = _en_patterns(
            tuple(lx.months),
            tuple(lx.weekdays),
            tuple(lx.ordinal_suffixes),
            tuple(lx.this_words),
            tuple(lx.next_words),
            tuple(lx.last_words),
            tuple(lx.of_month_words),
        )
        for key in ("md", "dm"):
            for m in pats[key].finditer(text):
                year = int(m.group("year")) if m.group("year") else today.year
                day(safe_date(year, months[m.group("mon")[:3].lower()], int(m.group("day"))), m)
        for m in pats["weekday"].finditer(text):
            target = weekdays.get(m.group("wd").lower())
            if target is None:
                continue
            delta = _mod_delta(lang, m.group("mod") or m.group("after"))
            ahead = (target - today.weekday()) % 7
            if delta == 1:
                d = today + timedelta(days=ahead + (7 if ahead == 0 or "week" in m.group(0).lower() else 0))
            elif delta == -1:
                d = _weekday_before(today, target)
            elif (not (m.group("mod") or m.group("after")) or target <= today.weekday()) and lang.past_tense(
                lang.sentence_at(text, m.start(), m.end())
            ):
                # told in the past: "I ran on Thursday" is the Thursday before; "this Monday" the
                # Monday of this week (today's weekday bare is a week ago, with "this" today)
                d = _weekday_before(today, target, today_counts=bool(m.group("mod") or m.group("after")))
            else:
                d = today + timedelta(days=ahead)
            day(d, m)
        for m in pats["ordinal"].finditer(text):
            of = (m.group("of") or "").lower()
            y, mo = _shift_month(today.year, today.month, 1 if any(w.lower() in of for w in lx.next_words) else 0)
            day(safe_date(y, mo, int(m.group("day"))), m)
        for m in pats["month"].finditer(text):
            mon = m.group("mon")[:3].lower()
            if (
                mon == "may"
                and not (m.group("year") or m.group("mod"))
                and not re.search(r"\bin\s+$", low[: m.start()])
            ):
                continue  # "may" is also a verb: only "in May", "May 2023", "last May" count
            year = int(m.group("year")) if m.group("year") else today.year + _mod_delta(lang, m.group("mod"))
            add(f"{year:04d}-{months[mon]:02d}", m.start(), m.end())
        for m in pats["relmonth"].finditer(text):
            delta = _mod_delta(lang, m.group("mod"))
            unit = m.group("unit").lower()
            if unit == "month":
                y, mo = _shift_month(today.year, today.month, delta)
                add(f"{y:04d}-{mo:02d}", m.start(), m.end())
            elif unit in ("week", "weekend"):
                monday = today - timedelta(days=today.weekday()) + timedelta(weeks=delta)
                first = monday + timedelta(days=5 if unit == "weekend" else 0)  # Saturday and Sunday
                add(None, m.start(), m.end(), first, monday + timedelta(days=6))
            else:
                add(None, m.start(), m.end(), date(today.year + delta, 1, 1), date(today.year + delta, 12, 31))
        for m in pats["in_n"].finditer(text):
            n = m.group("n")
            k = int(n) if n.isdigit() else lx.number_words.get(n.lower())
            if k is not None:
                day(today + timedelta(days=k * (7 if m.group("unit").lower() == "week" else 1)), m)
    if any(p.script == "han" for p in lang.packs):
        _han_dates(lang, text, today, add, day)
    return _widest(found)


def _han_dates(lang: Language, text: str, today: date, add: object, day: object) -> None:
    from collections.abc import Callable

    add_: Callable[..., None] = add  # type: ignore[assignment]
    day_: Callable[..., None] = day  # type: ignore[assignment]
    wd = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}
    for m in _ZH_WEEK.finditer(text):
        target = wd[m.group("wd")[-1]]
        mod = m.group("mod") or ""
        monday = today - timedelta(days=today.weekday())
        weeks = 2 if mod == "下下" else 1 if mod.startswith("下") else -1 if mod.startswith("上") else 0
        if not mod and lang.past_tense(lang.sentence_at(text, m.start(), m.end())):
            day_(_weekday_before(today, target), m)  # "周一去了医院"
        elif not mod:
            ahead = (target - today.weekday()) % 7
            day_(today + timedelta(days=ahead), m)
        else:
            day_(monday + timedelta(weeks=weeks, days=target), m)
    for m in _ZH_NEXT_MONTH_DAY.finditer(text):
        mod = m.group("mod")
        delta = 1 if mod.startswith("下") else -1 if mod.startswith("上") else 0
        y, mo = _shift_month(today.year, today.month, delta)
        day_(safe_date(y, mo, int(m.group("day"))), m)
    for m in _ZH_NUMERAL_MONTH_DAY.finditer(text):
        day_(safe_date(today.year, _zh_numeral(m.group("month")), _zh_numeral(m.group("day"))), m)
    for m in _ZH_DAY.finditer(text):
        day_(safe_date(today.year, today.month, int(m.group("day"))), m)
    for m in _ZH_MONTH.finditer(text):
        year = int(m.group("year")) if m.group("year") else today.year
        month = int(m.group("month"))
        if 1 <= month <= 12:
            add_(f"{year:04d}-{month:02d}", m.start(), m.end())
    for m in _ZH_RELMONTH.finditer(text):
        if m.group("year"):
            delta = {"去年": -1, "今年": 0, "明年": 1}[m.group("year")]
            add_(None, m.start(), m.end(), date(today.year + delta, 1, 1), date(today.year + delta, 12, 31))
            continue
        mod = m.group("mod")
        delta = 1 if mod.startswith("下") else -1 if mod.startswith("上") else 0
        if m.group("unit") == "月":
            y, mo = _shift_month(today.year, today.month, delta)
            add_(f"{y:04d}-{mo:02d}", m.start(), m.end())
        else:
            monday = today - timedelta(days=today.weekday()) + timedelta(weeks=delta)
            first = monday + timedelta(days=5 if m.group("unit") == "周末" else 0)  # 周末: Saturday, Sunday
            add_(None, m.start(), m.end(), first, monday + timedelta(days=6))
    for m in _ZH_AGO.finditer(text):
        n = m.group("n")
        k = int(n) if n.isdigit() else _zh_numeral(n)
        day_(today - timedelta(days=k * (1 if m.group("unit") == "天" else 7)), m)
    for m in _ZH_LATER.finditer(text):
        k = int(m.group("n"))
        day_(today + timedelta(days=k * (7 if m.group("unit") == "周" else 1)), m)


def _widest(found: list[DateSpan]) -> list[DateSpan]:
    """Drop readings inside a longer one ("March" inside "March 3rd"); keep text order."""
    keep: list[DateSpan] = []
    for d in sorted(found, key=lambda x: (-(x.end - x.start), x.start)):
        if any(k.start <= d.start and d.end <= k.end for k in keep):
            continue
        keep.append(d)
    return sorted(keep, key=lambda x: x.start)


def relative_day_words(lang: Language) -> str:
    return alternation(lang.lex.relative_days, boundary=False)
