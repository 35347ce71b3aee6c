"""The ``Lexicon``: every word the appliance knows about a language, as data.

A language pack (``lang/en.py``, ``lang/zh.py``) is one ``Lexicon`` value; code elsewhere
holds no words of any language. Several packs merge into one lexicon (a schema names its
languages; by default every shipped pack is active), so a mixed English/Chinese message is
read with both vocabularies at once.

Fields are plain tuples/dicts of words. ``patterns`` holds the few regular expressions that
cannot be expressed as word lists (Chinese "X月Y日", "尾号1234"); their named groups are the
contract the parsers in ``lang/dates.py`` and ``lang/numbers.py`` rely on.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

__all__ = ["Lexicon", "merge"]


@dataclass(frozen=True)
class Lexicon:
    """Words of one language (or the union of several, see :func:`merge`)."""

    code: str
    script: str = "latin"  # "han" for packs whose words are CJK (matched without word boundaries)
    # --- questions -------------------------------------------------------------------
    question_marks: tuple[str, ...] = ()  # a message containing one asks something ("?", "吗")
    question_openers: tuple[str, ...] = ()  # a message opening with one asks ("where", "is")
    question_words: tuple[str, ...] = ()  # anywhere in the message ("请问", "哪")
    lookup_openers: tuple[str, ...] = ()  # chat: a turn opening with one is a lookup ("show", "list")
    topic_markers: tuple[str, ...] = ()  # "about X", "关于X"
    # words a question uses for the memory itself ("What do you remember about…", "有什么记录"):
    # they ask, they are not what is asked about
    memory_words: tuple[str, ...] = ()
    all_sessions: tuple[str, ...] = ()  # "all sessions", "所有会话"
    recent_words: tuple[str, ...] = ()  # the question asks for recent things ("latest", "最近")
    amount_questions: tuple[str, ...] = ()  # "how much", "多少钱": the answer is an amount
    # a quantity word followed by one and a bare noun counts that noun ("amount of riders"): an
    # attribute so named is a count, not money
    count_links: tuple[str, ...] = ()
    when_words: tuple[str, ...] = ()  # "when did …", "什么时候"
    nearby_words: tuple[str, ...] = ()  # "near", "周边": what follows is near the subject, not it
    other_words: tuple[str, ...] = ()  # "other", "别的": "其他餐馆" near X says X is a restaurant too
    # --- who a turn is about (a transcript of labelled speakers) ------------------------------
    first_person: tuple[str, ...] = ()  # "I", "my", "我": the speaker speaks of themself
    second_person: tuple[str, ...] = ()  # "you", "your", "你": of the one spoken to
    sentence_ends: tuple[str, ...] = ()  # ".", "。": where a sentence of a turn ends
    clause_ends: tuple[str, ...] = ()  # ",", "，": where a clause of a sentence ends
    # --- tense: a bare weekday in a sentence told in the past is the one before ("I ran on
    # Thursday"), otherwise the one ahead ("Book it for Thursday") ----------------------------
    # words that open a clause turning against the one before ("but", "但是"): a negation's
    # scope ends at one ("not X but Y")
    contrast_words: tuple[str, ...] = ()
    past_markers: tuple[str, ...] = ()  # "did", "was", "了": the sentence tells the past
    past_suffixes: tuple[str, ...] = ()  # "-ed" after a subject ("she started"): a past verb
    subjects: tuple[str, ...] = ()  # "i", "she", "they": what a past verb follows
    # --- negation and affirmation ------------------------------------------------------
    negations: tuple[str, ...] = ()  # before a word, deny it ("not", "never", "没")
    rule_out: tuple[str, ...] = ()  # before an id, rule it out ("not 12345", "不是")
    affirmations: tuple[str, ...] = ()  # "yes", "sure", "是", "要"
    absence_values: tuple[str, ...] = ()  # an enum value meaning "none of them" ("None", "无")
    # --- comparison and ranges -------------------------------------------------------------
    greater: tuple[str, ...] = ()  # "over 1000", "超过1000", "1000以上" (see greater_after)
    less: tuple[str, ...] = ()
    greater_after: tuple[str, ...] = ()  # after the number: "4.5分以上"
    less_after: tuple[str, ...] = ()
    range_joiners: tuple[str, ...] = ()  # "between 50 and 100", "50-100", "50到100"
    # --- numbers and money -----------------------------------------------------------------
    number_words: dict[str, int] = field(default_factory=dict)  # "one" → 1, "两" → 2
    scale_words: dict[str, int] = field(default_factory=dict)  # "hundred" → 100, "万" → 10000
    scale_joiners: tuple[str, ...] = ()  # after a scale, before the rest: "five hundred *and* thirty"
    thousand_suffixes: tuple[str, ...] = ()  # "2k"
    currency_before: dict[str, str] = field(default_factory=dict)  # "$" → USD
    currency_after: dict[str, str] = field(default_factory=dict)  # "元" → CNY, "dollars" → USD
    unit_after: tuple[str, ...] = ()  # counters after a number: "个", "张", "stars"
    # --- dates and times ----------------------------------------------------------------------
    months: dict[str, int] = field(default_factory=dict)  # "march"/"mar" → 3
    weekdays: dict[str, int] = field(default_factory=dict)  # "monday" → 0, "周一" → 0
    relative_days: dict[str, int] = field(default_factory=dict)  # "yesterday" → -1, "后天" → 2
    ordinal_suffixes: tuple[str, ...] = ()  # "st", "nd", "rd", "th"
    this_words: tuple[str, ...] = ()  # "this Sunday", "本周"
    next_words: tuple[str, ...] = ()  # "next Monday", "下周"
    last_words: tuple[str, ...] = ()  # "last week", "上周"
    unit_words: dict[str, str] = field(default_factory=dict)  # "week(s)" → week, "天" → day
    of_month_words: tuple[str, ...] = ()  # "the 13th of this month"
    day_periods: dict[str, str] = field(default_factory=dict)  # "morning" → am, "下午" → pm
    clock_words: dict[str, int] = field(default_factory=dict)  # "noon" → 12, "midnight" → 0
    quarter_words: dict[str, int] = field(default_factory=dict)  # "quarter past" → +15, "半" → +30
    oclock: tuple[str, ...] = ()  # "o'clock", "点", "时"
    # --- ids ----------------------------------------------------------------------------------
    id_markers: tuple[str, ...] = ()  # "#", "号", "no."
    # --- phrase structure (candidate spans) ---------------------------------------------------
    prepositions: tuple[str, ...] = ()  # a value often follows one ("in Paris", "在北京")
    origin_cues: tuple[str, ...] = ()  # the value after one is a from/start ("from", "从")
    destination_cues: tuple[str, ...] = ()  # the value after one is a to/end ("to", "去")
    # words that may stand between a cue and its value ("to *their* savings account", "from
    # *the* 10th"): the cue still gives the value its role
    noun_openers: tuple[str, ...] = ()
    stopwords: tuple[str, ...] = ()  # function words: never a value on their own
    request_verbs: tuple[str, ...] = ()  # verbs of asking and doing ("book", "find", "预订"): not values
    fillers: tuple[str, ...] = ()  # chat fillers that never start a value ("please", "吧")
    # function words that also stand inside names ("都" in 北京丽都维景酒店, "也" in 维也纳): a
    # name cut at one is offered joined again
    name_inner_words: tuple[str, ...] = ()
    # words said to someone before their name ("Hey Nora!", "Thanks, Ben."): the name is the
    # addressee, no subject of the message
    greetings: tuple[str, ...] = ()
    # endings that derive words of one root ("directed", "director" → "direct"; "starring" →
    # "star"): a cue word matches an attribute's word when their roots do
    derivation_suffixes: tuple[str, ...] = ()
    # irregular word forms → their base ("stole" → "steal", "bought" → "buy"): a memory saying
    # "she stole the cheese" is found by "What did she steal?" (lexical terms only)
    irregular_forms: dict[str, str] = field(default_factory=dict)
    # endings of a verb's other forms and of contracted auxiliaries ("-ing", "n't", "'ve"): a
    # candidate with such a word reads as a clause, not as the name of a thing ("keeping",
    # "would've")
    verb_endings: tuple[str, ...] = ()
    # words that follow only a verb (aspect particles and result complements: 了, 过, 完): a CJK
    # piece right before one ends with its verb ("酱油用完了", "红烧肉做了"); prepositions that
    # also follow nouns (到, 在) are left out: "北京到上海" ends with no verb
    verb_particles: tuple[str, ...] = ()
    # part-of-speech tags of the CJK segmenter (jieba) for verbs, adverbs, prepositions,
    # conjunctions and particles: a candidate ending in such a word reads as a clause
    verbal_tags: frozenset[str] = frozenset()
    doubled_before_suffix: str = ""  # letters doubled before such an ending ("starr-ing" → "star")
    possessive_suffixes: tuple[str, ...] = ()  # "'s": the word before one owns what follows ("dog's name")
    # a particle between an owner and what it owns that also ends relative clauses ("弟弟*的*女朋友",
    # "舅舅开*的*餐馆"): the two are only checked to be told together, never taken as missing
    linking_particles: tuple[str, ...] = ()
    name_joiners: tuple[str, ...] = ()  # lower-case words inside a name ("Bank of America")
    name_suffixes: tuple[str, ...] = ()  # a name often ends with one ("…饭店", "…公园"): where to cut a CJK piece
    address_suffixes: tuple[str, ...] = ()  # "Street", "Ave", "路", "号"
    # --- attribute kinds (schema import only: what a slot's words say about its values) -------
    kind_words: dict[str, tuple[str, ...]] = field(default_factory=dict)  # kind → words in name/description
    # --- regular expressions that word lists cannot express (named groups: see module doc) ---
    patterns: dict[str, str] = field(default_factory=dict)
    # --- prompts (the model reads English instructions whatever the message language) -------
    prompts: dict[str, str] = field(default_factory=dict)


def merge(packs: list[Lexicon]) -> Lexicon:
    """The union of several packs: tuples concatenated (order kept, duplicates dropped),
    dicts merged (an earlier pack wins a clash), patterns kept per pack under ``code:name``."""
    if len(packs) == 1:
        return packs[0]
    values: dict[str, Any] = {"code": "+".join(p.code for p in packs), "script": "mixed"}
    for f in fields(Lexicon):
        if f.name in ("code", "script"):
            continue
        items = [getattr(p, f.name) for p in packs]
        if f.name == "patterns":
            values[f.name] = {f"{p.code}:{k}": v for p in packs for k, v in p.patterns.items()}
        elif f.name == "kind_words":
            merged: dict[str, tuple[str, ...]] = {}
            for d in items:
                for k, v in d.items():
                    merged[k] = tuple(dict.fromkeys([*merged.get(k, ()), *v]))
            values[f.name] = merged
        elif isinstance(items[0], str):
            values[f.name] = "".join(dict.fromkeys("".join(items)))
        elif isinstance(items[0], dict):
            out: dict[Any, Any] = {}
            for d in reversed(items):
                out.update(d)
            values[f.name] = out
        else:
            values[f.name] = tuple(dict.fromkeys(w for t in items for w in t))
    return Lexicon(**values)
