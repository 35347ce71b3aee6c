"""Which span fills which attribute: evidence computed from the schema alone.

For every attribute the schema says what it is — its kind (a hard gate: a date attribute only
ever takes a date span), its name and description (its *label*), and for enums its values and
their aliases. For a message, every (attribute, span) pair the gate admits gets a feature vector
(``FEATURES``), scored by a small fitted network (``Scorer``):

* ``sim_ctx`` / ``sim_bare`` — sentence-encoder similarity between the attribute's label and
  the span with its left context ("leaving from Seattle") / the span alone; the label's vector
  is the mean of its description's and its name's, so one wording does not decide alone;
* ``cue`` — the attribute's own words (or their kin: "*directed* by" for a director, roots
  from the language pack) stand around the span ("three *bedrooms*", "*人均消费*是
  100-150元"); ``adjacent`` — its name stands right before the span;
* ``sim_counted`` — for a number, similarity between the label and the number with what it
  counts ("two *people*": travelers, not transfers);
* ``role`` — +1 when the cue before the span ("from", "到") has the role the label has
  (origin/destination), −1 when it has the opposite one; ``role_default`` — a span with no such
  cue, for an attribute whose entity has the opposite role on an attribute of the same kind
  (pickup/drop-off date): +1 for the start, −1 for the end (a lone "on March 9th" is a pickup);
* ``head_char`` — a CJK span ends with the last character of the attribute's name, the head of a
  Chinese compound ("经济*型*" for 酒店类*型*);
* ``schema_word`` — the span is made of the schema's own words ("movie", "酒店"): a value
  is rarely the name of the thing;
* shape features: ``capital`` (proper-noun shape), ``prep`` (after a preposition),
  ``quoted``, ``length``, ``money`` (an amount for an attribute about money);
* ``key_attr`` — the attribute is its entity's key (what the entity is known by: a pet's name,
  a visit's reason); ``clause_start`` — the span opens its clause, where a note names what it
  is about ("Mochi is our cat"); ``known_key`` — the span is the key of an entity of the type
  the session already holds ("Biscuit" again: a later note naming it updates it). Task dialogues'
  schemas declare no keys: what these are worth is learned from the notes of the fit set;
* ``cut`` — a CJK piece offered without its last one or two characters (a verb or result glued
  after a noun: "红烧肉做了", "酱油用完了"), or with an edge inside a word of the segmenter
  ("蚁搬家" of 蚂蚁|搬家); the fit says how much a cut is worth;
* ``verbal`` — the span reads as a verb phrase (a word with a verb's shape in the language pack,
  "keeping", "Lent Cascadia", a CJK piece right before a word that follows only verbs: "红烧肉做|了",
  or one whose last word the segmenter tags a verb, adverb or particle: "碗碟装", "小步舞曲先");
  ``inside_name`` — the span is a piece of a longer capitalised or quoted one ("Spirit" of "Spirit Island", 童年 of 《童年的回忆》);
* ``other_key`` — the span is the key of an entity of another type the session holds ("Magpie",
  a bike, in a note about its service): another thing the note speaks of;
* ``beside_number`` — the span touches a number (only spaces between): its unit or its label
  ("42 *km*", "*报价*1200元", "*每节课*300元"), seldom the name of a thing.

Enum attributes score their values (exact value or alias, distinctive words, similarity, and
``enum_margin``: how much better the value fits the words than the attribute's other values);
boolean attributes fire on their distinctive name words, true unless negated. The network was
fitted once on development dialogues (``bench/fit_weights.py``; its provenance is in
``scorer.json``); nothing here holds a word of any language or domain.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..domain.schema import Attribute, EntityType, MemorySchema
from ..lang import Language, find_word, has_cjk
from ..lang.numbers import said_in_unit
from ..lang.segment import search_terms
from ..model.embed import Embedder
from .examples import ExampleBank
from .spans import Span, cue_before, taught_cue

__all__ = [
    "Candidate",
    "SchemaEvidence",
    "FEATURES",
    "Scorer",
    "scorer",
    "net_score",
    "mean_score",
    "allowed_kinds",
    "without_similarity",
]

FEATURES = (
    "bias",
    "sim_ctx",
    "sim_bare",
    "cue",
    "adjacent",
    "role",
    "schema_word",
    "capital",
    "prep",
    "quoted",
    "length",
    "money",
    "enum_exact",
    "enum_words",
    "enum_sim",
    "boolean",
    "typed",
    "unique_kind",
    "only_span",
    "near_cue",
    "sim_margin",
    "written",
    "plain_for_money",
    "name_shape",
    "sim_entity",
    "bounded",
    "name_attr",
    "sim_counted",
    "enum_margin",
    "modifier",
    "role_default",
    "head_char",
    "key_attr",
    "clause_start",
    "known_key",
    "cut",
    "verbal",
    "inside_name",
    "other_key",
    "beside_number",
)
# what the sentence encoder gives: without one (APPLIANCE_SEMANTIC=off, or encoding failed) the
# scorer uses networks fitted with these at zero — the full networks read a missing cosine as a
# very poor fit ("for $1500" as an amount: −1.07 against a threshold of −1.0)
SIMILARITY_FEATURES = ("sim_ctx", "sim_bare", "sim_entity", "sim_counted", "sim_margin")
SCORER_FILE = Path(__file__).with_name("scorer.json")
# Corrected examples (``examples.py``): a candidate whose context resembles the context of a value
# a person gave for the attribute (above a floor), whose value is one a person gave, or that
# follows a word the examples' values followed, scores higher. The weights are in the scorer's
# units, so they are fitted with it (``bench/fit_weights.py --taught``, 5 corrected turns per
# service of the fit sets) and shipped in ``scorer.json``.
TAUGHT_KEYS = ("context", "floor", "value", "cue")


class Scorer:
    """The fitted attribute scorer: the mean of a few one-hidden-layer networks over ``FEATURES``
    (weights in ``scorer.json``, written by ``bench/fit_weights.py``); a score above ``threshold``
    means "this span is the value". Features interact (a typed span for the only attribute of its
    kind; a capitalised span after an origin cue), which a linear sum cannot express: measured on
    the development dialogues, slot F1 0.67 linear against 0.75 with a network. One network's fit
    depends on its seed (SGD slot F1 0.787–0.802 over four seeds, one service 0.54–0.64); the mean
    of ten moves less (refits differing in one notes-only feature: ±0.005 on 1,200 sgd-dev turns)."""

    def __init__(self, path: Path = SCORER_FILE) -> None:
        data = json.loads(path.read_text(encoding="utf-8"))
        if list(data["features"]) != list(FEATURES):
            raise ValueError(f"{path.name} was fitted on other features; refit with bench/fit_weights.py")
        self.nets = _nets(data.get("nets", [data]))
        self.threshold = float(data["threshold"])
        # an empty key attribute's floor (``extractor.assign``); a file without one keeps keys
        # to the common threshold
        self.key_threshold = float(data.get("key_threshold", self.threshold))
        # words a negation reaches past to deny a yes/no word or a listed value ("didn't get a
        # flat"); 0: only what stands right after it (``bench/fit_weights.py --negation``)
        self.negation_scope = int(data.get("negation_scope", 0))
        self.meta = data.get("meta", {})
        # a scorer file without them (a test's) takes no pull from corrected examples
        taught = data.get("taught", {})
        self.taught = {k: float(taught.get(k, 0.0)) for k in TAUGHT_KEYS}
        # without the encoder: its own networks, their scores moved onto the main threshold
        plain = data.get("plain")
        self.plain_nets = _nets(plain["nets"]) if plain else self.nets
        self.plain_shift = self.threshold - float(plain["threshold"]) if plain else 0.0

    def score(self, rows: np.ndarray, plain: bool = False) -> np.ndarray:
        """Scores of ``rows``; ``plain``: no similarity features (no sentence encoder)."""
        if not plain:
            return mean_score(self.nets, rows)
        return mean_score(self.plain_nets, without_similarity(rows)) + self.plain_shift


def _nets(raw: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: np.array(n[k]) for k in ("mu", "sd", "w1", "b1", "w2")} | {"b2": float(n["b2"])} for n in raw]


def without_similarity(rows: np.ndarray) -> np.ndarray:
    """``rows`` with the encoder's features at zero (what they are when there is no encoder)."""
    out = np.array(rows, dtype=float, copy=True)
    out[:, [FEATURES.index(f) for f in SIMILARITY_FEATURES]] = 0.0
    return out


