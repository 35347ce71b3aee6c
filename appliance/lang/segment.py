"""Words with their offsets, for both scripts: the units candidate spans are built from.

Latin text splits into word tokens (letters/digits/apostrophes/hyphens/dots inside a word);
CJK text has no spaces, so a run of CJK characters is one *chunk* that the caller narrows with
the pack's function words (``stopwords``, ``prepositions``): "从北京京仪大酒店到聚宝源" →
"北京京仪大酒店", "聚宝源". Tokens for lexical search (BM25) are lower-cased words and, for
CJK, character bigrams plus single characters — no dictionary, no download.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from .language import Language

__all__ = [
    "Token",
    "tokens",
    "search_terms",
    "index_terms",
    "INDEX_TERMS_VERSION",
    "cjk_pieces",
    "cjk_words",
    "load_segmenter",
    "is_punct",
    "stem",
]

_TOKEN = re.compile(
    r"[A-Za-z0-9\u00C0-\u024F]+(?:['’.\-&][A-Za-z0-9\u00C0-\u024F]+)*|[\u3400-\u9fff\uf900-\ufaff]+|[^\sA-Za-z0-9\u3400-\u9fff]"
)
_CJK_CHAR = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


@dataclass(frozen=True)
class Token:
    text: str
    start: int
    end: int

    @property
    def low(self) -> str:
        return self.text.lower()

    @property
    def cjk(self) -> bool:
        return bool(_CJK_CHAR.match(self.text))

    @property
    def word(self) -> bool:
        return self.text[:1].isalnum() or self.cjk


def tokens(text: str) -> list[Token]:
    """Word, CJK-run and punctuation tokens with their character offsets."""
    return [Token(m.group(0), m.start(), m.end()) for m in _TOKEN.finditer(text)]


def is_punct(tok: Token) -> bool:
    return not tok.word


@lru_cache(maxsize=16)
def _cjk_splitter(words: tuple[str, ...]) -> re.Pattern[str]:
    alts = sorted({w for w in words if w and _CJK_CHAR.search(w)}, key=len, reverse=True)
    return re.compile("|".join(re.escape(w) for w in alts) or "(?!)")


@lru_cache(maxsize=64)
def cjk_words(text: str) -> tuple[tuple[int, int, str], ...]:
    """The words of ``text`` by a dictionary segmenter (jieba, shipped with its dictionary),
    each (start, end, part-of-speech tag): where a CJK word begins and ends, which no list of
    function words can tell ("蚂蚁|搬家", "被子" is no "被" + "子")."""
    import jieba
    import jieba.posseg

    jieba.setLogLevel(60)  # its load is silent; the cache file goes to the temp folder
    out: list[tuple[int, int, str]] = []
    pos = 0
    for w in jieba.posseg.lcut(text, HMM=True):
        out.append((pos, pos + len(w.word), w.flag))
        pos += len(w.word)
    return tuple(out)


def load_segmenter() -> None:
    """Load the segmenter's dictionary now (about a second) rather than on a first message."""
    import jieba
    import jieba.posseg

    jieba.setLogLevel(60)
    jieba.posseg.dt.initialize()


def inside_word(text: str, pos: int, tags: str = "") -> bool:
    """Whether ``pos`` falls strictly inside a CJK word of ``text`` (whose tag starts with one
    of ``tags``, when given)."""
    return any(
        a < pos < b and (not tags or tag[:1] in tags) for a, b, tag in cjk_words(text) if _CJK_CHAR.search(text[a:b])
    )


def cjk_pieces(lang: Language, tok: Token, text: str = "") -> list[Token]:
    """A CJK run cut at the pack's function words (stopwords, prepositions, topic markers,
    fillers, negations) into the pieces between them, each with its offsets. A negation ends
    the thing it follows ("陈老师不上门", "书桌不卖了": 陈老师, 书桌). With ``text`` (the message
    the token is from), a function word inside a noun is no cut ("被子", "过户")."""
    lx = lang.lex
    verbs = [v for v in lx.request_verbs if len(v) >= 2]
    splitter = _cjk_splitter(
        tuple(
            [*lx.stopwords, *lx.prepositions, *lx.topic_markers, *lx.fillers, *lx.question_words, *verbs, *lx.negations]
        )
    )
    out: list[Token] = []
    pos = 0
    for m in splitter.finditer(tok.text):
        # a function word inside a noun is part of it ("被子", "过户"); inside a verb it still
        # cuts ("书桌|不卖了", "旧冰箱|送给")
        if text and (inside_word(text, tok.start + m.start(), "n") or inside_word(text, tok.start + m.end(), "n")):
            continue
        if m.start() > pos:
            out.append(Token(tok.text[pos : m.start()], tok.start + pos, tok.start + m.start()))
        pos = m.end()
    if pos < len(tok.text):
        out.append(Token(tok.text[pos:], tok.start + pos, tok.end))
    return out


def search_terms(
    text: str, stopwords: frozenset[str] = frozenset(), root: Callable[[str], str] | None = None
) -> list[str]:
    """Terms for lexical search: lower-cased words (minus ``stopwords``, a light plural stem,
    then ``root`` — a pack's base forms and derivations: "teaching" → "teach", "went" → "go",
    dropped when that is a stopword) and, for CJK runs, bigrams and single characters."""
    out: list[str] = []
    for tok in tokens(text):
        if tok.cjk:
            s = tok.text
            out += list(s)
            out += [s[i : i + 2] for i in range(len(s) - 1)]
        elif tok.word:
            w = tok.low.replace("’", "'")
            if w in stopwords or (len(w) < 2 and not w.isdigit()):
                continue
            base = stem(w)
            term = root(base) if root else base
            if term == base or term not in stopwords:  # "went" → "go", a function word too
                out.append(term)
    return out


def stem(w: str) -> str:
    """A light English-ish stem ("orders" → "order", "cities" → "city") that never merges two
    different short words; other scripts pass through."""
    if not w.isascii() or len(w) <= 3 or w.isdigit():
        return w
    if w.endswith("'s"):
        w = w[:-2]
    if w.endswith("ies") and len(w) > 4:
        return w[:-3] + "y"
    if w.endswith("sses"):
        return w[:-2]
    if w.endswith("s") and not w.endswith(("ss", "us", "is")):
        return w[:-1]
    return w


@lru_cache(maxsize=16)
def _index_stopwords(codes: tuple[str, ...]) -> frozenset[str]:
    from . import language_for

    lx = language_for(codes).lex
    words = [*lx.stopwords, *lx.fillers, *lx.question_openers, *lx.question_words, *lx.request_verbs]
    return frozenset(w.lower() for w in words if w.isascii())


def index_terms(text: str, codes: tuple[str, ...] | None = None) -> list[str]:
    """The terms a memory is indexed under and a question is searched with (the same function
    on both sides): ``search_terms`` without the packs' function words."""
    from . import DEFAULT_LANGUAGES

    codes = codes or DEFAULT_LANGUAGES
    return search_terms(text, _index_stopwords(codes), _index_language(codes).lemma)


# The terms ``index_terms`` produces for a text: a stored index written under another version is
# rebuilt on open (the store compares this with the one it was written with).
# 2: words reduced to the packs' roots ("adopted" and "adopt" meet); 3: irregular forms to their
# base ("stole" and "steal" meet)
INDEX_TERMS_VERSION = "3"


@lru_cache(maxsize=16)
def _index_language(codes: tuple[str, ...]) -> Language:
    from . import language_for

    return language_for(codes)
