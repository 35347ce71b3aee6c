"""Whose fact a turn tells, in a transcript of labelled speakers ("Nora: …", "小雨：…").

Two friends' chat holds each one's news in their own turns: "Nora: we adopted a dog" is Nora's,
"Ben: Does she run with you?" asks about Nora's dog. A question that names one speaker and asks
what only the other told ("When did Ben adopt a dog?") finds every word it says stored — just
never of Ben. Long personal-conversation benchmarks ask exactly this (adversarial questions);
the honest answer is that it is not known, not the other person's fact.

A sentence tells of a speaker when it names them (calling them by name is no telling of them:
"小雨！告诉你个好消息，我考过游泳了！" is 阿浩's news); when it is their own, said in the first
person or a statement naming nobody ("The Riverside Half, on May 10."); when another speaker
says it to them ("you", "your") or asks them (a question not in the first person: "Which ones
did you get?", "海豹吗？什么颜色？"). The person is read in the clauses that hold the asked words
when there are such: "我跟你说，大伟跟我求婚了！" tells the speaker's own news, not the
listener's; a clause naming no one is read with its sentence ("Congrats on the promotion, you
deserve it!" is about the listener). A turn without a speaker label may tell of anyone.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from ..lang import has_cjk
from ..lang.language import Language
from ..lang.segment import index_terms
from ..lang.speakers import opening, speaker

__all__ = ["names", "named_beyond_address", "tells_of", "content_words"]


def names(text: str, person: str) -> bool:
    """Whether ``text`` names ``person`` (a whole word; CJK names anywhere)."""
    if has_cjk(person):
        return person in text
    return re.search(rf"(?<![\w'’]){re.escape(person)}(?![\w])", text) is not None


def named_beyond_address(lang: Language, body: str, person: str) -> bool:
    """Whether ``body`` names ``person`` other than by calling them: "Iris! Good, busy.", "Hey
    Sam, …", "小雨！…" (the name, only greetings before it in its sentence, a sentence or clause end
    after it) and "That's so cool, Melanie!" (a clause end before it, the sentence's end after)."""
    sentence_ends = tuple(lang.lex.sentence_ends)
    ends = sentence_ends + tuple(lang.lex.clause_ends)
    for sentence in lang.sentences(body):
        for m in re.finditer(re.escape(person), sentence):
            if not names(sentence[m.start() :], person):
                continue  # inside another word
            head, tail = sentence[: m.start()], sentence[m.end() :].lstrip()
            before = re.findall(r"[\w'’]+", head.lower())
            opening_call = tail.startswith(ends) and all(w in lang.greeting_words for w in before)
            closing_call = (not tail or tail.startswith(sentence_ends)) and head.rstrip().endswith(ends)
            if not (opening_call or closing_call):
                return True
    return False


def content_words(
    readings: Iterable[str], person: str, said: Callable[[str], str]
) -> list[tuple[str, list[list[str]]]]:
    """The question's words besides ``person``: each as it was said (``said`` of a reading) and
    its alternative readings' index terms ("雨十月|小雨十月": CJK segmentations), the person cut
    out of them; words left with no term of their own dropped, and words whose readings repeat
    another's once."""
    own = set(index_terms(person))

    def terms_of(text: str) -> list[str]:
        return [t for t in index_terms(text) if t not in own]

    out: list[tuple[str, list[list[str]]]] = []
    seen: set[frozenset[str]] = set()
    for word in readings:
        alternatives: list[list[str]] = []
        surface = ""
        longest = max(len(r) for r in word.split("|"))
        for reading in word.split("|"):
            rest = reading.replace(person, "") if has_cjk(person) else reading
            if has_cjk(rest) and len(rest) < 2 and rest != word:
                continue  # a stray character left of a name ("阿浩做" → "做")
            if terms := terms_of(rest):
                alternatives.append(terms)
                surface = rest if has_cjk(rest) else re.sub(rf"{re.escape(person)}['’]s\s*", "", said(reading))
            if has_cjk(rest) and len(rest) >= 3 and len(reading) == longest:
                # no dictionary cuts a verb off its object: "茶杯送" (送给) may be said as "茶杯";
                # the whole reading only (its shorter ones are cut already)
                alternatives += [cut for part in (rest[:-1], rest[1:]) if (cut := terms_of(part))]
        key = frozenset(t for a in alternatives for t in a)
        if alternatives and key not in seen:
            seen.add(key)
            out.append((surface, alternatives))
    return out


def tells_of(lang: Language, text: str, person: str, terms: set[str]) -> bool:
    """Whether the turn ``text`` may tell ``person`` (one of the transcript's speakers) what
    its sentences holding any of ``terms`` say (module docstring)."""
    who = speaker(text)
    body = text[opening(text) :]
    if who is None or named_beyond_address(lang, body, person):
        return True
    for sentence in lang.sentences(body):
        if not terms & set(index_terms(sentence)):
            continue
        holding = [c for c in lang.clauses(sentence) if terms & set(index_terms(c))]
        if not any(lang.speaks_of_self(c) or lang.speaks_to(c) for c in holding):
            holding = [sentence]  # "Congrats on the promotion, you deserve it!" is said to you
        me = any(lang.speaks_of_self(c) for c in holding)
        you = any(lang.speaks_to(c) for c in holding)
        asks = lang.is_question(sentence)
        if who == person and (me or not (you or asks)):
            return True
        if who != person and (you or (asks and not me)):
            return True
    return False
