"""Candidate spans: every piece of a message that could be an attribute's value, typed.

Typed spans come from the language packs' readers — numbers and number words, amounts, ranges
and bounds, dates, clock times — and from shapes — codes, phone numbers, e-mail addresses,
street addresses. Text spans come from phrase structure: runs of content words (capitalised
runs such as "New York" or "Sacramento, CA" marked as names), the words after a preposition
("starring quentin kenihan"), quoted text, and for CJK the pieces between function
words ("从北京京仪大酒店到聚宝源(牛街总店)" → "北京京仪大酒店", "聚宝源(牛街总店)").

Each span carries what later evidence needs: its kind, its normalised value, the cue word before
it and the role that cue gives it (origin "from"/"从", destination "to"/"到"), and a
window of words around it. Nothing here knows the schema; which spans an attribute may take is
decided by the attribute's kind (``evidence.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import datetime
from functools import lru_cache

from ..lang import Language, alternation, has_cjk
from ..lang.dates import find_dates
from ..lang.numbers import find_numbers
from ..lang.segment import Token, cjk_pieces, cjk_words, inside_word, tokens
from ..lang.speakers import opening
from ..lang.times import find_times

__all__ = ["Span", "find_spans", "MAX_TEXT_WORDS"]

MAX_TEXT_WORDS = 5  # longest text span (in latin words) worth offering
_CODE = re.compile(
    r"(?<![A-Za-z0-9,.])(?:[A-Za-z]{1,4}(?:-[A-Za-z]{1,3})?[-_]?\d[\dA-Za-z-]{0,19}|\d{3,}[A-Za-z-]?[\dA-Za-z-]{0,16})"
    r"(?![A-Za-z0-9]|[,.]\d)"
)
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_PHONE = re.compile(r"(?<!\d)\+?\d[\d -]{6,16}\d(?!\d)")
_QUOTED = re.compile(r"[\"“«「『《]([^\"”»」』》]{2,80})[\"”»」』》]")
_SEPARATOR = re.compile(r"[，。？！、；：,.?!;:\s]+")


@dataclass(frozen=True)
class Span:
    start: int
    end: int
    text: str
    kind: str  # number | range | date | time | code | phone | email | address | text
    value: str | float | None  # normalised (numbers, ISO dates, HH:MM, range text); text: the span
    money: bool = False
    written: bool = False  # a number spelled out in words
    capital: bool = False  # a capitalised run (proper-noun shape)
    quoted: bool = False
    cue: str = ""  # the preposition / cue word right before it
    role: str = ""  # origin | destination | "" (from the cue)
    left: str = ""  # a few words before it (evidence window)
    right: str = ""  # a few words after it
    cut: bool = False  # a CJK piece cut inside a word ("红烧肉做" → "红烧肉", "蚂蚁搬家" → "蚁搬家")
    verbal: bool = False  # a CJK piece whose last word is a verb, adverb or particle ("碗碟装")

    @property
    def words(self) -> int:
        return len(self.text.split()) if not has_cjk(self.text) else max(1, len(self.text) // 2)


@lru_cache(maxsize=16)
def _cue_words(
    codes: tuple[str, ...],
    origin: tuple[str, ...],
    dest: tuple[str, ...],
    preps: tuple[str, ...],
) -> dict[str, str]:
    roles: dict[str, str] = {w.lower(): "" for w in preps}
    roles.update({w.lower(): "destination" for w in dest})
    roles.update({w.lower(): "origin" for w in origin})
    return roles


def _roles(lang: Language) -> dict[str, str]:
    lx = lang.lex
    return _cue_words(lang.codes, tuple(lx.origin_cues), tuple(lx.destination_cues), tuple(lx.prepositions))


def cue_before(lang: Language, text: str, start: int) -> tuple[str, str]:
    """The cue word (or two-word cue) that ends right before ``start``, and its role; a cue before
    up to two of the pack's noun openers ("to *their* account") gives its role but is no cue."""
    roles = _roles(lang)
    before = text[max(0, start - 40) : start]
    low = before.lower().rstrip()
    openers = {w.lower() for w in lang.lex.noun_openers}
    for skipped in range(3):  # the cue, or the cue before up to two openers ("to *their* account")
        words = re.findall(r"[\w'’-]+", low)
        for n in (3, 2, 1):
            if len(words) >= n:
                cand = " ".join(words[-n:])
                if cand in roles and low.endswith(cand):
                    # through openers only the role counts: "with *a* dented lid" is no
                    # value after a preposition
                    return (cand, roles[cand]) if not skipped else ("", roles[cand])
        if not words or words[-1] not in openers or not low.endswith(words[-1]):
            break
        low = low[: -len(words[-1])].rstrip()
    # CJK cues stand right before the value, no space: "从北京", "到聚宝源"
    for cue in sorted((c for c in roles if has_cjk(c)), key=len, reverse=True):
        if low.endswith(cue):
            return cue, roles[cue]
    return "", ""