def mean_score(nets: list[dict[str, Any]], rows: np.ndarray) -> np.ndarray:
    """The networks' mean score of ``rows`` (the scorer's, and the fit script's while it fits)."""
    return np.asarray(np.mean([net_score(net, rows) for net in nets], axis=0))


def net_score(net: dict[str, Any], rows: np.ndarray) -> np.ndarray:
    """One network's scores of ``rows`` (``bench/fit_weights.py`` fits them with this too)."""
    h = np.tanh(((rows - net["mu"]) / net["sd"]) @ net["w1"] + net["b1"])
    return np.asarray(h @ net["w2"] + net["b2"])


_SCORER: Scorer | None = None


def shipped_negation_scope(path: Path = SCORER_FILE) -> int:
    """The fitted negation scope, read alone: evidence for a refit on new features is built
    before the file's networks match them."""
    return int(json.loads(path.read_text(encoding="utf-8")).get("negation_scope", 0))


def scorer() -> Scorer:
    global _SCORER
    if _SCORER is None:
        _SCORER = Scorer()
    return _SCORER


def allowed_kinds(a: Attribute) -> frozenset[str]:
    """The span kinds an attribute may take (its kind is a hard gate)."""
    if a.kind == "number":
        return frozenset({"number", "range"})
    if a.kind == "date":
        return frozenset({"date"})
    if a.kind == "time":
        return frozenset({"time"})
    if a.kind == "datetime":
        return frozenset({"date", "time"})
    if a.kind == "ref" or a.format == "code":
        return frozenset({"code"})
    if a.format == "phone":
        return frozenset({"phone"})
    if a.format == "email":
        return frozenset({"email"})
    if a.format == "contact":
        return frozenset({"phone", "email"})
    if a.format == "address":
        return frozenset({"address", "text"})
    if a.kind in ("string", "list") and a.format in ("name", "place"):
        return frozenset({"text", "address"})
    if a.kind in ("string", "list"):
        # a free string may hold a duration or an amount as written ("1小时 - 2小时", "20元")
        return frozenset({"text", "address", "number", "range", "time"})
    return frozenset()  # enum, boolean: scored by their own rules


def _model_code(s: Span, a: Attribute) -> bool:
    """A code with a letter in it may be a free string's value too ("X-T5" names a camera; "4410"
    stays an amount or an id)."""
    free = a.kind in ("string", "list") and not a.format
    return free and s.kind == "code" and any(ch.isalpha() for ch in s.text)


@dataclass
class Candidate:
    """One possible value of one attribute, with its evidence."""

    attribute: str
    value: Any
    surface: str
    start: int
    end: int
    features: dict[str, float] = field(default_factory=dict)
    score: float = 0.0
    context: str = ""  # the span with its left context (what its vector was taken of)


