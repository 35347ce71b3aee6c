"""Numbers and amounts in text: "¥1,299.50" → 1299.5, "2k" → 2000, with the pack's currencies."""

from __future__ import annotations

import re
from functools import lru_cache

from .language import Language, alternation

__all__ = ["number_pattern", "normalise_number", "money_after", "currency_before_pattern"]


@lru_cache(maxsize=16)
def _patterns(
    codes: tuple[str, ...], before: tuple[str, ...], after: tuple[str, ...]
) -> tuple[re.Pattern[str], re.Pattern[str]]:
    pre = alternation(before, boundary=False)
    post = alternation(after, boundary=False)
    number = re.compile(rf"(?:{pre})?\s?(\d{{1,3}}(?:,\d{{3}})+|\d+)(?:\.(\d+))?\s?(?:{post})?", re.IGNORECASE)
    money = re.compile(r"\s?" + alternation([w for w in after if w not in _suffixes_only(codes)]), re.IGNORECASE)
    return number, money


def _suffixes_only(codes: tuple[str, ...]) -> tuple[str, ...]:
    from . import PACKS

    return tuple(s for c in codes for s in PACKS[c].thousand_suffixes)


def _compiled(lang: Language) -> tuple[re.Pattern[str], re.Pattern[str]]:
    lx = lang.lex
    return _patterns(
        lang.codes,
        tuple(lx.currency_before),
        tuple([*lx.currency_after, *lx.thousand_suffixes]),
    )


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