def taught_cue(lang: Language, text: str, start: int) -> str:
    """The word a value stands after, past the pack's noun openers ("to *the* savings account"
    → "to"), or a role word of the pack up to three words before it ("return on *the 14th*" →
    "return": the bare "on" would carry a departure date's lesson to a return date); in CJK
    text the character before it ("从北京" → "从"); "" at the start."""
    before = text[max(0, start - 40) : start]
    if has_cjk(before[-1:]):
        return before[-1]
    openers = {w.lower() for w in lang.lex.noun_openers}
    roles = _roles(lang)  # a word with a role (origin, destination), not a bare preposition
    words = re.findall(r"[\w'’-]+", before.lower())
    while len(words) > 1 and words[-1] in openers:
        words.pop()
    for i in range(len(words) - 1, max(-1, len(words) - 4), -1):
        if roles.get(words[i]) or (i and roles.get(" ".join(words[i - 1 : i + 1]))):
            return words[i]
    return words[-1] if words else ""


def _window(text: str, start: int, end: int, n: int = 3) -> tuple[str, str]:
    left = re.findall(r"[\w'’-]+|[\u3400-\u9fff]", text[max(0, start - 40) : start])
    right = re.findall(r"[\w'’-]+|[\u3400-\u9fff]", text[end : end + 40])
    cjk = has_cjk(text[max(0, start - 6) : end + 6])
    k = 6 if cjk else n
    return ("" if cjk else " ").join(left[-k:]), ("" if cjk else " ").join(right[:k])


def find_spans(lang: Language, text: str, now: datetime) -> list[Span]:
    """Every candidate span of ``text`` (typed first, then text spans that overlap no typed one)."""
    typed: list[Span] = []

    def make(start: int, end: int, kind: str, value: str | float | None, **kw: object) -> Span:
        cue, role = cue_before(lang, text, start)
        left, right = _window(text, start, end)
        return Span(start, end, text[start:end], kind, value, cue=cue, role=role, left=left, right=right, **kw)  # type: ignore[arg-type]

    for d in find_dates(lang, text, now):
        if d.value is not None:
            typed.append(make(d.start, d.end, "date", d.value))
    for t in find_times(lang, text):
        if not _inside(t.start, t.end, typed):
            typed.append(make(t.start, t.end, "time", t.value))
    for m in _EMAIL.finditer(text):
        typed.append(make(m.start(), m.end(), "email", m.group(0)))
    for m in _PHONE.finditer(text):
        if sum(ch.isdigit() for ch in m.group(0)) >= 7 and not _inside(m.start(), m.end(), typed):
            typed.append(make(m.start(), m.end(), "phone", m.group(0).strip()))
    function_words = [w for w in lang.lex.stopwords if has_cjk(w)]
    for n in find_numbers(lang, text):
        if _inside(n.start, n.end, typed):
            continue
        if n.written and has_cjk(n.surface) and any(text.startswith(w, n.start) for w in function_words):
            continue  # "一家", "一下": a function word, not a number
        kind = "range" if isinstance(n.value, str) else "number"
        typed.append(make(n.start, n.end, kind, n.value, money=n.money, written=n.written))
    before = set(lang.lex.currency_before)
    for m in _CODE.finditer(text):
        s = m.group(0)
        if _inside(m.start(), m.end(), [t for t in typed if t.kind != "number"]):
            continue
        if m.start() and text[m.start() - 1] in before:
            continue
        if s.isdigit() and len(s) < 4 and not re.search(r"[#]\s*$", text[: m.start()]):
            continue  # a short number is a number, not a code
        typed.append(make(m.start(), m.end(), "code", s))
    # the digits of a code are no number the message states ("TR-99" is no 99, "A-4410" no 4410)
    codes = [t for t in typed if t.kind == "code"]
    typed = [
        t
        for t in typed
        if t.kind not in ("number", "range")
        or not _inside(t.start, t.end, [c for c in codes if c.end - c.start > t.end - t.start])
    ]
    typed += _addresses(lang, text, typed, make)
    spans = typed + _text_spans(lang, text, typed, make)
    for m in _QUOTED.finditer(text):
        spans.append(make(m.start(1), m.end(1), "text", m.group(1), quoted=True))
    return [_by_words(lang, text, s) for s in _dedupe(spans)]