@dataclass
class _AttrInfo:
    attr: Attribute
    label: str
    cue_terms: frozenset[str]  # roots of its name's, description's and aliases' words
    name_forms: tuple[str, ...]  # the name as it may stand in text ("人均消费", "number of beds")
    role: str
    kinds: frozenset[str]
    money: bool
    bool_parts: tuple[str, ...] = ()
    enum_words: dict[str, frozenset[str]] = field(default_factory=dict)
    absence: str | None = None  # the enum value that means "none" ("None" for no subtitles)
    paired: bool = False  # another attribute of a kind it takes has the opposite role
    key: bool = False  # the entity is known by it (its first key attribute)


@dataclass(frozen=True)
class _SpanFacts:
    """One span's attribute-independent evidence (``SchemaEvidence._span_facts``)."""

    around: frozenset[str]  # roots of the words on either side
    nearest: frozenset[str]  # roots of the word right next to it
    left: str  # its left context, lower-cased
    shape: dict[str, float]  # features of the span alone


@dataclass
class _Occupied:
    """Stretches of one message a yes/no word cannot stand in (computed once per message)."""

    typed: list[tuple[int, int]]  # typed values: dates, times, numbers, codes
    words: list[tuple[int, int]]  # occurrences of the schema's CJK words


def _opens_clause(text: str, start: int) -> bool:
    """Nothing but punctuation stands between the span and the start of its clause: where a
    note names what it is about ("Mochi is our cat", "Biscuit - beagle", "陈老师不上门")."""
    before = text[:start].rstrip()
    return not before or _punct(before[-1])


def _readable(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name).replace("_", " ").replace("-", " ").strip()


