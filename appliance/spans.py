"""Candidate values found in the source text, and deterministic normalisers.

Grounding: an extracted id, number, date or contact must be one of these candidates, so a
model can pick a value but never invent one. Relative dates (昨天 / yesterday) and amounts
(¥1,299 / 1299元) are normalised here, relative to the message time, not by the model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from .schema import Attribute

__all__ = [
    "Candidate",
    "find_candidates",
    "candidates_for",
    "value_role",
    "normalise_number",
    "find_word",
    "is_question",
]

# Comparison words before a number ("over 1000", "超过1000"): they fix a filter's operator.
GREATER = r"over|above|more than|greater than|at least|超过|大于|高于|以上"
LESS = r"under|below|less than|cheaper than|at most|低于|小于|少于|以下"


def find_word(low: str, word: str) -> int:
    """Position of ``word`` in lower-cased ``low`` (-1: absent); ASCII words must start at a
    word boundary ("paid" is not found in "unpaid"), CJK words match anywhere."""
    if word.isascii():
        m = re.search(rf"(?<![a-z]){re.escape(word)}", low)
        return m.start() if m else -1
    return low.find(word)


_QUESTION = re.compile(
    r"[?？吗]|^(?:where|when|what|how|why|which|who|is|are|was|has|have|can|could|did|does|do|will|any)\b"
    r"|请问|什么|哪|几点|多少|怎么|是不是|有没有|查",
    re.I,
)


def is_question(text: str) -> bool:
    """Whether the message asks something: a question mark, an opening wh-/auxiliary word,
    or a Chinese interrogative ("吗", "请问", "哪", "怎么", "帮我查")."""
    return bool(_QUESTION.search(text.strip()))


@dataclass(frozen=True)
class Candidate:
    value: str | float  # the normalised value stored
    surface: str  # the exact text span it came from
    role: str  # code | number | date | contact


_CODE = re.compile(
    r"(?<![A-Za-z0-9,.])(?:[A-Za-z]{1,4}[-_]?\d[\dA-Za-z-]{0,19}|\d{3,}[A-Za-z-]?[\dA-Za-z-]{0,16})(?![A-Za-z0-9]|[,.]\d)"
)
_NUMBER = re.compile(
    r"(?:[¥$€£]|RMB|CNY|USD)?\s?(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?\s?(?:元|块|美元|dollars?|yuan|rmb|usd|k)?",
    re.IGNORECASE,
)
_MONEY_AFTER = re.compile(r"\s?(?:元|块|美元|dollars?\b|yuan\b|rmb\b|usd\b)", re.I)

_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_PHONE = re.compile(r"(?<!\d)\+?\d[\d -]{6,16}\d(?!\d)")
_ISO = re.compile(r"(\d{4})[-/.年](\d{1,2})[-/.月](\d{1,2})日?")
_MD_ZH = re.compile(r"(\d{1,2})月(\d{1,2})[日号]")
_MONTHS = "jan feb mar apr may jun jul aug sep oct nov dec".split()
_MD_EN = re.compile(r"\b(" + "|".join(_MONTHS) + r")[a-z]*\.?\s+(\d{1,2})(?:st|nd|rd|th)?\b", re.I)
_DM_EN = re.compile(r"\b(\d{1,2})(?:st|nd|rd|th)?\s+(" + "|".join(_MONTHS) + r")[a-z]*\b", re.I)
_RELATIVE = {
    "前天": -2,
    "昨天": -1,
    "昨日": -1,
    "今天": 0,
    "今日": 0,
    "明天": 1,
    "后天": 2,
    "day before yesterday": -2,
    "yesterday": -1,
    "today": 0,
    "tonight": 0,
    "tomorrow": 1,
    "day after tomorrow": 2,
}
_AGO = re.compile(r"\b(\d{1,2}|a|one|two|three) (day|week)s? ago\b|(\d{1,2})\s?(天|周)前", re.I)
_WORDNUM = {"a": 1, "one": 1, "two": 2, "three": 3}


def normalise_number(surface: str) -> float | None:
    """'¥1,299.50' → 1299.5; '2k' → 2000; None if it holds no number."""
    m = _NUMBER.search(surface)
    if not m:
        return None
    value = float(m.group(1).replace(",", "") + ("." + m.group(2) if m.group(2) else ""))
    if m.group(0).strip().lower().endswith("k"):
        value *= 1000
    return value


def _dates(text: str, now: datetime) -> list[Candidate]:
    out: list[Candidate] = []
    today = now.date()
    low = text.lower()
    for phrase, delta in sorted(_RELATIVE.items(), key=lambda kv: -len(kv[0])):
        pos = low.find(phrase)
        if pos >= 0 and not any(phrase in c.surface.lower() for c in out):
            out.append(Candidate((today + timedelta(days=delta)).isoformat(), text[pos : pos + len(phrase)], "date"))
    for m in _AGO.finditer(text):
        n = m.group(1) or m.group(3)
        unit = (m.group(2) or m.group(4) or "").lower()
        k = _WORDNUM.get(n.lower(), None) if not n.isdigit() else int(n)
        if k is not None:
            days = k * (7 if unit in ("week", "周") else 1)
            out.append(Candidate((today - timedelta(days=days)).isoformat(), m.group(0), "date"))
    for m in _ISO.finditer(text):
        d = _safe_date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
        if d:
            out.append(Candidate(d.isoformat(), m.group(0), "date"))
    for m in _MD_ZH.finditer(text):
        d = _safe_date(today.year, int(m.group(1)), int(m.group(2)))
        if d:
            out.append(Candidate(d.isoformat(), m.group(0), "date"))
    for m in list(_MD_EN.finditer(text)) + list(_DM_EN.finditer(text)):
        mon, day = (m.group(1), m.group(2)) if m.re is _MD_EN else (m.group(2), m.group(1))
        d = _safe_date(today.year, _MONTHS.index(mon[:3].lower()) + 1, int(day))
        if d:
            out.append(Candidate(d.isoformat(), m.group(0), "date"))
    return out


def _safe_date(y: int, m: int, d: int) -> date | None:
    try:
        return date(y, m, d)
    except ValueError:
        return None


def find_candidates(text: str, now: datetime) -> list[Candidate]:
    """Every id-like code, number, date and contact in ``text`` (deduplicated, in order);
    ids the text rules out ("not 12345, I meant …") are left out."""
    out: list[Candidate] = []
    ruled_out = negated_values(text)
    dates = _dates(text, now)
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
    for m in _CODE.finditer(text):
        s = m.group(0)
        if any(s in span for span in taken):
            continue
        if _MONEY_AFTER.match(text, m.end()) or (m.start() and text[m.start() - 1] in "¥$€£"):
            continue  # an amount, not an id
        if any(ch.isalpha() for ch in s):
            lettered.append(m.span())
        if s not in ruled_out:
            out.append(Candidate(s, s, "code"))
    for m in _NUMBER.finditer(text):
        s = m.group(0).strip()
        inside = any(a <= m.start(1) < b for a, b in lettered)
        if inside or any(m.group(1) in span for span in taken):
            continue
        v = normalise_number(s)
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


_ID_NAME = re.compile(r"(^|_)(id|no|number|code)$")


def value_role(attr: Attribute, is_id: bool = False) -> str:
    """Which kind of candidate an attribute takes: code, number, date, contact or text."""
    name = attr.name.lower()
    if is_id or attr.kind == "ref" or _ID_NAME.search(name):
        return "code"
    if attr.kind == "number" or any(k in name for k in ("amount", "price", "budget", "total", "cost")):
        return "number"
    if attr.kind == "date" or any(k in name for k in ("date", "time")):
        return "date"
    if any(k in name for k in ("contact", "phone", "email", "mobile")):
        return "contact"
    return "text"


def candidates_for(role: str, candidates: list[Candidate]) -> list[Candidate]:
    """The candidates an attribute of ``role`` may take (codes also accept bare numbers)."""
    if role == "code":
        return [c for c in candidates if c.role == "code"]
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


def _grams(text: str) -> set[str]:
    t = re.sub(r"\s+", " ", text.lower())
    words = set(re.findall(r"[a-z]{3,}", t))
    cjk = re.sub(r"[^\u4e00-\u9fff]", "", t)
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


_NEGATED = re.compile(
    r"(?:\bnot\b|\bisn't\b|\bwasn't\b|不是|并非)\s*(?:order|ticket|booking|trip|订单|工单|预订|行程)?\s*(?:#|号)?\s*"
    r"([A-Za-z]{0,4}[-_]?\d[\dA-Za-z-]*)",
    re.I,
)


def negated_values(text: str) -> set[str]:
    """Ids the message explicitly rules out: "not 12345, I meant 12354" → {"12345"}."""
    return {m.group(1) for m in _NEGATED.finditer(text)}