def _by_words(lang: Language, text: str, s: Span) -> Span:
    """A CJK text span read against the segmenter's words: cut when an edge falls inside a
    word ("蚁搬家" of 蚂蚁搬家, "钢琴搬" of 搬到), verbal when its last word is tagged a verb,
    adverb or particle ("碗碟装", "小步舞曲先")."""
    if s.kind != "text" or not has_cjk(s.text):
        return s
    cut = s.cut or inside_word(text, s.start) or inside_word(text, s.end)
    last = [tag for a, b, tag in cjk_words(text) if s.start < b <= s.end]
    verbal = bool(last) and last[-1] in lang.lex.verbal_tags
    return replace(s, cut=cut, verbal=verbal) if (cut, verbal) != (s.cut, s.verbal) else s


def _unowned(word: str, possessive: tuple[str, ...]) -> str:
    """``word`` without a possessive ending ("how's" → "how")."""
    for suffix in possessive:
        if word.endswith(suffix) and len(word) > len(suffix):
            return word[: -len(suffix)]
    return word


def _inside(start: int, end: int, spans: list[Span]) -> bool:
    return any(s.start <= start and end <= s.end for s in spans)


def _overlaps(start: int, end: int, spans: list[Span]) -> bool:
    return any(s.start < end and start < s.end for s in spans)


def _dedupe(spans: list[Span]) -> list[Span]:
    seen: set[tuple[int, int, str]] = set()
    out = []
    # a span also found between quotes keeps its mark: the same words, quoted, are a title or a name
    for s in sorted(spans, key=lambda x: (x.start, -(x.end - x.start), not x.quoted)):
        key = (s.start, s.end, s.kind)
        if key not in seen:
            seen.add(key)
            out.append(s)
    return out


def _bridged(
    text: str, pieces: list[Token], suffixes: list[str], inner: frozenset[str], typed: list[Span], make: object
) -> list[Span]:
    """A name with a function word inside ("北京贵都大酒店", "维也纳国际酒店", "颐和园") is cut there
    into pieces: offer the two pieces joined across one of the pack's ``name_inner_words`` when
    the second ends with a name word (or a "(…)" branch) and the first is a short stem that is
    no name itself. Only those words: across 到 or 是 a join makes "老书虫到万寿山", "菜是景观餐厅"."""
    out = []
    for left, right in zip(pieces, pieces[1:]):
        gap = text[left.end : right.start]
        if gap not in inner or len(left.text) > 4 or left.text.endswith(tuple(suffixes)):
            continue
        end = right.end
        paren = re.match(r"\s*[（(][^）)]{1,30}[）)]", text[end:])
        if paren:
            end += paren.end()
        elif not right.text.endswith(tuple(suffixes)):
            continue
        if not _inside(left.start, end, typed):
            out.append(make(left.start, end, "text", text[left.start : end]))  # type: ignore[operator]
    return out


def _addressed(text: str, start: int, end: int, said: int, greetings: frozenset[str]) -> bool:
    """Whether the name at ``start:end`` is said to someone: only greeting words between the
    sentence's start and it, and a sentence or clause end after it ("Hey Nora! Lisbon is
    great" — Nora is addressed, and Lisbon's weather is no fact about her)."""
    after = text[end:].lstrip()
    if after and after[0] not in "!,.?;":
        return False
    opened = max([said, *(text.rfind(p, 0, start) + 1 for p in ".!?")])
    before = re.findall(r"[\w'’]+", text[opened:start].lower())
    own = re.findall(r"[\w'’]+", text[start:end].lower())
    if own and own[0] in greetings and not before:  # "Bye Nora," read as one capitalised run
        before = own[: next((i for i, w in enumerate(own) if w not in greetings), len(own))]
    return bool(before) and all(w in greetings for w in before)  # a bare "New York." is an answer