class SchemaEvidence:
    """Per-schema precomputation (labels, their vectors, cue words) and per-message scoring."""

    def __init__(self, schema: MemorySchema, embedder: Embedder | None) -> None:
        self.schema = schema
        self.lang: Language = schema.language
        self.embedder = embedder
        # how many words after a negation it still denies (fitted with the scorer)
        self.negation_scope = shipped_negation_scope()
        lx = self.lang.lex
        self._stop = self.lang.small_words
        # words that say "this is a yes/no attribute" ("whether", "是否") carry no content
        self._generic = self._terms(" ".join(lx.kind_words.get("boolean", ())))
        self.schema_terms = self._schema_terms()
        self._schema_names = frozenset(
            [*(e.name for e in schema.entities), *(x for e in schema.entities for x in e.aliases)]
            + [p for e in schema.entities for a in e.attributes for p in (a.name, *_parts(a.name))]
        )
        # longest first: a value trimmed of a schema word loses the longest one it ends with
        self._schema_cjk_words = sorted(
            {w for w in self._schema_names if has_cjk(w) and len(w) >= 2}, key=len, reverse=True
        )
        self.attrs: dict[str, dict[str, _AttrInfo]] = {e.name: self._entity_infos(e) for e in schema.entities}
        self._label_vecs = self._label_views([i for infos in self.attrs.values() for i in infos.values()])
        self._entity_labels = {e.name: e.description or _readable(e.name) for e in schema.entities}
        self._entity_vecs = self._encode_map(sorted(set(self._entity_labels.values())))
        self._name_suffixes = tuple(sorted(lx.name_suffixes, key=len, reverse=True))
        # CJK has no spaces: a span is bounded when a whole function word (or punctuation, or
        # the text's edge) stands next to it, not a character of one ("喜欢|北京…" vs "北|京…")
        cjk_function = [*lx.stopwords, *lx.fillers, *lx.prepositions, *lx.request_verbs, *lx.question_words]
        self._cjk_function = tuple(sorted({w for w in cjk_function if has_cjk(w)}, key=len, reverse=True))

    # --- schema-level ---------------------------------------------------------------------
    def _terms(self, text: str) -> frozenset[str]:
        return frozenset(t for t in search_terms(text, self._stop) if len(t) > 1 or has_cjk(t))

    def _is_schema_word(self, word: str) -> bool:
        terms = self._terms(word)
        return bool(terms) and terms <= self.schema_terms

    def _schema_terms(self) -> frozenset[str]:
        s = self.schema
        words: set[str] = set()
        for e in s.entities:
            words |= self._terms(_readable(e.name)) | {a.lower() for a in e.aliases}
            for a in e.attributes:
                # "WiFi" as written and as its parts ("wi fi"): either way it names the attribute
                words |= self._terms(_readable(a.name)) | self._terms(a.name.lower())
        for ev in s.event_types:
            words |= self._terms(ev.label)
        words |= self._terms(s.description)
        return frozenset(words)

    def _about_money(self, phrase: str, money_words: set[str]) -> bool:
        """A money word in the attribute's name or description, unless it counts something else
        ("amount of riders", "amount_of_days": a count; "amount of money", "amount due": money)."""
        links = "|".join(re.escape(w) for w in self.lang.lex.count_links)
        for m in re.finditer(r"[\w'-]+", phrase):
            if m.group(0) not in money_words:
                continue
            counted = re.match(rf"\s+(?:{links})\s+([\w'-]+)", phrase[m.end() :]) if links else None
            if counted is None or counted.group(1) in money_words or counted.group(1) in self._stop:
                return True
        return False

    def _entity_infos(self, ent: EntityType) -> dict[str, _AttrInfo]:
        lx = self.lang.lex
        origin = {w.lower() for w in lx.origin_cues}
        dest = {w.lower() for w in lx.destination_cues}
        money_words = {w.lower() for w in lx.kind_words.get("money", ())}
        infos = {}
        # name parts shared by several attributes ("酒店设施-…", "number_…") do not distinguish
        part_count: dict[str, int] = {}
        for a in ent.value_attributes:
            for p in _parts(a.name):
                part_count[p] = part_count.get(p, 0) + 1
        for a in ent.value_attributes:
            label = a.label if a.description else _readable(a.name)
            phrase = f" {_readable(a.name).lower()} {a.description.lower()} "
            # the name's own cue decides the role; the description only when the name has none
            # ("rental_pickup_date: Date *to* get rental car" is a pick-up, not a destination)
            role = _role_of(_readable(a.name), origin, dest) or _role_of(a.description, origin, dest)
            cue = self._terms(f"{_readable(a.name)} {a.description} {' '.join(a.aliases)}") - self._generic
            # the name as it may stand right before its value: whole, readable, or a distinctive
            # part that is no function word ("人均消费", "number of beds", "rooms")
            forms = tuple(
                dict.fromkeys(
                    [a.name.lower(), _readable(a.name).lower(), *(x.lower() for x in a.aliases)]
                    + [p for p in _parts(a.name) if p not in self._stop and len(p) > 2 and part_count.get(p, 0) < 3]
                )
            )
            bool_parts = tuple(
                p for p in _parts(a.name) if part_count.get(p, 0) < 3 and p.lower() not in self._stop and len(p) > 1
            )
            enum_words: dict[str, frozenset[str]] = {}
            absence = None
            if a.kind == "enum":
                none = {w.lower() for w in lx.absence_values}
                absence = next((v.value for v in a.values if v.value.lower() in none), None)
                all_terms = [self._terms(v.value) for v in a.values]
                for v, terms in zip(a.values, all_terms):
                    others = set().union(*(t for t in all_terms if t is not terms)) if len(all_terms) > 1 else set()
                    enum_words[v.value] = frozenset(terms - others)
            infos[a.name] = _AttrInfo(
                attr=a,
                label=label,
                cue_terms=self.lang.roots(frozenset(cue)),
                name_forms=forms,
                role=role,
                kinds=allowed_kinds(a),
                # only a number is an amount of money: "Name of individual receiving money" is a name
                money=a.kind == "number"
                and (
                    self._about_money(phrase, money_words)
                    or bool(a.unit and any(u.lower() in money_words for u in a.unit))
                ),
                bool_parts=bool_parts,
                enum_words=enum_words,
                absence=absence,
                key=bool(ent.key) and a.name == ent.key[0],
            )
        opposite = {"origin": "destination", "destination": "origin"}
        for info in infos.values():
            info.paired = any(
                other.role == opposite.get(info.role) and other.kinds & info.kinds for other in infos.values()
            )
        return infos

    def _label_views(self, infos: list[_AttrInfo]) -> dict[str, np.ndarray]:
        """Each attribute's label vector: the mean of its description's and its readable name's
        (normalised), so that neither one wording decides how well a value fits it."""
        views = {i.label: sorted({i.label, _readable(i.attr.name)}) for i in infos}
        vecs = self._encode_map(sorted({t for ts in views.values() for t in ts}))
        out = {}
        for label, texts in views.items():
            if all(t in vecs for t in texts):
                v = np.mean([vecs[t] for t in texts], axis=0)
                out[label] = v / (np.linalg.norm(v) or 1.0)
        return out

    def _encode_map(self, texts: list[str]) -> dict[str, np.ndarray]:
        if self.embedder is None or not texts:
            return {}
        try:
            vecs = self.embedder.encode(texts)
        except Exception:  # noqa: BLE001 - similarity is one signal among several
            return {}
        return dict(zip(texts, vecs))

    # --- per message -------------------------------------------------------------------------
    def candidates(
        self,
        entity: str,
        text: str,
        spans: list[Span],
        score: bool = True,
        bank: ExampleBank | None = None,
        known: frozenset[str] | None = None,
        known_other: frozenset[str] | None = None,
    ) -> dict[str, list[Candidate]]:
        """Every admissible (attribute → candidates) of ``entity`` for this message, scored
        (``score=False``: features only, for fitting the scorer); ``bank``: corrected examples
        of the schema, whose value contexts add to the scores; ``known``: the keys of the
        session's entities of this type, lower-case (a span naming one is likely the key);
        ``known_other``: those of its entities of other types (a span naming one is another
        thing the message speaks of: the bike a service was done on)."""
        infos = self.attrs[entity]
        low = text.lower()
        kind_count: dict[str, int] = {}
        for s in spans:
            kind_count[s.kind] = kind_count.get(s.kind, 0) + 1
        takers: dict[str, int] = {}
        for info in infos.values():
            for k in info.kinds:
                takers[k] = takers.get(k, 0) + 1
        text_terms = self._terms(text)
        trimmed, modifiers = self._trimmed(text, spans)
        spans = spans + trimmed
        ctx = {s: f"{s.left} {s.text}".strip() if not has_cjk(s.text) else f"{s.left}{s.text}" for s in spans}
        counted = {s: _counted(s, self._stop) for s in spans if s.kind in ("number", "range") and not s.money}
        texts = sorted({*ctx.values(), *(s.text for s in spans), *counted.values()})
        vecs = self._encode_map(texts)
        # no encoder, or it failed: the scorer's networks fitted without similarity
        plain = self.embedder is None or (bool(texts) and not vecs)
        # where a yes/no word cannot stand: inside a typed value, or inside/across a schema word
        occupied = _Occupied(
            typed=[(s.start, s.end) for s in spans if s.kind != "text"],
            words=[(i, i + len(w)) for w in self._schema_cjk_words for i in _occurrences(low, w.lower())],
        )
        cased = self.lang.capitalises_names(text)
        names = [(s.start, s.end) for s in spans if s.kind == "text" and (s.capital or s.quoted)]
        numbers = [(s.start, s.end) for s in spans if s.kind in ("number", "range")]
        beside_number = {
            s
            for s in spans
            if s.kind == "text"
            and any(
                (b <= s.start and not text[b : s.start].strip()) or (a >= s.end and not text[s.end : a].strip())
                for a, b in numbers
            )
        }
        # a piece of a longer name ("Spirit" of "Spirit Island", "Angel" of "Whispering Angel")
        inside_name = {
            s
            for s in spans
            if s.kind == "text" and any(a <= s.start and s.end <= b and b - a > s.end - s.start for a, b in names)
        }
        out: dict[str, list[Candidate]] = {}
        facts: dict[Span, _SpanFacts] = {}
        for name, info in infos.items():
            cands: list[Candidate] = []
            a = info.attr
            if a.kind == "boolean":
                cands += self._boolean(info, text, low, occupied)
            elif a.kind == "enum":
                cands += self._enum(info, text, low, text_terms, spans, vecs)
            else:
                label_vec = self._label_vecs.get(info.label)
                entity_vec = self._entity_vecs.get(self._entity_labels[entity])
                for s in spans:
                    if s.kind not in info.kinds and not _model_code(s, a):
                        continue
                    if s not in facts:
                        facts[s] = self._span_facts(s, s in modifiers)
                    f = self._features(info, s, facts[s], label_vec, vecs.get(ctx[s]), vecs.get(s.text))
                    f["key_attr"] = float(info.key)
                    if info.key and known:
                        f["known_key"] = float(s.text.lower() in known)
                    if known_other:
                        f["other_key"] = float(s.text.lower() in known_other)
                    if s.kind in ("text", "address"):
                        f["clause_start"] = float(_opens_clause(text, s.start))
                        f["cut"] = float(s.cut)
                        f["inside_name"] = float(s in inside_name)
                        f["beside_number"] = float(s in beside_number)
                    if entity_vec is not None and s.text in vecs:
                        f["sim_entity"] = float(np.dot(entity_vec, vecs[s.text]))
                    if s in counted and label_vec is not None and counted[s] in vecs:
                        f["sim_counted"] = float(np.dot(label_vec, vecs[counted[s]]))
                    if s.kind != "text":
                        f["unique_kind"] = float(takers.get(s.kind, 0) == 1)
                        f["only_span"] = float(kind_count.get(s.kind, 0) == 1)
                    value: Any = s.value if s.kind != "text" else s.text
                    cands.append(Candidate(name, value, s.text, s.start, s.end, f, context=ctx[s]))
            if cands:
                out[name] = cands
        _margins(out)
        flat = [c for cs in out.values() for c in cs]
        if flat and score:
            rows = np.array([[c.features.get(f, 0.0) for f in FEATURES] for c in flat])
            scores = scorer().score(rows, plain=plain)
            for c, sc in zip(flat, scores):
                c.score = float(sc)
        if bank is not None and score:
            w = scorer().taught
            taught = self.taught_evidence(bank, text, out, vecs)
            for name, cs in out.items():
                for c, (sim, same, cue) in zip(cs, taught[name]):
                    c.score += w["context"] * max(0.0, sim - w["floor"]) + w["value"] * same + w["cue"] * cue
        # candidates the attribute cannot take, dropped after scoring so that no other attribute's
        # margins move
        for name, cs in out.items():
            a = infos[name].attr
            if a.needs_word and not any(find_word(low, w) >= 0 for w in infos[name].name_forms):
                cs.clear()  # "moved to Portland in January" says no birthday
            if units := tuple(u.lower() for u in a.unit):
                # a number of another unit is not this one's: "850 dollars", "20 minutes" are no age
                cs[:] = [c for c in cs if _in_unit(c, units, self._stop, text)]
            if a.kind in ("string", "list") and not a.format:
                # a free string holds an amount as written with its unit ("20元", "1小时 - 2小时",
                # "460 dollars"); a bare count ("two", "8" of "8 kilometres") is no such value
                cs[:] = [c for c in cs if not _bare_number(c)]
            if cased and a.format == "name":
                # a writer who capitalises names writes none in lower case: "Long time no *talk*"
                # holds no person where "Hey Sam!" is capitalised (SGD all turns, no model: slot P
                # 0.893 → 0.895, no service lower; its lower-case writers capitalise no name)
                cs[:] = [c for c in cs if not (c.surface.islower() and not has_cjk(c.surface))]
            if cased and a.format == "address":
                # nor a street address as one lower-case word without a number ("nobody *emails*
                # me", "an *online* shop")
                cs[:] = [c for c in cs if not (c.surface.islower() and c.surface.isalpha())]
            cs.sort(key=lambda c: -c.score)
        return out

    def taught_evidence(
        self, bank: ExampleBank, text: str, cands: dict[str, list[Candidate]], vecs: dict[str, np.ndarray]
    ) -> dict[str, list[tuple[float, float, float]]]:
        """Per attribute, per candidate: (context similarity to the examples' values, 1 if a
        person gave this value, the share of the examples' values after the same word)."""
        cue_at: dict[int, str] = {}  # the word before each start, read once for all attributes
        out: dict[str, list[tuple[float, float, float]]] = {}
        for name, cs in cands.items():
            rows = out.setdefault(name, [])
            for c in cs:
                sim, same = bank.attribute_evidence(name, vecs.get(c.context), c.value)
                # a span the encoder only likens to a value: the word before it says which
                # attribute words fill, not that a name is a language (sgd-dev Media_2: "with
                # *Coral Browne*" as Mandarin subtitles)
                cue = 0.0
                if "enum_sim" not in c.features:
                    if c.start not in cue_at:
                        cue_at[c.start] = taught_cue(self.lang, text, c.start)
                    cue = bank.cue_share(name, cue_at[c.start])
                rows.append((sim, same, cue))
        return out

    def encode_contexts(self, cands: dict[str, list[Candidate]]) -> dict[str, np.ndarray]:
        """The vectors of the candidates' contexts (what ``candidates`` encodes; for fitting)."""
        return self._encode_map(sorted({c.context for cs in cands.values() for c in cs}))

    def _trimmed(self, text: str, spans: list[Span]) -> tuple[list[Span], frozenset[Span]]:
        """CJK text spans with a schema word stripped from either end ("舒适型酒店" → "舒适型",
        "景点航空航天博物馆" → "航空航天博物馆"): the schema's own words are not part of a value.
        Also: the ones that stood before the schema word, its modifiers."""
        words = self._schema_cjk_words
        out, modifiers = [], []
        for s in spans:
            if s.kind != "text" or not has_cjk(s.text):
                continue
            for w in words:
                if s.text.endswith(w) and len(s.text) - len(w) >= 2:
                    head = replace(s, end=s.end - len(w), text=s.text[: -len(w)], value=s.text[: -len(w)])
                    out.append(head)
                    modifiers.append(head)
                if s.text.startswith(w) and len(s.text) - len(w) >= 2:
                    out.append(replace(s, start=s.start + len(w), text=s.text[len(w) :], value=s.text[len(w) :]))
        return out, frozenset(modifiers)

    def _span_facts(self, s: Span, modifier: bool = False) -> _SpanFacts:
        """What scoring needs of a span whatever the attribute: the roots of the words around it
        and next to it, and the features of its shape (computed once per span, not per pair)."""
        around = self.lang.roots(self._terms(f"{s.left} {s.right}"))
        nearest = self._terms(" ".join(s.left.split()[-1:]) + " " + " ".join(s.right.split()[:1]))
        if has_cjk(s.left + s.right):
            nearest = self._terms(s.left[-4:] + " " + s.right[:4])
        f: dict[str, float] = {"bias": 1.0}
        if s.kind in ("text", "address"):
            f["schema_word"] = float(self._is_schema_word(s.text))
            f["capital"] = float(s.capital)
            # the shape of a proper name: capitalised, or a CJK piece ending with a name word
            # ("…饭店", "…博物馆") or carrying a branch in brackets ("海底捞火锅(西单店)")
            f["name_shape"] = float(
                s.capital
                or (has_cjk(s.text) and (s.text.endswith(self._name_suffixes) or s.text.endswith((")", "）"))))
            )
            if has_cjk(s.text):
                before, after = s.left.rstrip(), s.right.lstrip()
                f["bounded"] = float(
                    (not after or _punct(after[0]) or after.startswith(self._cjk_function))
                    and (not before or _punct(before[-1]) or before.endswith(self._cjk_function) or bool(s.cue))
                )
            else:
                nxt = s.right.split()[:1]
                prev = s.left.split()[-1:]
                f["bounded"] = float(
                    (not nxt or nxt[0].lower() in self._stop)
                    and (not prev or prev[0].lower() in self._stop or bool(s.cue))
                )
            f["verbal"] = float(s.verbal or self.lang.verbal(s.text, s.right))
            f["quoted"] = float(s.quoted)
            f["length"] = float(max(0, s.words - 1))
            # a value said as a modifier of the schema's own noun: the word after it ("a *comedy*
            # movie"), or trimmed off it ("*舒适型*酒店" — what is left need not be CJK)
            nxt = s.right.split()[:1]
            f["modifier"] = float(
                modifier
                or (not has_cjk(s.text) and bool(nxt) and self._is_schema_word(nxt[0]) and not f["schema_word"])
            )
        else:
            f["typed"] = 1.0
        f["prep"] = float(bool(s.cue))
        if s.kind in ("number", "range"):
            f["written"] = float(s.written)
        return _SpanFacts(around=around, nearest=self.lang.roots(nearest), left=s.left.lower(), shape=f)

    def _features(
        self, info: _AttrInfo, s: Span, facts: _SpanFacts, label_vec: Any, ctx_vec: Any, bare_vec: Any
    ) -> dict[str, float]:
        f = dict(facts.shape)
        if label_vec is not None and ctx_vec is not None:
            f["sim_ctx"] = float(np.dot(label_vec, ctx_vec))
        if label_vec is not None and bare_vec is not None:
            f["sim_bare"] = float(np.dot(label_vec, bare_vec))
        f["cue"] = min(1.0, len(facts.around & info.cue_terms) / 2)
        # the word right next to it is one of the attribute's words ("3 *tickets*", "*人均消费*是")
        f["near_cue"] = float(bool(facts.nearest & info.cue_terms))
        f["adjacent"] = float(_ends_with_any(facts.left, info.name_forms))
        f.update(_role_features(info, s.role))
        if s.kind in ("text", "address"):
            f["name_attr"] = float(info.attr.format == "name") * f["name_shape"]
        # Chinese compounds end in their head: a kind of 酒店类型 is a "…型" (经济型, 舒适型); a
        # two-character word on the head is a noun of its own (车型, "car model"), no value
        name = info.attr.name
        f["head_char"] = float(
            has_cjk(name[-1:])
            and len(name) > 1
            and len(s.text) > 2
            and s.text.endswith(name[-1])
            and not f.get("schema_word")
        )
        if s.kind in ("number", "range"):
            f["money"] = 1.0 if s.money and info.money else (-1.0 if s.money else 0.0)
            f["plain_for_money"] = float(info.money and not s.money)
        return f

    def _boolean(self, info: _AttrInfo, text: str, low: str, occupied: _Occupied) -> list[Candidate]:
        """Yes/no from the attribute's own words in the message (all of them), else from one of
        its aliases (the schema's other words for the same condition: "spayed" for neutered):
        true unless negated right before, nothing when asked ("有没有会议室"). An occurrence
        says nothing when it lies inside a typed value ("*next* Thursday" is a date, not
        arrives_next_day) or inside or across another schema word ("租车" in "出租车",
        "早餐服务" in "早餐服务免费")."""
        # the name as a phrase first: a negation before it denies it all ("no longer *under
        # warranty*", where "under" is no part of its own)
        phrase = _readable(info.attr.name).lower()
        if " " in phrase and (found := self._yes_no(info, text, low, phrase, occupied)) is not None:
            return found
        whole = "".join(info.bool_parts).lower()  # "WiFi" is its parts written as one word
        if self._positions(low, whole) or all(self._positions(low, p.lower()) for p in info.bool_parts):
            for part in info.bool_parts:
                found = self._yes_no(info, text, low, part.lower(), occupied)
                if found is not None:
                    return found
            return []
        for alias in info.attr.aliases:  # "arrive in Philadelphia" does not state arrives_next_day
            found = self._yes_no(info, text, low, alias.lower(), occupied)
            if found is not None:
                return found
        return []

    def _stem(self, part: str) -> str:
        """What an occurrence of a yes/no word part must start with: a latin part without its
        last two letters ("arriv" finds "arrive", "arrives"), or a word's root when shorter
        ("shar" finds "share", "shared", "sharing"); CJK whole."""
        if not part.isascii():
            return part
        cut = part if len(part) <= 4 else part[: max(4, len(part) - 2)]
        root = self.lang.root(part) if " " not in part else cut
        return root if len(root) < len(cut) else cut

    def _positions(self, low: str, part: str) -> list[int]:
        """Where ``part`` stands in ``low``: a latin part by its stem at a word start, CJK anywhere."""
        if not part:
            return []
        if part.isascii():
            return [m.start() for m in re.finditer(rf"(?<![a-z0-9]){re.escape(self._stem(part))}", low)]
        return _occurrences(low, part)

    def _yes_no(self, info: _AttrInfo, text: str, low: str, word: str, occupied: _Occupied) -> list[Candidate] | None:
        """The yes/no ``word`` says at its first free occurrence ([] when asked; None when it
        stands free nowhere)."""
        for pos in self._positions(low, word):
            end = _part_end(low, pos, self._stem(word))
            if any(a <= pos and end <= b for a, b in occupied.typed):
                continue
            if any(
                a < end and pos < b and (a, b) != (pos, end) and not (pos <= a and b <= end) for a, b in occupied.words
            ):
                continue
            if self.lang.asked_at(low, pos):
                return []
            value = not self.lang.negated_at(low, pos, self.negation_scope)
            return [Candidate(info.attr.name, value, text[pos:end], pos, end, {"bias": 1.0, "boolean": 1.0})]
        return None

    def _enum(
        self,
        info: _AttrInfo,
        text: str,
        low: str,
        text_terms: frozenset[str],
        spans: list[Span],
        vecs: dict[str, np.ndarray],
    ) -> list[Candidate]:
        a = info.attr
        out: list[Candidate] = []
        if info.absence is not None:
            # the attribute's own word denied ("with *no subtitles*", "不要字幕"): the value
            # that means none, with the evidence a denied yes/no word has
            for part in info.bool_parts:
                for pos in self._positions(low, part.lower()):
                    if self.lang.negated_at(low, pos, self.negation_scope) and not self.lang.asked_at(low, pos):
                        end = _part_end(low, pos, self._stem(part.lower()))
                        feats = {"bias": 1.0, "boolean": 1.0}
                        return [Candidate(a.name, info.absence, text[pos:end], pos, end, feats)]
        value_vecs = self._encode_map([v.value for v in a.values])
        # each text span's similarity to each value, once (a value's margin compares it with all)
        span_sims = {
            s: {v.value: float(np.dot(value_vecs[v.value], vecs[s.text])) for v in a.values if v.value in value_vecs}
            for s in spans
            if s.kind == "text" and s.text in vecs and not self.lang.negated_at(low, s.start, self.negation_scope)
        }
        for v in a.values:
            best: Candidate | None = None
            forms = [(form, _find_exact(low, form.lower())) for form in (v.value, *v.aliases)]
            if any(pos >= 0 and self.lang.negated_at(low, pos, self.negation_scope) for _, pos in forms):
                continue  # the value denied ("isn't *for sale*", "不*带走*") is not the value
            for form, pos in forms:
                if pos >= 0:
                    best = Candidate(
                        a.name,
                        v.value,
                        text[pos : pos + len(form)],
                        pos,
                        pos + len(form),
                        {"bias": 1.0, "enum_exact": 1.0} | _role_features(info, cue_before(self.lang, text, pos)[1]),
                    )
                    break
            if best is None and info.enum_words.get(v.value):
                hit = info.enum_words[v.value] & text_terms
                word = sorted(hit, key=len)[-1] if hit else ""
                pos = max(0, low.find(word))
                if hit and not self.lang.negated_at(low, pos, self.negation_scope):
                    share = len(hit) / len(info.enum_words[v.value])
                    best = Candidate(
                        a.name,
                        v.value,
                        text[pos : pos + len(word)],
                        pos,
                        pos + len(word),
                        {"bias": 1.0, "enum_words": share} | _role_features(info, cue_before(self.lang, text, pos)[1]),
                    )
            if best is None and v.value in value_vecs:
                # the span this value fits best among those it fits better than any other value
                # does: words another value fits better are that value's evidence ("music
                # events" → Music, never Sports — the scorer alone ranked Sports at 1.17 above
                # the exact Music at 1.01); the margin says how much better ("Baseball Games":
                # Sports 0.56, Music 0.31); a place name fits none
                fits = []
                for s, sims in span_sims.items():
                    sim = sims[v.value]
                    rivals = [sims[o.value] for o in a.values if o is not v]
                    margin = sim - max(rivals) if rivals else 0.0
                    if margin >= 0:
                        fits.append((sim, margin, s))
                if fits:
                    sim, margin, s = max(fits, key=lambda x: x[0])
                    best = Candidate(
                        a.name,
                        v.value,
                        s.text,
                        s.start,
                        s.end,
                        {"bias": 1.0, "enum_sim": sim, "enum_margin": margin} | _role_features(info, s.role),
                    )
            if best is not None:
                out.append(best)
        # a value said as part of a longer one ("Economy" in "Premium Economy") is that one's
        exact = [c for c in out if "enum_exact" in c.features]
        return [
            c
            for c in out
            if not any(o.start <= c.start and c.end <= o.end and o.end - o.start > c.end - c.start for o in exact)
        ]


