"""What a question says, for any schema: its keys, its time range, what it asks for.

* **keys** — names, codes and quoted values it mentions ("Priya", "order 12345", "BK-7"):
  capitalised runs and codes in latin text, quoted text, CJK pieces shaped like names
  ("北京饭店"). A key that matches nothing stored means the question is about something the
  memory does not hold.
* **pieces** — the other CJK pieces between function words ("梅梅", "生日"): matched against
  stored entities like keys, but an unmatched piece is an ordinary word, not a missing name.
* **range** — the days a time expression covers, relative to when the question is asked ("last
  week", "in May 2023", "上个月", "昨天", "on May 17"): recall keeps memories about those days.
* **attributes** — the attributes of the schema it asks about, from the schema's own words
  (attribute names, descriptions, aliases): "birthday" → Person.birthday, "电话" → contact.
* **residual** — its content words that are neither keys nor schema words ("dog" in "What is my
  dog's name?"; for CJK, the pieces ending at one place joined by "|", any of which may be the
  word): when one of them occurs in no memory, the question asks about something else.
* **possessions** — (owner, owned) term pairs of possessives ("Barry's wife" → barry, wife;
  "my dog's name" → dog, none when the owned word is the schema's): the question is about the
  owner, and about the owned thing as the owner's.
* **links** — CJK "X的Y" piece pairs ("我弟弟的女朋友" → 弟弟, 女朋友): 的 also ends relative
  clauses ("舅舅开的餐馆"), so X and Y are only checked to be told together somewhere.
* **recent** / **when** / **amount** — it asks for recent things ("latest", "最近"), for a time,
  or for an amount ("how much", "多少钱").
* **terms** — its lexical terms (the function memories are indexed with).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import date, datetime

from ..domain.schema import MemorySchema
from ..extract.spans import find_spans
from ..lang import Language, alternation, has_cjk
from ..lang.dates import DateSpan, find_dates
from ..lang.segment import cjk_pieces, index_terms, tokens

__all__ = ["QuestionFacts", "question_facts", "schema_vocabulary"]


@dataclass
class QuestionFacts:
    keys: list[str] = field(default_factory=list)
    codes: list[str] = field(default_factory=list)  # the keys that are codes ("12345", "BK-7"), not names
    pieces: list[str] = field(default_factory=list)
    range: tuple[date, date] | None = None
    attributes: list[tuple[str, str]] = field(default_factory=list)  # (entity type, attribute)
    attribute_terms: list[str] = field(default_factory=list)  # the question's words naming them
    residual: list[str] = field(default_factory=list)
    possessions: list[tuple[str, str | None]] = field(default_factory=list)
    links: list[tuple[str, str]] = field(default_factory=list)  # CJK "X的Y": (X, Y) pieces
    recent: bool = False
    when: bool = False
    amount: bool = False
    terms: list[str] = field(default_factory=list)
    words: dict[str, str] = field(default_factory=dict)  # a Latin term → the question's word for it

    def said(self, reading: str) -> str:
        """How the question said a residual reading ("pens" → "pension"; a CJK reading as is)."""
        last = reading.split("|")[-1]
        return self.words.get(last, last)


def _attribute_terms(schema: MemorySchema) -> list[tuple[str, str, frozenset[str]]]:
    out = []
    for ent in schema.entities:
        for a in ent.attributes:
            words = " ".join(
                [
                    re.sub(r"[_\-]+", " ", a.name),
                    a.description,
                    *a.aliases,
                    *(x for v in a.values for x in (v.value, *v.aliases)),
                ]
            )
            terms = frozenset(index_terms(words))
            if terms:
                out.append((ent.name, a.name, terms))
    return out


def schema_vocabulary(schema: MemorySchema) -> frozenset[str]:
    """Every term of the schema's own words (entity and attribute names, descriptions, aliases,
    enum values): a question's words among them say what it asks, not what it is about."""
    words = [schema.description]
    for e in schema.entities:
        words += [e.name, e.description, *e.aliases]
        for a in e.attributes:
            words += [re.sub(r"[_\-]+", " ", a.name), a.description, *a.aliases]
            words += [x for v in a.values for x in (v.value, *v.aliases)]
    for ev in schema.event_types:
        words += [ev.label]
    return frozenset(index_terms(" ".join(words)))