def _addresses(lang: Language, text: str, typed: list[Span], make: object) -> list[Span]:
    """A house number followed by capitalised words and a street word ("3468 Mount Diablo
    Boulevard", "310 Sutter Street 4th Floor")."""
    suffixes = alternation(lang.lex.address_suffixes, boundary=True)
    # the words after the street word are a unit or floor only when capitalised or numbered
    # ("… Street 4th Floor", "… Drive b200"), case-sensitively: "… Plaza with my friends",
    # "… Avenue ASAP" end at the street word; a full stop after the street word ends the
    # sentence and the address ("1546 Maurice Lane. Just one person")
    rx = re.compile(
        rf"\b\d{{1,6}}\s+(?:[A-Z][\w'.-]*\s+){{0,4}}(?:{suffixes})(?:\.|"
        rf"(?-i:(?:\s+(?:[A-Za-z]?#?\d+\w*|[A-Z][a-z][\w'.-]*|[A-Z]\b)){{0,3}}))",
        re.I,
    )
    out = []
    for m in rx.finditer(text):
        surface = m.group(0).rstrip(" ,.")
        if len(surface.split()) >= 2:
            out.append(make(m.start(), m.start() + len(surface), "address", surface))  # type: ignore[operator]
    return out


def _text_spans(lang: Language, text: str, typed: list[Span], make: object) -> list[Span]:
    lx = lang.lex
    stop = lang.small_words | {w.lower() for w in (*lx.question_openers, *lx.request_verbs)}
    joiners = {w.lower() for w in lx.name_joiners}
    possessive = tuple(w.lower() for w in lx.possessive_suffixes)
    greetings = lang.greeting_words
    inner = frozenset(lx.name_inner_words)
    out: list[Span] = []
    toks = tokens(text)
    said = opening(text)  # a speaker label ends where a sentence starts ("Ben: Amazing!")
    # --- CJK: pieces between function words, a following "(…)" kept with its piece -------
    suffixes = sorted({x for x in lx.name_suffixes if has_cjk(x)}, key=len, reverse=True)
    for k, tok in enumerate(toks):
        if not tok.cjk:
            continue
        pieces = cjk_pieces(lang, tok, text)
        out += _bridged(text, pieces, suffixes, inner, typed, make)
        for piece in pieces:
            start, end = piece.start, piece.end
            paren = re.match(r"\s*[（(][^）)]{1,30}[）)]", text[end:])
            if paren:
                end += paren.end()
            elif piece.end == tok.end and k + 1 < len(toks) and toks[k + 1].start == tok.end and not toks[k + 1].cjk:
                # latin letters glued between CJK ("北京工体A. Hotel酒店"): up to the next function word
                glued = re.match(r"[A-Za-z0-9][A-Za-z0-9 .&'-]{0,30}?(?=[\u3400-\u9fff])", text[end:])
                nxt = next((t for t in toks[k + 1 :] if t.cjk), None)
                if (
                    glued
                    and re.search("[A-Za-z]", glued.group(0))
                    and nxt is not None
                    and nxt.start == end + glued.end()
                ):
                    first = cjk_pieces(lang, nxt, text)
                    if first and first[0].start == nxt.start:
                        end = first[0].end
            lead = re.search(r"[A-Za-z0-9][A-Za-z0-9.&'-]*$", text[max(0, start - 20) : start])
            if lead and piece.start == tok.start:  # "99旅馆连锁": digits or letters glued before it
                start -= len(lead.group(0))
            if end - start < 2 or _inside(start, end, typed):
                continue
            out.append(make(start, end, "text", text[start:end]))  # type: ignore[operator]
            # a verb glued before a name ("去故宫", "据说北京铁矿博物馆"): offer it without one or two
            # leading characters too
            for drop in (1, 2):
                if end - (start + drop) >= 2 and piece.end - piece.start >= drop + 3:
                    out.append(make(start + drop, end, "text", text[start + drop : end]))  # type: ignore[operator]
            # the piece without a verb (adverb, particle) the segmenter finds at either end, cut
            # at the word boundary ("碗碟|装", "致爱丽丝|背下来", "约|蚂蚁搬家")
            for a, b, tag in cjk_words(text):
                if tag not in lang.lex.verbal_tags and tag[:1] != "f":
                    continue
                if start < a < end and a - start >= 2:
                    out.append(make(start, a, "text", text[start:a]))  # type: ignore[operator]
                if start < b < end and end - b >= 2:
                    out.append(make(b, end, "text", text[b:end]))  # type: ignore[operator]
            # names end with a name word ("…饭店"): offer the piece cut after each one
            body = text[start:end]
            for suffix in suffixes:
                for m in re.finditer(re.escape(suffix), body):
                    cut = m.end()
                    head = body[:cut]
                    balanced = head.count("(") + head.count("（") == head.count(")") + head.count("）")
                    if 3 <= cut < len(body) and balanced and not body[cut:].startswith(("(", "（")):
                        out.append(make(start, start + cut, "text", body[:cut]))  # type: ignore[operator]
            # and a verb or a result glued after one ("红烧肉做了", "酱油用完了"): offered without one
            # or two last characters, marked, so the fitted scorer weighs the cut
            for drop in (1, 2):
                if end == piece.end and end - drop - start >= 2:
                    out.append(make(start, end - drop, "text", text[start : end - drop], cut=True))  # type: ignore[operator]
    # --- latin: runs of content words, capitalised runs as names --------------------------
    words = [t for t in toks if not t.cjk]
    runs: list[list[Token]] = []
    current: list[Token] = []
    for i, t in enumerate(words):
        # "how's", "where's": a function word with its "'s" is one too
        ok = (
            t.word
            and t.low not in stop
            and _unowned(t.low, possessive) not in stop
            and not _overlaps(t.start, t.end, typed)
        )
        joiner = (
            current
            and t.low in joiners
            and current[-1].text[:1].isupper()
            and i + 1 < len(words)
            and words[i + 1].text[:1].isupper()
        )
        # a capitalised function word inside a name ("Aria Dining & Banquets Fine Indian Cuisine")
        inner_capital = (
            current
            and t.word
            and len(t.text) > 1
            and t.text[:1].isupper()
            and current[-1].text[:1].isupper()
            and i + 1 < len(words)
            and words[i + 1].text[:1].isupper()
            and not _overlaps(t.start, t.end, typed)
        )
        comma_region = (
            current
            and t.text == ","
            and current[-1].text[:1].isupper()
            and i + 1 < len(words)
            and words[i + 1].text[:1].isupper()
            and len(words[i + 1].text) <= 12
        )
        if ok or joiner or inner_capital or comma_region:
            if current and text[current[-1].end : t.start].strip() not in ("", ",") and not comma_region:
                runs.append(current)
                current = []
            current.append(t)
        else:
            if current:
                runs.append(current)
            current = []
    if current:
        runs.append(current)
    for run in runs:
        while run and not run[-1].word:
            run.pop()
        content = [t for t in run if t.word]
        if not content:
            continue
        n = len(run)
        for i in range(n):
            if not run[i].word or run[i].low in joiners or run[i].low in stop:
                continue
            for j in range(i, min(n, i + MAX_TEXT_WORDS + 2)):
                if not run[j].word or run[j].low in joiners or run[j].low in stop:
                    continue
                chunk = run[i : j + 1]
                if sum(1 for t in chunk if t.word) > MAX_TEXT_WORDS:
                    break
                start, end = chunk[0].start, chunk[-1].end
                # an owner's name ends before its possessive when the thing owned follows
                # ("Ellie's sunflowers": Ellie); a name that is a possessive stays ("Denny's")
                if j + 1 < n and run[j + 1].word:
                    end -= len(next((x for x in possessive if text[start:end].lower().endswith(x)), ""))
                surface = text[start:end]
                if not any(ch.isalpha() for ch in surface):
                    continue
                opens = start in (0, said) or text[:start].rstrip().endswith((".", "!", "?"))
                capital = (
                    (
                        all(t.text[:1].isupper() or not t.word or t.low in joiners for t in chunk)
                        and not opens
                        # "New York" opening a sentence is a name; "Lent Azul" is a verb and a name
                        or (
                            all(t.text[:1].isupper() for t in chunk if t.word)
                            and len(chunk) > 1
                            and not (opens and lang.verb_form(chunk[0].text))
                        )
                    )
                    and not _addressed(text, start, end, said, greetings)
                )
                out.append(make(start, end, "text", surface, capital=bool(capital)))  # type: ignore[operator]
                # a name with its number is a model or an edition ("Pegasus 41", "Harbour 10K"):
                # offered with the number too, which alone is a typed value
                numbered = re.match(r" (\d[\dA-Za-z]*)(?![\w.,:/\-]*\d)", text[end:]) if capital else None
                numbered_end = end + numbered.end() if numbered else end
                if (
                    numbered
                    and (j + 1 == n or run[j + 1].start >= numbered_end)
                    # a number, not a time, date or amount ("Nopa 7pm")
                    and not _overlaps(end + 1, numbered_end, [x for x in typed if x.kind != "number" or x.money])
                ):
                    out.append(make(start, numbered_end, "text", text[start:numbered_end], capital=True))  # type: ignore[operator]
                # a possessive with nothing owned after it is a place or a name ("at Tom's": Tom's
                # home, "Denny's"): the owner is offered too
                cut = len(surface) - len(_unowned(surface.lower(), possessive))
                if cut and len(surface) - cut > 1:
                    out.append(make(start, end - cut, "text", surface[:-cut], capital=bool(capital)))  # type: ignore[operator]
    return out