def _role_of(phrase: str, origin: set[str], dest: set[str]) -> str:
    """ "origin" or "destination" when ``phrase`` holds cues of that role only, else ""."""
    words = set(re.findall(r"[\w'-]+", phrase.lower()))
    padded = f" {phrase.lower()} "
    is_origin = bool(words & origin) or any(f" {w} " in padded for w in origin if " " in w)
    is_dest = bool(words & dest) or any(f" {w} " in padded for w in dest if " " in w)
    return "origin" if is_origin and not is_dest else "destination" if is_dest and not is_origin else ""


def _role_features(info: _AttrInfo, span_role: str) -> dict[str, float]:
    """``role`` and ``role_default`` of a value whose cue has ``span_role`` ("" when none)."""
    if not info.role:
        return {}
    if span_role in ("origin", "destination"):
        return {"role": 1.0 if span_role == info.role else -1.0}
    if info.paired:
        return {"role_default": 1.0 if info.role == "origin" else -1.0}
    return {}


def _punct(ch: str) -> bool:
    """Punctuation (not a letter, digit or CJK character): a boundary of a CJK value."""
    return not ch.isalnum()


def _counted(s: Span, stop: frozenset[str]) -> str:
    """A number with the words that say what it counts ("two *people*", "4 *of us*", "3*晚*"):
    the thing counted tells which attribute takes it (travelers, not transfers), and it stands
    after the number, outside the left-hand context the other similarities read. The words run
    to the first content word ("two *bedroom* apartment": the apartment is not what is counted)."""
    if has_cjk(s.right[:1]):
        return f"{s.text}{s.right[:3]}"
    after: list[str] = []
    for word in re.findall(r"[\w'-]+", s.right)[:2]:
        after.append(word)
        if word.lower() not in stop:
            break
    return " ".join([s.text, *after])