def question_facts(schema: MemorySchema, question: str, now: datetime) -> QuestionFacts:
    lang = schema.language
    lx = lang.lex
    facts = QuestionFacts(terms=index_terms(question))
    possessive = (
        re.compile(f"(?:{alternation(lx.possessive_suffixes, boundary=False)})$") if lx.possessive_suffixes else None
    )
    for tok in tokens(question):
        if tok.word and not tok.cjk:
            said = possessive.sub("", tok.low) if possessive else tok.low  # "dog's" → "dog"
            for term in index_terms(tok.text):
                facts.words.setdefault(term, said)
    low = question.lower()
    facts.recent = lang.asks_recent(question)
    facts.when = bool(re.search(alternation(lx.when_words, boundary=False), low))
    facts.amount = bool(re.search(alternation(lx.amount_questions, boundary=False), low))
    spans = find_spans(lang, question, now)
    nouns = {w.lower() for w in schema.entity_nouns}
    openers = {w.lower() for w in lx.question_openers}
    keys: list[str] = []
    pieces: list[tuple[str, int]] = []  # (piece, end offset): pieces ending together are readings of one word
    for s in spans:
        if s.kind == "code":
            keys.append(s.text)
        elif s.kind == "text" and has_cjk(s.text):
            if len(s.text) >= 2 and s.text.lower() not in nouns:
                if s.text.endswith(tuple(lx.name_suffixes)) and len(s.text) >= 3:
                    keys.append(s.text)
                else:
                    pieces.append((s.text, s.end))
        elif s.kind == "text" and (s.capital or s.quoted):
            opener = s.text.split()[0].lower() if s.text.split() else ""
            if opener in openers or s.text.lower() in nouns:
                continue
            keys.append(re.sub(r"['’]s$", "", s.text))
    facts.keys = list(dict.fromkeys(k for k in keys if len(k) >= 2))
    facts.codes = [s.text for s in spans if s.kind == "code" and s.text in facts.keys]
    facts.pieces = list(dict.fromkeys(p for p, _ in pieces if p not in facts.keys))
    groups: dict[int, list[str]] = {}
    for p, end in pieces:
        groups.setdefault(end, []).append(p)
    dated: list[DateSpan] = []  # the question's time expressions that cover days
    ranges: list[tuple[date, date]] = []
    for d in find_dates(lang, question, now):
        if d.first is not None and d.last is not None:
            dated.append(d)
            ranges.append((d.first, d.last))
    # the words of a time expression ("on Monday", "上周") limit the days; they are not asked about
    when_terms = {t for d in dated for t in index_terms(question[d.start : d.end])}
    if ranges:
        facts.range = (min(r[0] for r in ranges), max(r[1] for r in ranges))
    asked = set(facts.terms)
    attribute_terms = _attribute_terms(schema)
    # a word shared by many attributes ("when", "什么") says little about which one is asked:
    # each matched word counts 1 / (the number of attributes it names)
    spread = Counter(t for _, _, terms in attribute_terms for t in terms)
    scored = [
        (round(sum(1 / spread[t] for t in asked & terms), 6), etype, attr, terms)
        for etype, attr, terms in attribute_terms
        if asked & terms
    ]
    if scored:
        top = max(s[0] for s in scored)
        facts.attributes = [(e, a) for n, e, a, _ in scored if n == top]
        facts.attribute_terms = sorted({t for n, _, _, terms in scored if n == top for t in asked & terms})
    # the schema's words and the words for the memory itself ask; they are not asked about
    vocab = schema_vocabulary(schema) | frozenset(index_terms(" ".join(lx.memory_words)))
    key_terms = {t for k in facts.keys for t in index_terms(k)}
    if not has_cjk(question):
        facts.residual = [
            t
            for t in facts.terms
            if t not in vocab and t not in key_terms and t not in when_terms and len(t) > 2 and not t.isdigit()
        ]
        facts.possessions = _possessions(lx.possessive_suffixes, question, facts.residual, key_terms)
    else:
        # a one-character word ("车" in "我开什么车") is no span, yet may be what is asked about
        covered = {i for p, end in pieces for i in range(end - len(p), end)}
        for tok in tokens(question):
            if tok.cjk:
                for piece in cjk_pieces(lang, tok):
                    if len(piece.text) == 1 and piece.start not in covered:
                        groups.setdefault(piece.end, []).append(piece.text)
        # one reading per word: the longest piece ending there stands for its shorter readings
        inside = {i for d in dated for i in range(d.start, d.end)}
        facts.residual = [
            "|".join(sorted(g, key=len))
            for end, g in groups.items()
            if not any(set(index_terms(p)) <= vocab for p in g)
            and not all(i in inside for p in g for i in range(end - len(p), end))
        ]
        facts.links = _links(lang, question, vocab)
    return facts


def _links(lang: Language, question: str, vocab: frozenset[str]) -> list[tuple[str, str]]:
    """(X, Y) for each "X的Y" whose X and Y are content pieces right beside the particle
    ("我弟弟的女朋友" → 弟弟, 女朋友; not "团子看病去的是…": a function word stands next to it)."""
    particles = lang.lex.linking_particles
    out: list[tuple[str, str]] = []
    for tok in tokens(question):
        if not tok.cjk:
            continue
        pieces = cjk_pieces(lang, tok)
        for left, right in zip(pieces, pieces[1:]):
            between = question[left.end : right.start]
            if between in particles and not set(index_terms(right.text)) <= vocab:
                out.append((left.text, right.text))
    return out


def _possessions(
    suffixes: tuple[str, ...], question: str, residual: list[str], key_terms: set[str]
) -> list[tuple[str, str | None]]:
    """(owner, owned) for each "X's Y": X a content word or a name, Y the word right after it when
    it is a content word (None for the schema's own words: "name", "birthday")."""
    if not suffixes:
        return []
    content = set(residual)
    out: list[tuple[str, str | None]] = []
    for m in re.finditer(rf"(\w+)(?:{alternation(suffixes, boundary=False)})\b(?=((?:\W+\w+)?))", question):
        owner = [t for t in index_terms(m.group(1)) if t in content or t in key_terms]
        owned = [t for t in index_terms(m.group(2)) if t in content]
        if owner:
            out.append((owner[-1], owned[0] if owned else None))
    return out
