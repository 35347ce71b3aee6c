"""Candidate values found in the source text, normalised deterministically.

Grounding: an extracted id, number, date or contact must be one of these candidates, so a model
can pick a value but never invent one. Relative dates (昨天 / yesterday) and amounts (¥1,299 /
1299元) are normalised here, relative to the message time, with the words of the schema's
language packs. Which candidates an attribute may take is decided by its declared kind
(``value_role``), never by its name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from ..domain.schema import Attribute
from ..lang import Language
from ..lang.dates import find_dates
from ..lang.numbers import money_after, normalise_number, number_pattern
from ..lang.segment import stem

__all__ = [
    "Candidate",
    "find_candidates",
    "candidates_for",
    "value_role",
    "tag_codes",
    "lexical_similarity",
]


@dataclass(frozen=True)
class Candidate:
    value: str | float  # the normalised value stored
    surface: str  # the exact text span it came from
    role: str  # code | number | date | contact


_CODE = re.compile(
    r"(?<![A-Za-z0-9,.])(?:[A-Za-z]{1,4}[-_]?\d[\dA-Za-z-]{0,19}|\d{3,}[A-Za-z-]?[\dA-Za-z-]{0,16})(?![A-Za-z0-9]|[,.]\d)"
)
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_PHONE = re.compile(r"(?<!\d)\+?\d[\d -]{6,16}\d(?!\d)")


def find_candidates(lang: Language, text: str, now: datetime, nouns: tuple[str, ...] = ()) -> list[Candidate]:
    """Every id-like code, number, date and contact in ``text`` (deduplicated, in order);
    ids the text rules out ("not 12345, I meant …", ``nouns`` naming the schema's entities)
    are left out."""
    out: list[Candidate] = []
    ruled_out = lang.ruled_out(text, nouns)
    dates = [Candidate(d.value, d.surface, "date") for d in find_dates(lang, text, now) if d.value is not None]
    date_spans = [d.surface for d in dates]
    contacts = [Candidate(m.group(0), m.group(0), "contact") for m in _EMAIL.finditer(text)]
    contacts += [
        Candidate(m.group(0).strip(), m.group(0).strip(), "contact")
        for m in _PHONE.finditer(text)
        if sum(ch.isdigit() for ch in m.group(0)) >= 7 and not any(m.group(0).strip() in span for span in date_spans)
    ]
    contact_spans = [c.surface for c in contacts]
    taken = date_spans + contact_spans
    lettered: list[tuple[int, int]] = []
    after = money_after(lang)
    before = set(lang.lex.currency_before)
    for m in _CODE.finditer(text):
        s = m.group(0)
        if any(s in span for span in taken):
            continue
        if after.match(text, m.end()) or (m.start() and text[m.start() - 1] in before):
            continue  # an amount, not an id
        if any(ch.isalpha() for ch in s):
            lettered.append(m.span())
        if s not in ruled_out:
            out.append(Candidate(s, s, "code"))
    for m in number_pattern(lang).finditer(text):
        s = m.group(0).strip()
        inside = any(a <= m.start(1) < b for a, b in lettered)
        if inside or any(m.group(1) in span for span in taken):
            continue
        v = normalise_number(lang, s)
        if v is not None and m.group(1) not in ruled_out:
            out.append(Candidate(v, s, "number"))
    out += dates + contacts
    seen: set[tuple[str, str]] = set()
    unique = []
    for c in out:
        key = (c.role, str(c.value))
        if key not in seen:
            seen.add(key)
            unique.append(c)
    return unique


def value_role(attr: Attribute, is_id: bool = False) -> str:
    """Which kind of candidate an attribute takes — code, number, date, contact or text —
    from its declared kind and format alone."""
    if is_id or attr.kind == "ref" or attr.format == "code":
        return "code"
    if attr.kind == "number":
        return "number"
    if attr.kind in ("date", "datetime"):
        return "date"
    if attr.format in ("contact", "phone", "email"):
        return "contact"
    return "text"


def candidates_for(role: str, candidates: list[Candidate]) -> list[Candidate]:
    """The candidates an attribute of ``role`` may take."""
    return [c for c in candidates if c.role == role]


def tag_codes(
    text: str,
    codes: list[Candidate],
    keywords: dict[str, tuple[str, ...]],
    patterns: dict[str, re.Pattern[str]] | None = None,
) -> dict[str, str]:
    """Map each code to the entity whose keyword stands closest before it ("order 12345",
    "订单尾号4567"), within a few characters; else to the one entity whose declared id shape
    it has (``patterns``: "BK-44" → Booking); codes neither places are absent from the result."""
    low = text.lower()
    tags: dict[str, str] = {}
    for c in codes:
        pos = low.find(c.surface.lower())
        if pos < 0:
            continue
        window = low[max(0, pos - 14) : pos]
        best: tuple[int, str] | None = None
        for entity, words in keywords.items():
            for w in words:
                at = window.rfind(w)
                if at >= 0 and (best is None or at + len(w) > best[0]):
                    best = (at + len(w), entity)
        if best is not None:
            tags[str(c.value)] = best[1]
            continue
        shaped = [name for name, rx in (patterns or {}).items() if rx.fullmatch(str(c.value))]
        if len(shaped) == 1:
            tags[str(c.value)] = shaped[0]
    return tags


_WORD = re.compile(r"[a-z]{3,}")
_CJK = re.compile(r"[^\u4e00-\u9fff]")


def _grams(text: str) -> set[str]:
    t = re.sub(r"\s+", " ", text.lower())
    words = {stem(w) for w in _WORD.findall(t)}
    cjk = _CJK.sub("", t)
    return words | {cjk[i : i + 2] for i in range(len(cjk) - 1)} | set(cjk)


def lexical_similarity(text: str, references: list[str]) -> float:
    """Best overlap (containment of reference words / CJK bigrams) between text and references."""
    mine = _grams(text)
    best = 0.0
    for ref in references:
        theirs = _grams(ref)
        if theirs:
            best = max(best, len(mine & theirs) / len(theirs))
    return best