def _bare_number(c: Candidate) -> bool:
    """Whether ``c`` is a number written without a unit: digits or number words only."""
    if not isinstance(c.value, (int, float)) or c.features.get("money", 0.0) > 0:
        return False
    return re.fullmatch(r"[\d.,\s]+|[^\W\d_]+", c.surface.strip()) is not None and not has_cjk(c.surface)


def _in_unit(c: Candidate, units: tuple[str, ...], stop: frozenset[str], text: str) -> bool:
    """Whether the number ``c`` is said in one of ``units`` (``said_in_unit``); an amount of
    money is said in none but money."""
    if not isinstance(c.value, (int, float)):
        return True
    if c.features.get("money", 0.0) < 0:
        return False  # an amount of money, for an attribute that is none
    return said_in_unit(text, c.end, units, stop)


def _parts(name: str) -> list[str]:
    """A name's distinctive pieces: "has_wifi" → ["has", "wifi"], "酒店设施-早餐服务" → ["酒店设施", "早餐服务"]."""
    readable = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name)
    return [p for p in re.split(r"[_\-\s]+", readable.lower()) if p]


def _occurrences(low: str, word: str) -> list[int]:
    out, pos = [], low.find(word)
    while pos >= 0 and word:
        out.append(pos)
        pos = low.find(word, pos + 1)
    return out


