"""Numbers and amounts in text, with the packs' words.

* digits with currency marks: "¥1,299.50" → 1299.5, "2k" → 2000, "45 dollars" → 45;
* number words: "three" → 3, "twenty one" → 21, "两" → 2, "十五" → 15, "三百" → 300;
* ranges and bounds, kept as such: "100-150元" → "100-150", "4.5分以上" → ">=4.5",
  "under $200" → "<200", "between 50 and 100" → "50-100".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from .language import Language, alternation, has_cjk

__all__ = [
    "NumberSpan",
    "find_numbers",
    "number_pattern",
    "normalise_number",
    "money_after",
    "currency_before_pattern",
    "word_number",
    "range_value",
]


@dataclass(frozen=True)
class NumberSpan:
    start: int
    end: int
    surface: str
    value: float | str  # a number, or a range/bound written as text ("100-150", ">=4.5")
    money: bool  # a currency mark or word is part of it
    written: bool  # spelled out in words ("three", "两")


@lru_cache(maxsize=16)
def _patterns(
    before: tuple[str, ...], after: tuple[str, ...], suffixes: tuple[str, ...]
) -> tuple[re.Pattern[str], re.Pattern[str]]:
    pre = alternation(before, boundary=False)
    post = alternation([*after, *suffixes], boundary=False)
    # a thousands suffix ("2k") must not be the start of a word ("2 kids")
    number = re.compile(
        rf"(?:{pre})?\s?(\d{{1,3}}(?:,\d{{3}})+|\d+)(?:\.(\d+))?(?:\s?(?:{post})(?![A-Za-z]))?", re.IGNORECASE
    )
    money = re.compile(r"\s?" + alternation(after), re.IGNORECASE)
    return number, money


def _compiled(lang: Language) -> tuple[re.Pattern[str], re.Pattern[str]]:
    lx = lang.lex
    return _patterns(tuple(lx.currency_before), tuple(lx.currency_after), tuple(lx.thousand_suffixes))


def number_pattern(lang: Language) -> re.Pattern[str]:
    """An optionally currency-marked number: group 1 the integer part, group 2 the decimals."""
    return _compiled(lang)[0]


def money_after(lang: Language) -> re.Pattern[str]:
    """A currency word right after a number ("元", "dollars"): the number is an amount."""
    return _compiled(lang)[1]


def currency_before_pattern(lang: Language) -> str:
    return alternation(lang.lex.currency_before, boundary=False)


def normalise_number(lang: Language, surface: str) -> float | None:
    """'¥1,299.50' → 1299.5; '2k' → 2000; None if it holds no number."""
    m = number_pattern(lang).search(surface)
    if not m:
        return None
    value = float(m.group(1).replace(",", "") + ("." + m.group(2) if m.group(2) else ""))
    tail = m.group(0).strip().lower()
    if any(tail.endswith(s) for s in lang.lex.thousand_suffixes):
        value *= 1000
    return value


@lru_cache(maxsize=16)
def _word_pattern(words: tuple[str, ...], scales: tuple[str, ...], joiners: tuple[str, ...] = ()) -> re.Pattern[str]:
    latin = sorted((w for w in words if w.isascii() and len(w) > 1), key=len, reverse=True)
    han = sorted({ch for w in [*words, *scales] if not w.isascii() for ch in w})
    parts = []
    if latin:
        unit = "|".join(re.escape(w) for w in latin)
        scale = "|".join(re.escape(w) for w in scales if w.isascii())
        # a joiner continues the number only after a scale and before a number word ("five
        # hundred and thirty"); "one and two" stays two numbers
        join = "|".join(re.escape(w) for w in joiners if w.isascii())
        joined = rf"(?:\s+(?:{join})(?=\s+(?:{unit})\b))?" if join else ""
        tail = rf"(?:[\s-]+(?:{unit})|[\s-]+(?:{scale}){joined})*" if scale else rf"(?:[\s-]+(?:{unit}))*"
        parts.append(rf"\b(?:{unit}){tail}\b")
    if han:
        parts.append("[" + "".join(re.escape(c) for c in han) + "]+")
    return re.compile("|".join(parts) or "(?!)", re.IGNORECASE)


def word_number(lang: Language, surface: str) -> int | None:
    """The value of a number written in words ("twenty one" → 21, "三百五十" → 350)."""
    lx = lang.lex
    words = {k.lower(): v for k, v in lx.number_words.items()}
    scales = {k.lower(): v for k, v in lx.scale_words.items()}
    s = surface.strip().lower()
    if not s:
        return None
    if all(not ch.isascii() for ch in s if not ch.isspace()):
        return _han_number(s, words, scales)
    total, current = 0, 0
    seen = False
    joiners = {w.lower() for w in lx.scale_joiners}
    for part in re.split(r"[\s-]+", s):
        if part in joiners and seen:
            continue
        if part in words:
            current += words[part]
            seen = True
        elif part in scales:
            current = max(current, 1) * scales[part]
            if scales[part] >= 1000:
                total, current = total + current, 0
            seen = True
        else:
            return None
    return total + current if seen else None


def _han_number(s: str, digits: dict[str, int], scales: dict[str, int]) -> int | None:
    total, section, digit = 0, 0, None
    for ch in s:
        if ch in scales:
            unit = scales[ch]
            if unit >= 10_000:
                section = (section + (digit or 0)) * unit
                total, section, digit = total + section, 0, None
            else:
                section += (1 if digit is None else digit) * unit
                digit = None
        elif ch in digits:
            if digits[ch] >= 10:  # 十 written as a digit word
                section += (1 if digit is None else digit) * digits[ch]
                digit = None
            else:
                digit = digits[ch]
        else:
            return None
    return total + section + (digit or 0)


def range_value(low: float, high: float | None, op: str | None = None) -> str:
    """A range or a bound as the text a number attribute stores: "100-150", ">=4.5", "<200"."""

    def fmt(x: float) -> str:
        return f"{x:g}"

    if high is not None:
        return f"{fmt(low)}-{fmt(high)}"
    return f"{op}{fmt(low)}"


def find_numbers(lang: Language, text: str) -> list[NumberSpan]:
    """Every number in ``text`` — digits or words, amounts, ranges and bounds — widest first
    where they overlap (a range "100-150元" wins over its ends)."""
    lx = lang.lex
    out: list[NumberSpan] = []
    for m in number_pattern(lang).finditer(text):
        value = normalise_number(lang, m.group(0))
        if value is None:
            continue
        surface = m.group(0).strip()
        start = m.start() + (len(m.group(0)) - len(m.group(0).lstrip()))
        low = surface.lower()
        money = low.startswith(tuple(k.lower() for k in lx.currency_before)) or low.endswith(
            tuple(k.lower() for k in lx.currency_after)
        )
        out.append(NumberSpan(start, start + len(surface), surface, value, money, False))
    for m in _word_pattern(tuple(lx.number_words), tuple(lx.scale_words), lx.scale_joiners).finditer(text):
        value = word_number(lang, m.group(0))
        if value is None or m.group(0).lower() in ("a", "an"):
            continue
        money = bool(money_after(lang).match(text, m.end()))
        end = m.end() + (money_after(lang).match(text, m.end()).end() - m.end() if money else 0)  # type: ignore[union-attr]
        out.append(NumberSpan(m.start(), end, text[m.start() : end], float(value), money, True))
    out.sort(key=lambda n: n.start)
    return _with_ranges(lang, text, out)


def _with_ranges(lang: Language, text: str, nums: list[NumberSpan]) -> list[NumberSpan]:
    lx = lang.lex
    joiners = alternation(lx.range_joiners, boundary=True)
    greater_before = alternation(lx.greater, boundary=True)
    less_before = alternation(lx.less, boundary=True)
    greater_after = alternation(lx.greater_after, boundary=False)
    less_after = alternation(lx.less_after, boundary=False)
    units = alternation([*lx.unit_after, *lx.currency_after], boundary=False)
    ranges: list[NumberSpan] = []
    used: set[int] = set()
    for i, a in enumerate(nums):
        low_value = a.value
        if not isinstance(low_value, float):
            continue
        # "100-150元", "3小时 - 4小时", "between 50 and 100", "50到100"
        high = nums[i + 1].value if i + 1 < len(nums) else None
        if isinstance(high, float):
            b = nums[i + 1]
            gap = text[a.end : b.start]
            unit_low = re.match(rf"\s*({units})", gap, re.I)
            gap_core = gap[unit_low.end() :] if unit_low else gap
            unit_high = re.match(rf"\s?({units})", text[b.end :], re.I)
            # ends in different units are in order whatever their numbers ("12小时-3天", kept as
            # written: "12-3" would read as a number range); both ends with their unit may be equal
            # (CrossWOZ writes "0.3小时 - 0.3小时")
            low_unit = unit_low.group(1) if unit_low else None
            high_unit = unit_high.group(1) if unit_high else None
            both = bool(low_unit and high_unit)
            mixed = both and low_unit != high_unit
            ordered = high > low_value or (high == low_value and both)
            if re.fullmatch(rf"\s*{joiners}\s*", gap_core, re.I) and (ordered or mixed):
                start = a.start
                pre = text[max(0, a.start - 12) : a.start].lower()
                between = re.search(r"\bbetween\s*$", pre)
                if between:
                    start = a.start - (len(pre) - between.start())
                end = b.end + (unit_high.end() if unit_high else 0)
                value = text[start:end] if mixed else range_value(low_value, high)
                ranges.append(NumberSpan(start, end, text[start:end], value, a.money or b.money, False))
                used |= {i, i + 1}
                continue
        # bounds: "4.5分以上" (after) or "over 1000" (before)
        after = re.match(rf"\s?(?:{units})?\s?({greater_after}|{less_after})", text[a.end :], re.I)
        if after:
            op = ">=" if re.fullmatch(greater_after, after.group(1), re.I) else "<="
            end = a.end + after.end()
            ranges.append(
                NumberSpan(a.start, end, text[a.start : end], range_value(low_value, None, op), a.money, False)
            )
            used.add(i)
            continue
        before = re.search(
            rf"(?:({greater_before})|({less_before}))\s*[^\w\s]?\s*$", text[max(0, a.start - 20) : a.start], re.I
        )
        if before:
            op = ">" if before.group(1) else "<"
            start = a.start - (min(20, a.start) - before.start())
            ranges.append(
                NumberSpan(start, a.end, text[start : a.end], range_value(low_value, None, op), a.money, False)
            )
    return sorted([*ranges, *nums], key=lambda n: (n.start, -(n.end - n.start)))


def said_in_unit(text: str, end: int, units: tuple[str, ...], small_words: frozenset[str]) -> bool:
    """Whether the number ending at ``end`` of ``text`` is said in one of ``units`` (lower case):
    the word after it is one ("18 *years* old", "三*岁*"), or no word of its own follows ("She's
    63 now", "今年三岁。"). "20 minutes" is said in no unit of an age."""
    right = text[end:].lstrip(" -")
    if not right:
        return True
    if has_cjk(right[0]):
        return right.startswith(units) or right[0] in small_words
    words = re.findall(r"[\w'’]+", right)
    return not words or words[0].lower() in units or words[0].lower() in small_words
