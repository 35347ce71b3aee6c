"""``Language``: the active packs of a schema, with their words compiled into matchers.

Everything that reads words out of a message asks a ``Language``: is this a question, is this
word negated, which ids does the message rule out, is this id written as a suffix, which
comparison does a number carry. The words come from the packs; this module holds only the
machinery (regular-expression assembly, word-boundary rules: ASCII words must start at a word
boundary, CJK words match anywhere).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cached_property

from .lexicon import Lexicon, merge

__all__ = ["Language", "find_word", "alternation", "is_cjk", "has_cjk"]

_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


def is_cjk(ch: str) -> bool:
    return bool(_CJK.match(ch))


def has_cjk(text: str) -> bool:
    return bool(_CJK.search(text))


def find_word(low: str, word: str) -> int:
    """Position of ``word`` in lower-cased ``low`` (-1: absent); ASCII words must start at a
    word boundary ("paid" is not found in "unpaid"), CJK words match anywhere."""
    if word.isascii():
        m = re.search(rf"(?<![a-z]){re.escape(word)}", low)
        return m.start() if m else -1
    return low.find(word)


def alternation(words: Iterable[str], boundary: bool = True) -> str:
    """A regex alternation of ``words``, longest first; ASCII words get word boundaries."""
    parts = []
    for w in sorted(set(words), key=lambda x: (-len(x), x)):
        if not w:
            continue
        esc = re.escape(w)
        if boundary and w.isascii() and w[0].isalnum():
            esc = r"\b" + esc
        if boundary and w.isascii() and w[-1].isalnum():
            esc = esc + r"\b"
        parts.append(esc)
    return "(?:" + "|".join(parts) + ")" if parts else "(?!)"


class Language:
    """One or more language packs, merged, with compiled matchers."""

    def __init__(self, packs: list[Lexicon]) -> None:
        if not packs:
            raise ValueError("a Language needs at least one pack")
        self.packs = packs
        self.lex = merge(packs)
        self.codes = tuple(p.code for p in packs)

    def pattern(self, name: str) -> list[str]:
        """Every pack's pattern called ``name`` (packs without one contribute nothing)."""
        return [p.patterns[name] for p in self.packs if name in p.patterns]

    def pack_for(self, word: str) -> list[Lexicon]:
        """The packs whose script ``word`` is written in (CJK vs the rest)."""
        cjk = has_cjk(word)
        return [p for p in self.packs if (p.script == "han") == cjk]

    # --- words ------------------------------------------------------------------------------
    @cached_property
    def _derivations(self) -> tuple[str, ...]:
        return tuple(sorted(self.lex.derivation_suffixes, key=len, reverse=True))

    def root(self, term: str) -> str:
        """The root a derived word shares with its kin ("directed", "director" → "direct";
        "starring" → "star"), for matching cue words only: at least four letters stay, so short
        words ("order", "rider") keep their ending."""
        known = self._roots.get(term)
        if known is None:
            known = self._roots[term] = self._derive(term)  # a word's root never changes: once
        return known

    @cached_property
    def _roots(self) -> dict[str, str]:
        return {}

    def _derive(self, term: str) -> str:
        for suffix in self._derivations:
            if term.endswith(suffix) and len(term) - len(suffix) >= 4:
                base = term[: -len(suffix)]
                if len(base) >= 5 and base[-1] == base[-2] and base[-1] in self.lex.doubled_before_suffix:
                    base = base[:-1]  # "starr-ing" → "star", "stopp-ed" → "stop"
                return base
        return term

    def roots(self, terms: frozenset[str]) -> frozenset[str]:
        return frozenset(self.root(t) for t in terms)

    def lemma(self, term: str) -> str:
        """The root of a word's base form, irregular forms included ("stole" → "steal",
        "teaching" → "teach"): what lexical search indexes and queries a word under."""
        return self.root(self.lex.irregular_forms.get(term, term))

    # --- questions ----------------------------------------------------------------------
    @cached_property
    def _question(self) -> re.Pattern[str]:
        lx = self.lex
        parts = [alternation(lx.question_marks, boundary=False), alternation(lx.question_words, boundary=False)]
        if lx.question_openers:
            parts.append("^" + alternation(lx.question_openers))
        return re.compile("|".join(parts), re.I)

    def is_question(self, text: str) -> bool:
        """Whether the message asks something: a question mark, an opening wh-/auxiliary word,
        or an interrogative word anywhere (CJK packs)."""
        return bool(self._question.search(text.strip()))

    @cached_property
    def small_words(self) -> frozenset[str]:
        """The pack's function words, fillers and prepositions, lower-cased: words that carry no
        value of their own ("63 *now*" is said in no unit)."""
        lx = self.lex
        return frozenset(w.lower() for w in (*lx.stopwords, *lx.fillers, *lx.prepositions))

    @cached_property
    def greeting_words(self) -> frozenset[str]:
        """The words of the pack's greetings, lower-cased ("hey", "good", "morning"): said before
        a name, they call the person ("Hey Nora!")."""
        return frozenset(g for w in self.lex.greetings for g in w.lower().split())

    # --- who a turn speaks of ---------------------------------------------------------------
    @cached_property
    def _first_person(self) -> re.Pattern[str]:
        return re.compile(alternation(self.lex.first_person), re.I)

    @cached_property
    def _second_person(self) -> re.Pattern[str]:
        return re.compile(alternation(self.lex.second_person), re.I)

    def speaks_of_self(self, text: str) -> bool:
        """Whether ``text`` is said in the first person ("I", "my", "我")."""
        return bool(self._first_person.search(text))

    def speaks_to(self, text: str) -> bool:
        """Whether ``text`` addresses someone ("you", "your", "你")."""
        return bool(self._second_person.search(text))

    @cached_property
    def _past(self) -> re.Pattern[str]:
        lx = self.lex
        # "was hoping", "were wondering": a marker before an "-ing" word is a polite present
        parts = [alternation(lx.past_markers) + r"(?!\s+\w+ing\b)"]
        if forms := [k for k in lx.irregular_forms if k.isascii()]:
            parts.append(alternation(forms))  # "ran", "went surfing"
        if lx.past_suffixes and lx.subjects:
            # "she started", "I twisted": a subject then a word with a past ending
            ends = alternation(lx.past_suffixes, boundary=False)
            parts.append(rf"{alternation(lx.subjects)}\s+[a-z]{{3,}}{ends}\b")
        return re.compile("|".join(parts), re.I)

    def past_tense(self, sentence: str) -> bool:
        """Whether ``sentence`` tells of the past ("I ran 10 km on Thursday", "周一去了医院")."""
        return bool(self._past.search(sentence))

    def verb_form(self, word: str) -> bool:
        """Whether ``word`` has the shape of an inflected verb in the pack's morphology: an
        irregular form ("lent", "bought") or a past ending after a stem of three letters or more
        ("booked", "ordered"). Capitalised at a sentence's start it opens no name ("Lent Azul")."""
        low = word.lower()
        if low in self.lex.irregular_forms:
            return True
        return any(low.endswith(end) and len(low) - len(end) >= 3 for end in self.lex.past_suffixes)

    def verbal(self, span: str, after: str) -> bool:
        """Whether a candidate value reads as a verb phrase rather than the name of a thing: a
        word of it has a verb's shape (``verb_form``, or an ending of the pack's
        ``verb_endings``: "keeping", "would've"), or, in a CJK script, what follows it starts
        with a word that follows only verbs ("酱油用完|了": the piece ends with its verb)."""
        lx = self.lex
        if lx.verb_particles and after.lstrip().startswith(lx.verb_particles):
            return True
        for word in span.replace("’", "'").split():
            low = word.lower().strip(".,!?;:")
            if self.verb_form(low) or any(low.endswith(end) and len(low) - len(end) >= 2 for end in lx.verb_endings):
                return True
        return False

    def capitalises_names(self, text: str) -> bool:
        """Whether the writer of ``text`` capitalises names: a transcript turn opens with its
        speaker's capitalised name ("Iris: …"), or a capitalised Latin word stands where no
        sentence starts ("Hey Sam!", "with Priya") and is no first-person word ("I")."""
        from .speakers import opening, speaker

        who = speaker(text)
        if who is not None and who[:1].isupper():
            return True
        begin = opening(text)
        ends = tuple(self.lex.sentence_ends)
        for m in re.finditer(r"(?<![\w'’])[A-Z][A-Za-z'’\-]*", text[begin:]):
            before = text[begin : begin + m.start()].rstrip()
            if not before or (ends and before.endswith(ends)) or self._first_person.fullmatch(m.group()):
                continue
            return True
        return False

    @cached_property
    def _sentence_end(self) -> re.Pattern[str]:
        return re.compile(alternation(self.lex.sentence_ends, boundary=False))

    def sentence_bounds(self, text: str, start: int, end: int) -> tuple[int, int]:
        """(begin, end) of the sentence of ``text`` holding ``text[start:end]``."""
        before = max((m.end() for m in self._sentence_end.finditer(text, 0, start)), default=0)
        after = self._sentence_end.search(text, end)
        return before, after.start() if after else len(text)

    def sentence_at(self, text: str, start: int, end: int) -> str:
        """The sentence of ``text`` holding ``text[start:end]``."""
        begin, finish = self.sentence_bounds(text, start, end)
        return text[begin:finish]

    def sentences(self, text: str) -> list[str]:
        """``text`` cut after each sentence end, the ends kept, blanks dropped."""
        return _cut(text, self._sentence_end)

    @cached_property
    def _clause_end(self) -> re.Pattern[str]:
        return re.compile(alternation(self.lex.clause_ends, boundary=False))

    def clauses(self, sentence: str) -> list[str]:
        """``sentence`` cut after each clause end (a comma, "，"), the ends kept, blanks dropped."""
        return _cut(sentence, self._clause_end) if self.lex.clause_ends else [sentence.strip()]

    @cached_property
    def _nearby_clause(self) -> re.Pattern[str] | None:
        if not self.lex.nearby_words:
            return None
        ends = "".join(re.escape(e) for e in (*self.lex.clause_ends, *self.lex.sentence_ends) if len(e) == 1)
        return re.compile(alternation(self.lex.nearby_words) + (f"[^{ends}]*" if ends else ".*"), re.I)

    def nearby_clauses(self, text: str) -> list[tuple[int, int]]:
        """(start, end) of each stretch from a word of nearness to its clause's end: "周边有什么酒店"
        in "故宫周边有什么酒店？", "near the station" in "a flat near the station, please"."""
        pattern = self._nearby_clause
        return [(m.start(), m.end()) for m in pattern.finditer(text)] if pattern else []

    @cached_property
    def _lookup(self) -> re.Pattern[str]:
        return re.compile("^" + alternation(self.lex.lookup_openers), re.I)

    def is_lookup(self, text: str) -> bool:
        """Whether a chat turn asks to look something up: a question, or an opening
        "show"/"list"/"find" (the panel routes such turns to recall)."""
        return self.is_question(text) or bool(self._lookup.search(text.strip()))

    @cached_property
    def _recent(self) -> re.Pattern[str]:
        return re.compile(alternation(self.lex.recent_words), re.I)

    def asks_recent(self, text: str) -> bool:
        """Whether a question asks for recent things ("latest", "最近")."""
        return bool(self._recent.search(text))

    @cached_property
    def _all_sessions(self) -> re.Pattern[str]:
        return re.compile(alternation(self.lex.all_sessions, boundary=False), re.I)

    def asks_all_sessions(self, text: str) -> bool:
        return bool(self._all_sessions.search(text))

    # --- agreement ------------------------------------------------------------------------
    @cached_property
    def _affirmation(self) -> re.Pattern[str]:
        return re.compile(alternation(self.lex.affirmations), re.I)

    @cached_property
    def _said_in_passing(self) -> re.Pattern[str]:
        lx = self.lex
        return re.compile(alternation([*lx.affirmations, *lx.fillers, *lx.greetings, *lx.stopwords]), re.I)

    def bare_agreement(self, text: str) -> bool:
        """Whether the message only agrees ("Yes, that's fine.", "好的"): an affirmation, and
        nothing but affirmations, fillers, greetings and small words beside it. What it agrees to
        was said by someone else."""
        if not self._affirmation.search(text):
            return False
        return not re.sub(r"[\W_]+", "", self._said_in_passing.sub(" ", text))

    # --- negation -------------------------------------------------------------------------
    @cached_property
    def _negated_end(self) -> re.Pattern[str]:
        return re.compile(rf"(?:{self._negation.pattern})\s*$", re.I)

    def negated_at(self, text: str, pos: int, scope: int = 0) -> bool:
        """Whether a negation stands right before ``pos`` ("no *pets*", "不要*早餐*"), or, with a
        ``scope``, at most that many words (a CJK character counts as one) before it in the same
        clause ("didn't *get a* flat", "不*算*易碎"): a negation governs what follows it, and how
        far is fitted (``bench/fit_weights.py --negation``), not set here."""
        before = text[:pos]
        if self._negated_end.search(before):
            return True
        if scope <= 0:
            return False
        clause = self._clause_split.split(before)[-1]
        for m in self._negation.finditer(clause):
            gap = clause[m.end() :]
            if len(re.findall(r"[A-Za-z0-9'’]+|[\u3400-\u9fff]", gap)) <= scope:
                return True
        return False

    @cached_property
    def _negation(self) -> re.Pattern[str]:
        return re.compile(
            "|".join(
                (r"\b" if w.isascii() and w.isalpha() else "") + re.escape(w) + (r"\b" if w.isascii() else "")
                for w in self.lex.negations
            ),
            re.I,
        )

    @cached_property
    def _clause_split(self) -> re.Pattern[str]:
        ends = [*self.lex.clause_ends, *self.lex.sentence_ends, *self.lex.contrast_words]
        return re.compile(
            "|".join(rf"\b{re.escape(w)}\b" if w.isascii() and w.isalpha() else re.escape(w) for w in ends) or "(?!)",
            re.I,
        )

    def asked_at(self, text: str, pos: int) -> bool:
        """Whether an asking word that holds a negation stands right before ``pos`` ("*有没有*
        会议室", "*是不是*免费"): the word is asked about, neither stated nor denied."""
        return bool(self._asking_end.search(text[:pos]))

    @cached_property
    def _asking_end(self) -> re.Pattern[str]:
        words = [w for w in self.lex.question_words if self._negated_end.search(w)]
        return re.compile(rf"(?:{alternation(words, boundary=False)})\s*$") if words else re.compile(r"(?!)")

    def affirmed(self, text: str, word: str, scope: int = 0) -> bool:
        """``word`` occurs in ``text`` at least once not negated (``negated_at`` with
        ``scope``): "hasn't shipped", "还没发货" do not evidence the state shipped."""
        start = text.find(word)
        while start >= 0:
            if not self.negated_at(text, start, scope):
                return True
            start = text.find(word, start + 1)
        return False

    def ruled_out(self, text: str, nouns: Iterable[str]) -> set[str]:
        """Ids the message explicitly rules out ("not 12345, I meant 12354" → {"12345"});
        ``nouns`` are the schema's words for its entities ("order", "订单")."""
        lx = self.lex
        neg = "|".join((r"\b" + re.escape(w) + r"\b") if w.isascii() else re.escape(w) for w in lx.rule_out)
        noun = "|".join(re.escape(n) for n in sorted(set(nouns), key=len, reverse=True) if n)
        marks = "|".join(re.escape(m) for m in lx.id_markers if len(m) == 1)
        rx = rf"(?:{neg})\s*(?:{noun})?\s*(?:{marks})?\s*([A-Za-z]{{0,4}}[-_]?\d[\dA-Za-z-]*)"
        return {m.group(1) for m in re.finditer(rx, text, re.I)}

    # --- ids --------------------------------------------------------------------------------
    def suffix_marked(self, text: str, value: str) -> bool:
        """Whether ``text`` writes ``value`` as the end of a longer id ("尾号2345", "ending in 2345")."""
        markers = "|".join(self.pattern("suffix"))
        if not markers:
            return False
        return re.search(rf"(?:{markers}){re.escape(value)}(?!\d)", text, re.I) is not None

    # --- comparison ---------------------------------------------------------------------------
    @cached_property
    def greater(self) -> str:
        """Alternation of the words that make a following number a lower bound."""
        return "|".join(re.escape(w) for w in self.lex.greater)

    @cached_property
    def less(self) -> str:
        return "|".join(re.escape(w) for w in self.lex.less)

    @cached_property
    def _comparison_words(self) -> re.Pattern[str]:
        both = [*self.lex.greater, *self.lex.less, *self.lex.greater_after, *self.lex.less_after]
        return re.compile(alternation(both, boundary=False), re.I)

    def comparison_before(self, low: str, surface: str) -> str | None:
        """ "gt"/"lt" when a comparison word stands right before ``surface`` in ``low``."""
        m = re.search(
            rf"(?:({self.greater})|({self.less}))\s*[^\w\s]?\s*{re.escape(surface.strip().lower())}", low, re.I
        )
        if not m:
            return None
        return "gt" if m.group(1) else "lt"

    def any_comparison(self, text: str) -> str | None:
        """The operator a question's wording implies anywhere ("over" → gt), if any."""
        if re.search(self.greater, text, re.I) if self.greater else False:
            return "gt"
        if re.search(self.less, text, re.I) if self.less else False:
            return "lt"
        return None

    # --- currency ----------------------------------------------------------------------------------
    @cached_property
    def _currency(self) -> re.Pattern[str]:
        words = [*self.lex.currency_before, *self.lex.currency_after]
        return re.compile(alternation(words, boundary=False), re.I)

    def mentions_currency(self, text: str) -> bool:
        return bool(self._currency.search(text))


def _cut(text: str, ends: re.Pattern[str]) -> list[str]:
    cuts = [m.end() for m in ends.finditer(text)]
    pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]
    return [p.strip() for p in pieces if p.strip()]