def _word_end(low: str, end: int) -> int:
    """The end of the latin word that reaches ``end`` ("wi" in "wifi" → the end of "wifi")."""
    while end < len(low) and (low[end].isascii() and low[end].isalnum()):
        end += 1
    return end


def _part_end(low: str, pos: int, part: str) -> int:
    """Where an occurrence of a yes/no word part at ``pos`` ends: a latin part takes the rest
    of its word ("wi" → "wifi"), a CJK part only itself."""
    return _word_end(low, pos + len(part)) if part.isascii() else pos + len(part)


def _find_exact(low: str, phrase: str) -> int:
    """Where ``phrase`` stands in ``low`` as whole words (CJK: anywhere)."""
    if not phrase:
        return -1
    if phrase.isascii():
        m = re.search(rf"(?<![a-z0-9]){re.escape(phrase)}(?![a-z0-9])", low)
        return m.start() if m else -1
    return low.find(phrase)


def _ends_with_any(left: str, forms: tuple[str, ...]) -> bool:
    """``left`` ends with one of ``forms`` as whole words (CJK: as characters)."""
    for form in forms:
        if not form:
            continue
        if form.isascii():
            if re.search(rf"(?<![a-z0-9]){re.escape(form)}$", left):
                return True
        elif left.endswith(form):
            return True
    return False


def _margins(cands: dict[str, list[Candidate]]) -> None:
    """``sim_margin``: how much better this attribute's label fits the span than the best other
    attribute that could take the same span — "San Francisco" fits "City in which the journey
    originates" better than "Number of the airport flying out from"."""
    by_span: dict[tuple[int, int], list[tuple[str, float]]] = {}
    for name, cs in cands.items():
        for c in cs:
            fit = c.features.get("sim_ctx", 0.0) + c.features.get("sim_bare", 0.0)
            by_span.setdefault((c.start, c.end), []).append((name, fit))
    for name, cs in cands.items():
        for c in cs:
            if "sim_ctx" not in c.features:
                continue
            fit = c.features.get("sim_ctx", 0.0) + c.features.get("sim_bare", 0.0)
            others = [f for n, f in by_span.get((c.start, c.end), []) if n != name]
            c.features["sim_margin"] = fit - max(others) if others else 0.2
