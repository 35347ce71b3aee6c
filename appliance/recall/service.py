"""The recall path: a question → channels → one fused ranking → the context an agent reads.

1. ``facts.question_facts`` reads the question: its keys (names, codes), time range, the
   attributes it asks about, whether it asks for recent things;
2. channels, each a ranked list of memories:
   * **structured** — the parsed ``RecallQuery`` compiled to SQL (only when it constrains
     something: no unfiltered "most recent" list unless the question asks for recent things);
   * **entity** — the memories of stored entities whose id or values match the question's keys;
   * **time** — memories about a day in the question's range (message day or stated date);
   * **lexical** — BM25 over memory text and values (the store's index);
   * **semantic** — sentence-vector neighbours;
   lexical and semantic are limited to the time range when the question has one;
   * **reply** — in a transcript of labelled speakers, the next turn by another speaker after a
     question among the best hits so far (its answer);
   * **follow** — in such a transcript, the turn after each of the three best hits, and the
     answer to it when it asks back (weight 0.5);
3. ``fusion.fuse`` — weighted reciprocal-rank fusion, each memory once with all its paths;
4. "not found" — a key that matches nothing stored, or an asked attribute the named entity
   lacks and no memory of it mentions, or a question whose rarest term occurs nowhere: the
   context says so first, and lists the rest as neighbours, never as the answer;
5. ``context.compose``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime
from functools import lru_cache
from typing import Any

from ..domain.records import CONVERSATION_GAP, Entity, MemoryRecord, RankedMemory, RecallHit, RecallQuery, RecallResult
from ..domain.schema import MemorySchema
from ..extract.evidence import allowed_kinds
from ..extract.spans import find_spans
from ..lang import Language, has_cjk
from ..lang.dates import find_dates
from ..lang.numbers import said_in_unit
from ..lang.segment import cjk_words, index_terms
from ..lang.speakers import opening, speaker
from ..model.embed import Embedder
from ..store import MemoryStore
from .attribution import content_words, names, tells_of
from .context import WEAK_PATH, compose, summarise
from .facts import QuestionFacts, question_facts
from .fusion import SHIPPED, Fused, fuse, text_scores, within_reach
from .question import ParsedQuestion
from .weights import RecallWeights

__all__ = ["RecallService", "TOP_K", "CHANNEL_DEPTH"]

TOP_K = 10  # memories in the fused ranking the context shows
CHANNEL_DEPTH = 30  # memories each channel contributes before fusion
# the best hits whose replies are read (two-friends conversation, hit@5 with the 0 / 3 / 5 / 10
# best: 0.65 / 0.70 / 0.73 / 0.73; the other conversations and SGD unchanged)
REPLY_SOURCES = 5
# the best hits whose next turns are read (two-friends conversations, 69 questions: hit@5 with the
# 0 / 2 / 3 / 5 best at weight 0.5: 0.72 / 0.78 / 0.78 / 0.78; weight 0.3 / 0.5 / 1 at 3: hit@5
# 0.78 each, hit@10 0.86 / 0.86 / 0.83; the turn *before* a best hit too: 0.77, MRR of all five
# conversations 0.64 → 0.60; the one-user conversations have no labels and do not change)
FOLLOW_SOURCES = 3
# memories one question word may hold for "told of another speaker" to decide: beyond it the
# word is too common to read every memory of, and nothing is said
ATTRIBUTION_DEPTH = 100
ATTRIBUTE_ANSWERS = 3  # entities listed as the answer to a question asking for an attribute
_TEXT = ("lexical", "semantic")  # the channels that read the memory's text against the question's


class RecallService:
    def __init__(self, store: MemoryStore, embedder: Embedder | None, weights: RecallWeights = SHIPPED) -> None:
        self.store = store
        self.embedder = embedder
        self.tuning = weights
        self.weights = dict(weights.channels_for(embedder.name if embedder is not None else None))
        # cosines of the active encoder (semantic recall; the "not stored" rule): a neighbour
        # takes part in fusion from ``min_score``, fills a short list from ``weak_score``
        self.cuts = weights.cuts(embedder.name if embedder is not None else "use3")

    def query(self, schema: MemorySchema, q: RecallQuery, session_id: str, question: str = "") -> RecallResult:
        """Run a structured query (no model involved)."""
        sql, params, hits = self.store.run_query(schema, q, session_id)
        return RecallResult(question=question, query=q, sql=sql, params=params, hits=hits, context=summarise(hits))

    def recall(
        self,
        schema: MemorySchema,
        parsed: ParsedQuestion,
        question: str,
        session_id: str,
        now: datetime | None = None,
    ) -> RecallResult:
        """Everything after parsing: channels, fusion, not-found, context."""
        now = now or datetime.now(UTC)
        query = parsed.query or RecallQuery()
        facts = question_facts(schema, question, now)
        scope = None if query.all_sessions else session_id
        channels: dict[str, list[str]] = {}
        answer: list[RecallHit] = []
        sql, params = "", []  # type: ignore[var-annotated]
        if _constrains(query) or facts.recent:
            sql, params, hits = self.store.run_query(schema, query, session_id)
            if not hits and query.chain:  # nothing at the end of the path: show its start
                _, _, hits = self.store.run_query(
                    schema, query.model_copy(update={"hop": None, "hops": []}), session_id
                )
                for h in hits:
                    h.path = "structured (path start)"
            answer += hits
            channels["structured"] = [m.memory_id for h in hits for m in h.memories]
        probes = facts.keys + facts.pieces
        matched = self.store.entities.matching(scope, probes) if probes else []
        matched_keys = {key for _, key, _ in matched}
        named = [e for e, _, _ in matched]
        per: dict[tuple[str, str], list[MemoryRecord]] = {}
        if named:
            per = self.store.records.for_entities(scope, [(e.type, e.id) for e in named], per_entity=CHANNEL_DEPTH)
            known = {(h.entity.type, h.entity.id) for h in answer}
            answer += [
                RecallHit(entity=e, memories=per.get((e.type, e.id), [])[:3], path="entity")
                for e in named[:3]
                if (e.type, e.id) not in known
            ]
        if facts.attributes:
            holders = self.store.records.holding(scope, facts.attributes, CHANNEL_DEPTH)
            # then memories holding a value of the same shape (a date for a date) under a sibling
            # attribute: a value filed under the wrong one of two alike attributes is still found
            alike = self.store.records.holding(scope, _alike(schema, facts.attributes), CHANNEL_DEPTH)
            channels["attribute"] = list(dict.fromkeys([*holders, *alike]))[:CHANNEL_DEPTH]
        period = facts.range
        if facts.range is not None:
            channels["time"] = self.store.days.within(scope, facts.range[0], facts.range[1], limit=CHANNEL_DEPTH)
            if not channels["time"]:
                # nothing is stored about those days: that is the answer, and the words are
                # searched on every day for the neighbours shown beside it
                period = None
        lexical = self.store.lexical.search(
            scope, facts.terms, CHANNEL_DEPTH, period, self.tuning.bm25_k1, self.tuning.bm25_b
        )
        # a lexical hit scoring below a share of the channel's best takes no part in rank fusion,
        # which ignores score gaps: in a chat where a speaker's name is in half the turns, turns
        # holding the name alone (BM25 0.7) ranked next to the one holding the asked word (4.9)
        channels["lexical"] = within_reach(lexical, self.tuning.lexical_reach)
        top_semantic = 0.0
        weak: list[str] = []
        close: list[tuple[str, float]] = []  # the neighbours close enough to take part in fusion
        if self.embedder is not None:
            try:
                vec = self.embedder.encode_query([question])[0]
                found = self.store.vectors.search(scope, vec, CHANNEL_DEPTH, self.cuts.weak_score, period)
                close = [(m, score) for m, score in found if score >= self.cuts.min_score]
                channels["semantic"] = [m for m, _ in close]
                weak = [m for m, score in found if score < self.cuts.min_score]
                top_semantic = found[0][1] if found else 0.0
            except Exception:  # noqa: BLE001 - the other channels stand on their own
                pass
        channels["text"] = text_scores(lexical, close, self.tuning.text_lexical_weight)
        if named:
            # a named entity's memories, the ones the text channels rank first first, then the
            # newest: a person named in half the conversation ("Nora") otherwise lists her latest
            # small talk as evidence for every question about her
            relevance = {f.memory_id: i for i, f in enumerate(fuse({k: channels[k] for k in _TEXT if k in channels}))}
            own = list(dict.fromkeys(m.memory_id for e in named for m in per.get((e.type, e.id), [])))
            channels["entity"] = sorted(own, key=lambda m: relevance.get(m, len(relevance)))
        if (shaped := _shape_test(schema, facts)) is not None:
            # among the candidates so far, the memories stating what the question asks for, newest
            # first
            pool = [f.memory_id for f in self._fuse(channels)[:CHANNEL_DEPTH]]
            channels["shape"] = [
                r.memory_id
                for r in sorted(self.store.records.by_ids(pool), key=lambda r: r.timestamp, reverse=True)
                if shaped(r)
            ]
        fused = self._fuse(channels)
        texts: dict[str, str] = {}  # memory id → text, read once for the reply and follow channels
        if replies := self._replies(schema, self._told(fused[:REPLY_SOURCES], texts)):
            channels["reply"] = replies
            fused = self._fuse(channels)
        if follows := self._follows(self._told(fused[:FOLLOW_SOURCES], texts)):
            channels["follow"] = follows
            fused = self._fuse(channels)
        if self.tuning.bare_question_terms >= 0:
            fused = self._pointers_last(schema, fused, texts)
        fused = fused[:TOP_K]
        if len(fused) < TOP_K:  # a short list: the weaker neighbours after it, never before
            listed = {f.memory_id for f in fused}
            floor = min((f.score for f in fused), default=0.0)
            fused += [
                Fused(m, floor * 0.5 ** (i + 1), [WEAK_PATH]) for i, m in enumerate(x for x in weak if x not in listed)
            ][: TOP_K - len(fused)]
        records = {r.memory_id: r for r in self.store.records.by_ids([f.memory_id for f in fused])}
        ranked = [
            RankedMemory(memory=records[f.memory_id], score=round(f.score, 5), paths=f.paths)
            for f in fused
            if f.memory_id in records
        ]
        signals: dict[str, Any] = {"top_semantic": top_semantic, "keys": facts.keys, "residual": facts.residual}
        speakers = {who for r in records.values() if (who := speaker(r.source_text)) is not None}
        empty_range = facts.range is not None and period is None
        reasons = self.reasons(schema, facts, question, matched_keys, named, scope, signals, now, speakers, empty_range)
        not_found = next((why for _, why in reasons), "")
        if not answer and not not_found and facts.attributes and not (facts.keys or facts.pieces or facts.residual):
            # the question names nothing and says nothing beyond the schema's words, but asks for
            # an attribute: the entities holding it are the structured answer ("Which city is the
            # user leaving from?" → the journey's value; "When is Leo's birthday?" names Leo, and
            # another person's birthday is no answer to it)
            asked = self.store.entities.holding(scope, facts.attributes, ATTRIBUTE_ANSWERS)
            per = self.store.records.for_entities(scope, [(e.type, e.id) for e in asked], per_entity=3)
            answer = [RecallHit(entity=e, memories=per.get((e.type, e.id), []), path="attribute") for e in asked]
        result = RecallResult(
            question=question,
            query=query,
            sql=sql,
            params=params,
            hits=answer,
            context=compose(answer, ranked, not_found, schema.language),
            raw_output=parsed.raw_output,
            memories=ranked,
            not_found=not_found,
            time_range=(facts.range[0].isoformat(), facts.range[1].isoformat()) if facts.range else None,
            signals=signals,
        )
        return result

    def _fuse(self, channels: dict[str, list[str]]) -> list[Fused]:
        """The fitted fusion of the channels that found anything."""
        return fuse({k: v for k, v in channels.items() if v}, self.weights, self.tuning.rank_constant)

    def _pointers_last(self, schema: MemorySchema, fused: list[Fused], texts: dict[str, str]) -> list[Fused]:
        """The ranking with the turns that only ask back ("Marcus: What happened?", "你说呢？") after
        the others among the first ``CHANNEL_DEPTH``: such a turn shares the asked person's name
        and a question's shape with every question about them, and says nothing itself (its
        reply, which does, is read by the reply and follow channels)."""
        head = fused[:CHANNEL_DEPTH]
        told = dict(self._told(head, texts))
        limit = self.tuning.bare_question_terms

        def pointer(f: Fused) -> bool:
            text = told.get(f.memory_id, "")
            said = text[opening(text) :]
            return schema.language.is_question(said) and _content_count(schema.language, said) <= limit

        asks = {f.memory_id for f in head if pointer(f)}
        return (
            [f for f in head if f.memory_id not in asks]
            + [f for f in head if f.memory_id in asks]
            + fused[CHANNEL_DEPTH:]
        )

    def _told(self, head: list[Fused], known: dict[str, str]) -> list[tuple[str, str]]:
        """(memory id, text) of the best hits, in their order; texts read once into ``known``."""
        if missing := [f.memory_id for f in head if f.memory_id not in known]:
            known.update((r.memory_id, r.source_text) for r in self.store.records.by_ids(missing))
        return [(f.memory_id, known[f.memory_id]) for f in head if f.memory_id in known]

    def _replies(self, schema: MemorySchema, turns: list[tuple[str, str]]) -> list[str]:
        """The replies to the questions among ``turns`` (id, text), in their order: in a
        conversation between people the turn after "Nora: Is she marrying the guy from Dublin?"
        is "Ben: Yes, Callum." — the answer, though it shares no word with "Who is Hannah
        marrying?". A reply is the next turn said by another speaker; turns without speaker
        labels (one user's own messages, where the next one is rarely an answer) have none."""
        askers = [
            (m, who) for m, text in turns if (who := speaker(text)) is not None and schema.language.is_question(text)
        ]
        after = self.store.records.replies([m for m, _ in askers], CONVERSATION_GAP)
        return [after[m][0] for m, who in askers if m in after and speaker(after[m][1]) not in (None, who)]

    def _follows(self, turns: list[tuple[str, str]]) -> list[str]:
        """The turns told right after ``turns`` (id, text), in a transcript of labelled speakers,
        source by source: the answer is often the turn after the one that shares the question's
        words ("I take lessons twice a week" → "Tuesdays and Fridays at seven"), and when that
        turn is the other speaker's, the one after it by someone else again — the reply when it
        asked back ("I moved here for the new job" → "What are you doing there again?" → "I'm a
        software tester"), the telling going on past an interjection ("we adopted a dog!" →
        "WHAT. Tell me everything." → "She's a greyhound called Pepper"). Unlabelled messages (one
        user's own notes, requests) have none: there the next message is a new matter."""
        said_by = {m: who for m, text in turns if (who := speaker(text)) is not None}
        after = self.store.records.replies(list(said_by), CONVERSATION_GAP)
        nxt = {m: (n, who) for m, (n, text) in after.items() if (who := speaker(text)) is not None}
        other = [n for m, (n, who) in nxt.items() if who != said_by[m]]
        then = self.store.records.replies(other, CONVERSATION_GAP)
        out: list[str] = []
        for m, _ in turns:
            if m in nxt:
                n, who = nxt[m]
                out.append(n)
                if n in then and speaker(then[n][1]) not in (None, who):
                    out.append(then[n][0])
        return list(dict.fromkeys(out))

    def reasons(
        self,
        schema: MemorySchema,
        facts: QuestionFacts,
        question: str,
        matched_keys: set[str],
        named: list[Entity],
        scope: str | None,
        signals: dict[str, Any],
        now: datetime,
        speakers: set[str],
        empty_range: bool,
        rules: frozenset[str] | None = None,
    ) -> Iterator[tuple[str, str]]:
        """Why nothing stored may answer the question: (rule, reason) for each rule of ``rules``
        (default: the fitted ones, ``weights.json``) that finds so, lazily, in the order of
        ``NOT_FOUND_RULES``; the first is what recall says. Each rule reads something the
        question asks that nothing stored holds: a day range with no memory, a name or code that
        matches nothing, an owner or owned thing no memory holds (together), a content word no
        memory holds while no memory is close in meaning either, a subject's value of a
        recognisable shape no memory about it states, an amount never stated, words only told
        of another speaker."""
        on = self.tuning.not_found_rules if rules is None else rules
        if "empty_range" in on and empty_range and facts.range is not None:
            yield "empty_range", _nothing_on(facts.range)
        if {"unknown_code", "unknown_name", "unknown_suffixed"} & on:
            found = {k for k in facts.keys if k in matched_keys or self._held(scope, k)}
            # CJK readings of one word end together ("家宠物医院", "宠物医院"): one found is enough
            missing = [
                k
                for k in facts.keys
                if k not in found and not any(o != k and k.endswith(o) and has_cjk(o) for o in found)
            ]
            # the keys are fitted apart by how sure their reading is: a code nothing holds ("order
            # 99999"), a capitalised or quoted name ("Bartholomew"; "Asia" where "Japan" was
            # said: a paraphrase renames things, never codes), a CJK piece read as a name by its
            # last word (ending in 门, 店, 路…: "周磊第一门", "刚上路" are no names)
            kinds: dict[str, list[str]] = {"unknown_code": [], "unknown_suffixed": [], "unknown_name": []}
            for k in missing:
                kind = "unknown_code" if k in facts.codes else "unknown_suffixed" if has_cjk(k) else "unknown_name"
                kinds[kind].append(k)
            for rule, unknown in kinds.items():
                if rule in on and unknown:
                    yield rule, f"nothing stored about {', '.join(repr(k) for k in unknown)}."
        absent = [w for w in facts.residual if not any(self.store.lexical.held(scope, _terms(x)) for x in w.split("|"))]
        signals["absent"] = absent
        lost = [o for o, _ in facts.possessions if o in absent]  # "my dog's name", no dog stored
        if "lost_owner" in on and lost:
            yield "lost_owner", f"nothing stored mentions {', '.join(repr(facts.said(w)) for w in lost)}."
        if "unlinked_possession" in on:
            for owner, owned in facts.possessions:
                # "Barry's wife" where Barry and wives are stored, never together (a turn's terms
                # carry its previous turn's, so "Barry came. His wife too." counts as together)
                if owned and owned not in absent and not self.store.lexical.held(scope, [owner, owned]):
                    yield (
                        "unlinked_possession",
                        f"nothing stored links {facts.said(owner)!r} with {facts.said(owned)!r}.",
                    )
                    break
        if "unlinked" in on:
            for owner, owned in facts.links:
                # "我弟弟的女朋友": a brother and a girlfriend are both told, never together
                mine, its = index_terms(owner), index_terms(owned)
                lex = self.store.lexical
                if lex.held(scope, mine) and lex.held(scope, its) and not lex.held(scope, mine + its):
                    yield "unlinked", f"nothing stored links {owner!r} with {owned!r}."
                    break
        if "absent_word" in on and absent and signals.get("top_semantic", 0.0) < self.cuts.not_found_below:
            yield "absent_word", f"nothing stored mentions {', '.join(repr(facts.said(w)) for w in absent)}."
        if "lacking" in on and (why := self._lacking(schema, facts, named, scope, now)):
            yield "lacking", why
        if "no_amount" in on and (why := self._no_amount(schema, facts, scope, now, speakers)):
            yield "no_amount", why
        if "told_of_another" in on and (why := self._told_of_another(schema, facts, question, speakers, scope)):
            yield "told_of_another", why

    def _told_of_another(
        self, schema: MemorySchema, facts: QuestionFacts, question: str, speakers: set[str], scope: str | None
    ) -> str:
        """A question naming one speaker of a transcript that asks what only others told: every
        memory saying its words tells them of someone else ("When did Ben adopt a dog?" where
        only "Nora: we adopted a dog" says it; ``attribution.py``)."""
        asked = [p for p in speakers if names(question, p)]
        if len(asked) != 1:
            return ""
        person = asked[0]
        words = _attribution_words(schema, facts, person)
        memories = self._saying(scope, words) if words else []
        if not memories:
            return ""
        said_terms = {t for _, alternatives in words for a in alternatives for t in a}
        if any(tells_of(schema.language, m.source_text, person, said_terms) for m in memories):
            return ""
        said = ", ".join(repr(surface) for surface, _ in words)
        return f"nothing stored tells {said} of {person}; the memories that say it are about someone else."

    def _saying(self, scope: str | None, words: list[tuple[str, list[list[str]]]]) -> list[MemoryRecord]:
        """The memories that say the question's ``words``: those holding all of them, or, when
        none does, those holding the most of them when that is two or more ("Sam: I presented our
        new water sensor" for "Where did Iris present her water sensor?"; Iris's "water filters"
        holds one word and tells nothing of a sensor), else those holding any. None when a word
        is in too many memories to read: then nothing is decided."""
        lex = self.store.lexical
        ids: set[str] = set()
        for combo in _combinations([alternatives for _, alternatives in words]):
            ids.update(lex.holding(scope, combo, limit=ATTRIBUTION_DEPTH))
        together = bool(ids)
        if not together:
            for _, alternatives in words:
                for reading in alternatives:
                    found = lex.holding(scope, reading, limit=ATTRIBUTION_DEPTH)
                    if len(found) >= ATTRIBUTION_DEPTH:
                        return []
                    ids.update(found)
        if not ids or len(ids) >= ATTRIBUTION_DEPTH:
            return []
        memories = self.store.records.by_ids(list(ids))
        if together:
            return memories
        held = {m.memory_id: _words_held(m.source_text, words) for m in memories}
        most = max(held.values(), default=0)
        return [m for m in memories if held[m.memory_id] == most] if most >= 2 else memories

    def _no_amount(
        self, schema: MemorySchema, facts: QuestionFacts, scope: str | None, now: datetime, speakers: set[str]
    ) -> str:
        """An amount asked about something ("How much is my pension?") that the memories naming it
        never state: none of them holds a number. Memories naming any of the question's content
        words count, so a paraphrase elsewhere keeps the question open — but not a transcript's
        speaker's name ("阿浩的车多少钱买的？": every turn of 阿浩's is labelled with it)."""
        words = [w for w in facts.residual if w not in speakers]
        if not facts.amount or not words:
            return ""
        ids: list[str] = []
        for word in words:
            for reading in word.split("|"):
                ids += self.store.lexical.holding(scope, _terms(reading), limit=30)
        if not ids:
            return ""  # nothing names it: the other rules speak for that
        for m in self.store.records.by_ids(list(dict.fromkeys(ids))):
            if any(sp.kind in ("number", "range") for sp in find_spans(schema.language, m.source_text, now)):
                return ""
        return f"no amount stored for {', '.join(repr(facts.said(w)) for w in words)}."

    def _lacking(
        self, schema: MemorySchema, facts: QuestionFacts, named: list[Entity], scope: str | None, now: datetime
    ) -> str:
        """A subject's asked value of a recognisable shape that no memory about the subject
        states: "What is Priya's phone number?" when no memory about Priya holds a phone number,
        "How old is Dana?" when none holds a number said in years or in no unit. The subjects are
        the stored entities the question names and, for names no entity carries, the memories
        whose text holds the name — for an age, with the turn after each in a transcript of
        labelled speakers ("Iris: How is Tasha doing?" / "Sam: Great, she turned 41 in May.")."""
        asked_attributes = facts.attributes
        if named and len(asked_attributes) > 1:
            # "job" names a person's occupation and a life event's "new job": a named person's
            # question asks for the person's
            kinds = {e.type for e in named[:3]}
            asked_attributes = [x for x in asked_attributes if x[0] in kinds]
        if len(asked_attributes) != 1:
            return ""  # no attribute, or a generic word ("when") several attributes share
        etype, name = asked_attributes[0]
        attr = schema.entity(etype).attribute(name)
        if attr is None or attr.kind in ("enum", "boolean", "list", "ref"):
            return ""
        typed = attr.kind in ("date", "datetime") or attr.format in ("phone", "email", "contact")
        counted = attr.kind == "number" and bool(attr.unit)  # an age: a number said in years
        if not (typed or counted):
            # a free-text value has no shape to look for: "她是一名中学英语老师" tells 梅梅's job
            # without the word (on the conversations, 4 stored questions called not found for 2
            # not-stored ones found)
            return ""
        if any(e.attributes.get(name) not in (None, "") for e in named):
            return ""
        subjects: dict[str, list[MemoryRecord]] = {}
        entity_memories = self.store.records.for_entities(scope, [(e.type, e.id) for e in named[:3]], per_entity=30)
        for e in named[:3]:
            subjects[e.id] = entity_memories.get((e.type, e.id), [])
        asked = set(facts.attribute_terms)
        for key in [*facts.keys, *facts.pieces]:
            terms = index_terms(key)
            if not terms or set(terms) & asked:
                continue  # a word of the question naming the attribute
            ids = self.store.lexical.holding(scope, terms, limit=30)
            if not ids:
                continue
            # a resolved name gathers the memories that say it too: one about Ingrid need not
            # be linked to her entity ("Ingrid's birthday is on June 3" stored about no one)
            owner = next((e.id for e in named[:3] if set(terms) <= set(index_terms(e.id))), key)
            subjects.setdefault(owner, []).extend(self.store.records.by_ids(ids))
        if not subjects:
            return ""
        if counted:
            told = [m.memory_id for ms in subjects.values() for m in ms if speaker(m.source_text) is not None]
            after = self.store.records.replies(told, CONVERSATION_GAP)
            nxt = {r.memory_id: r for r in self.store.records.by_ids([n for n, _ in after.values()])}
            for memories in subjects.values():
                replies = [after[m.memory_id][0] for m in memories if m.memory_id in after]
                memories.extend(nxt[n] for n in replies if n in nxt)
        # a memory about the subject that names the attribute ("his birthday gift") may be what the
        # question is after; so may a phone number or an e-mail address (a date without the word
        # is not: "dinner with Jonas yesterday" says nothing of Jonas's birthday) — unless the
        # question names no attribute, only asks "when" ("读书会是哪天？"): then a date told with
        # the subject ("四月十九号的读书会") may be its answer. An age may be any number said in
        # years or in no unit ("she's 9"), or a record of the subject holding it.
        naming = {t for t in asked if len(t) > 1} - _generic_terms(schema.language)
        if typed:
            answering = {"phone", "email"} if naming else {"phone", "email", "date", "datetime"}
        else:
            answering = {"number", "range"}
        units = tuple(u.lower() for u in attr.unit) if counted else ()
        small = schema.language.small_words
        for memories in subjects.values():
            for m in memories:
                if naming & set(index_terms(m.source_text)):
                    return ""
                if counted and m.entity_type == etype and m.attributes.get(name) not in (None, ""):
                    return ""
                if any(
                    sp.kind in answering
                    and (not units or (not sp.money and said_in_unit(m.source_text, sp.end, units, small)))
                    for sp in find_spans(schema.language, m.source_text, now)
                ):
                    return ""
        return f"no {name} stored for {', '.join(subjects)}."

    def _held(self, scope: str | None, text: str) -> bool:
        """Whether one memory holds every term of ``text``."""
        return self.store.lexical.held(scope, index_terms(text))


def _nothing_on(days: tuple[date, date]) -> str:
    first, last = days
    return (
        f"nothing stored on {first.isoformat()}."
        if first == last
        else (f"nothing stored from {first.isoformat()} to {last.isoformat()}.")
    )


def _combinations(words: list[list[list[str]]]) -> list[list[str]]:
    """Every way to take one reading of each word, its terms together (at most 27)."""
    combos: list[list[str]] = [[]]
    for alternatives in words:
        combos = [c + a for c in combos for a in alternatives][:27]
    return combos


def _attribution_words(schema: MemorySchema, facts: QuestionFacts, person: str) -> list[tuple[str, list[list[str]]]]:
    """The question's words besides ``person`` (``attribution.content_words``): its residual
    words and other keys, and the schema's own words it says — they tell what is asked about too
    ("online *shop*", a "*wedding*") — but not the names of attributes, which tell what is asked
    for ("name", "phone"), nor its generic words."""
    residual = {t for w in facts.residual for x in w.split("|") for t in _terms(x)}
    own = set(index_terms(person)) | set(facts.attribute_terms) | _generic_terms(schema.language)
    own |= _attribute_names(schema)
    schema_words = [t for t in facts.terms if t.isascii() and t not in residual and t not in own]
    return content_words([*facts.residual, *(k for k in facts.keys if k != person), *schema_words], person, facts.said)


def _attribute_names(schema: MemorySchema) -> set[str]:
    """The terms of the schema's attribute names and aliases ("name", "phone", "生日")."""
    return {
        t
        for entity in schema.entities
        for a in entity.attributes
        for w in (a.name.replace("_", " "), *a.aliases)
        for t in index_terms(w)
    }


def _words_held(text: str, words: list[tuple[str, list[list[str]]]]) -> int:
    """How many of the question's ``words`` (each its alternative readings' terms) ``text`` holds."""
    terms = set(index_terms(text))
    return sum(any(set(reading) <= terms for reading in alternatives) for _, alternatives in words)


def _shape_test(schema: MemorySchema, facts: QuestionFacts) -> Callable[[MemoryRecord], bool] | None:
    """What a memory must state to answer the question by its shape, when the shape says it:

    * an attribute that takes a typed value (a number, a date, a time), asked for and nothing
      else ("What gift did I buy for his birthday?" asks for a gift): a value of that shape;
    * "when", with no date in the question ("When did Nora adopt Pepper?"): a day, a period or a
      time ("we adopted a dog last weekend"), beside one of the question's own words — the newest
      such memory first ("the craft fair got moved to April 25" after "is on April 18")."""
    lang = schema.language
    typed = _typed_kinds(schema, facts.attributes) if not facts.residual else frozenset()
    if typed:
        return lambda r: any(sp.kind in typed for sp in find_spans(lang, r.source_text, r.timestamp))
    if facts.when and facts.range is None:
        readings = [set(_terms(x)) for w in facts.residual for x in w.split("|")]
        return lambda r: (not readings or _says_any(r.source_text, readings)) and _tells_time(lang, r)
    return None


def _content_count(lang: Language, text: str) -> int:
    """How many content words ``text`` says: its Latin index terms (function words left out) and
    its CJK words by the segmenter that are no function words ("你说呢？" says one: 说)."""
    latin = [t for t in index_terms(text) if not has_cjk(t)]
    if not has_cjk(text):
        return len(latin)
    stop = _stopwords(lang)
    return len(latin) + sum(1 for a, b, _ in cjk_words(text) if has_cjk(w := text[a:b]) and w not in stop)


@lru_cache(maxsize=8)
def _stopwords(lang: Language) -> frozenset[str]:
    return frozenset(lang.lex.stopwords)


def _says_any(text: str, readings: list[set[str]]) -> bool:
    """Whether ``text`` holds every term of one of ``readings``."""
    terms = set(index_terms(text))
    return any(r <= terms for r in readings)


def _tells_time(lang: Language, record: MemoryRecord) -> bool:
    """Whether a memory's text states a day, a period or a time of day (read at its message time)."""
    if find_dates(lang, record.source_text, record.timestamp):
        return True
    return any(sp.kind in ("time", "datetime") for sp in find_spans(lang, record.source_text, record.timestamp))


def _terms(reading: str) -> list[str]:
    """The index terms of a residual reading: a Latin residual word is a term already (indexing it
    again could reduce it further: "pension" → "pens" → "pen"), a CJK piece is text."""
    return index_terms(reading) if has_cjk(reading) else [reading]


@lru_cache(maxsize=8)
def _generic_terms(lang: Language) -> frozenset[str]:
    """The terms of the language's question words ("when", "what date", "哪天"): asking with them
    names no attribute."""
    lx = lang.lex
    return frozenset(t for w in (*lx.when_words, *lx.question_words, *lx.question_openers) for t in index_terms(w))


def _alike(schema: MemorySchema, asked: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The other attributes of the asked attributes' entities with the same typed shape (kind and
    format: a date, a number, a place), none for plain text."""
    out: list[tuple[str, str]] = []
    for etype, name in asked:
        ent = schema.entity(etype)
        a = ent.attribute(name)
        if a is None or (a.kind == "string" and not a.format) or a.kind in ("boolean", "enum"):
            continue
        out += [
            (etype, b.name)
            for b in ent.attributes
            if b.name != name and b.kind == a.kind and b.format == a.format and (etype, b.name) not in asked
        ]
    return list(dict.fromkeys(out))


def _typed_kinds(schema: MemorySchema, asked: list[tuple[str, str]]) -> frozenset[str]:
    """The span kinds the asked attributes take, when every one of them takes a typed value
    (no free text): empty otherwise."""
    kinds: set[str] = set()
    for etype, name in asked:
        a = schema.entity(etype).attribute(name) if etype in schema.entity_names else None
        allowed = allowed_kinds(a) if a is not None else frozenset()
        if not allowed or allowed & {"text", "address"}:
            return frozenset()
        kinds |= allowed
    return frozenset(kinds)


def _constrains(q: RecallQuery) -> bool:
    """Whether a structured query narrows anything (an unfiltered one is "the latest entities")."""
    return bool(q.filters or q.chain or q.event_type)
