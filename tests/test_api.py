from __future__ import annotations

import json
from typing import Any

import pytest

from appliance.api import Appliance
from appliance.errors import InputError, QueryError, SchemaError
from appliance.testing import FakeEngine


@pytest.fixture
def app(settings):  # type: ignore[no-untyped-def]
    a = Appliance(schema="customer_service", db=settings.home / "m.duckdb", model=FakeEngine(), settings=settings)
    yield a
    a.close()


@pytest.mark.parametrize("bad", ["", "   ", b"\xff\xfe\x00\x01", "\x01\x02\x03\x04\x05\x06", "x" * 30_000, 42, None])
def test_bad_utterances_get_clear_errors_and_store_nothing(app: Appliance, bad) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InputError) as err:
        app.record(bad, "s")
    assert err.value.message
    assert app.store.counts()["memories"] == 0


def test_query_validation_errors(app: Appliance) -> None:
    with pytest.raises(QueryError):
        app.query({"entity_type": "Order", "limit": 10_000})
    with pytest.raises(QueryError):
        app.query({"entity_type": "Order", "filters": [{"field": "nope", "op": "eq", "value": 1}]})


def test_edit_record_is_validated(app: Appliance) -> None:
    rec = app.record("order 4567 is late", "s")
    if rec.entity_type != "Order":
        rec = app.edit_record(
            rec.memory_id, {"entity_type": "Order", "entity_id": "4567", "attributes": {}, "state": None}
        )
    with pytest.raises(QueryError, match="state"):
        app.edit_record(rec.memory_id, {"state": "teleported"})
    with pytest.raises(QueryError, match="no attribute"):
        app.edit_record(rec.memory_id, {"attributes": {"colour": "red"}})
    ok = app.edit_record(rec.memory_id, {"state": "shipped"})
    assert ok.state == "shipped" and ok.status == "reviewed"


def test_export_import_roundtrip(app: Appliance, settings, tmp_path) -> None:  # type: ignore[no-untyped-def]
    app.record("order 4567 is late", "s")
    app.record("订单8812已付款", "s")
    path = tmp_path / "out.jsonl"
    assert app.export_jsonl(path) == 2
    other = Appliance(schema="customer_service", db=tmp_path / "other.duckdb", model=FakeEngine(), settings=settings)
    n, problems = other.import_jsonl(path)
    assert n == 2 and not problems
    assert other.import_jsonl(path)[0] == 0  # idempotent
    path.write_text(path.read_text() + "{not json}\n")
    n, problems = other.import_jsonl(path)
    assert n == 0 and len(problems) == 1
    app.store.records.export_parquet(tmp_path / "out.parquet")
    third = Appliance(schema="customer_service", db=tmp_path / "third.duckdb", model=FakeEngine(), settings=settings)
    n, problems = third.import_parquet(tmp_path / "out.parquet")
    assert n == 2 and not problems
    assert {r.source_text for r in third.store.list_records()} == {r.source_text for r in app.store.list_records()}


def test_model_output_cannot_inject_sql(app: Appliance, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Even if the model (or a broken grammar) produced hostile query JSON, it is checked."""
    from appliance.domain.records import RecallQuery
    from appliance.recall.question import ParsedQuestion, QuestionParser

    app.record("order 4567 is late", "s")
    hostile = [
        {"entity_type": "Order", "filters": [{"field": "id", "op": "eq", "value": "x' OR '1'='1"}]},
        {"entity_type": "Order", "filters": [{"field": "id) OR 1=1 --", "op": "eq", "value": "1"}]},
        {"entity_type": "Order; DROP TABLE memories", "filters": []},
        {"entity_type": "Order", "sort": {"field": "amount DESC; DROP TABLE entities", "descending": True}},
    ]
    for q in hostile:
        parsed = ParsedQuestion(RecallQuery.model_validate(q), json.dumps(q), 1.0)
        monkeypatch.setattr(QuestionParser, "parse", lambda self, *a, _p=parsed, **k: _p)
        try:
            res = app.recall("anything", "s")
            assert res.hits == []
        except QueryError:
            pass
    assert app.store.counts()["memories"] == 1


def test_schema_switch_and_bad_schema(app: Appliance) -> None:
    app.set_schema("travel_assistant")
    assert app.schema.domain == "travel_assistant"
    with pytest.raises(SchemaError):
        app.set_schema({"domain": "x"})
    assert app.schema.domain == "travel_assistant"  # a bad schema does not replace the running one
    assert json.loads(json.dumps(app.status()))["counts"]["memories"] == 0


def test_hybrid_recall_semantic_complement(settings) -> None:  # type: ignore[no-untyped-def]
    from appliance.testing import FakeEmbedder

    app = Appliance(db=settings.home / "h.duckdb", model=FakeEngine(), settings=settings, embedder=FakeEmbedder())
    app.record("the blender motor burnt out after one day", "a")
    app.record("I love the blue kettle design", "a")
    app.record("the blender motor burnt out here too", "b")  # another session: never returned
    res = app.recall("which blender motor burnt?", "a")
    first = res.memories[0]
    assert first.memory.source_text == "the blender motor burnt out after one day"
    assert {"lexical", "semantic"} <= set(first.paths)  # one memory, every path that found it
    assert len({m.memory.memory_id for m in res.memories}) == len(res.memories)
    assert all(m.memory.session_id == "a" for m in res.memories)  # never another session's
    assert res.context.index("Evidence") < res.context.index("blender motor burnt out after one day")
    assert not res.not_found
    assert app.store.counts()["memories"] == 3


def test_backfill_embeds_imported_records(settings, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from appliance.testing import FakeEmbedder

    plain = Appliance(db=tmp_path / "p.duckdb", model=FakeEngine(), settings=settings, embedder=None)
    plain.record("order 4567 is late", "s")
    plain.export_jsonl(tmp_path / "x.jsonl")
    hybrid = Appliance(db=tmp_path / "q.duckdb", model=FakeEngine(), settings=settings, embedder=FakeEmbedder())
    hybrid.import_jsonl(tmp_path / "x.jsonl")
    assert hybrid.store.vectors.missing() == []


def test_a_turn_is_found_by_the_words_of_the_turn_before_it(settings) -> None:  # type: ignore[no-untyped-def]
    """A reply or a pronoun ("she takes it strong") carries the words said one turn earlier in the
    same conversation, so the lexical channel finds it by the name said there — but not across a
    long pause, and never from another session."""
    from datetime import UTC, datetime, timedelta

    app = Appliance(db=settings.home / "c.duckdb", model=FakeEngine(), settings=settings, embedder=None)
    t0 = datetime(2026, 5, 4, 9, 0, tzinfo=UTC)
    app.record("my wife Margaret loves tea", "a", now=t0)
    reply = app.record("she takes it strong with no sugar", "a", now=t0 + timedelta(minutes=1))
    late = app.record("sugar prices went up", "a", now=t0 + timedelta(days=2))
    app.record("Margaret from accounting called", "b", now=t0 + timedelta(minutes=2))
    app.record("no sugar for me", "b", now=t0 + timedelta(minutes=3))
    found = [m for m, _ in app.store.lexical.search("a", ["margaret", "sugar"], 10)]
    assert found[0] == reply.memory_id  # the only memory with both words, one of them inherited
    assert app.store.lexical.holding("a", ["margaret", "sugar"]) == [reply.memory_id]
    assert late.memory_id in found  # found by its own word only
    app.close()


def test_weak_neighbours_only_fill_a_short_list_after_the_evidence(settings) -> None:  # type: ignore[no-untyped-def]
    from appliance.recall.context import WEAK_PATH
    from appliance.testing import FakeEmbedder

    app = Appliance(db=settings.home / "w.duckdb", model=FakeEngine(), settings=settings, embedder=FakeEmbedder())
    from datetime import UTC, datetime, timedelta

    t0 = datetime(2026, 5, 4, 9, 0, tzinfo=UTC)
    app.record("my package was lost in transit", "a", now=t0)
    # shares only "the" with the question (cosine 0.18); a day later, so it inherits no words
    app.record("the weather was lovely and sunny all afternoon", "a", now=t0 + timedelta(days=1))
    res = app.recall("where did the package go", "a", now=t0 + timedelta(days=2))
    texts = [m.memory.source_text for m in res.memories]
    assert texts[0] == "my package was lost in transit" and WEAK_PATH not in res.memories[0].paths
    weak = res.memories[-1]
    assert weak.memory.source_text.startswith("the weather") and weak.paths == [WEAK_PATH]
    assert weak.score < res.memories[0].score
    assert res.context.index("Related (semantic neighbours)") < res.context.index("the weather")
    app.close()


def test_a_question_with_nothing_for_the_model_to_decide_skips_it(app: Appliance, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """No code, number, state word, path or "latest": the query constrains nothing whatever the
    model picks, so the question is not evaluated by the model at all (conversational recall
    latency); a question with a code still is."""
    from datetime import UTC, datetime

    parser = app.parser_for(app.schema)
    calls: list[int] = []
    real_start = parser.engine.start
    monkeypatch.setattr(parser.engine, "start", lambda tokens: calls.append(len(tokens)) or real_start(tokens))
    now = datetime(2026, 5, 4, tzinfo=UTC)
    plain = parser.parse("what did the courier say about my parcel?", now)
    assert plain.query is not None and not plain.query.filters and calls == []
    coded = parser.parse("what happened with order 12345?", now)
    assert coded.query is not None and coded.query.filters and calls


def test_not_found_rules_are_named_and_only_the_kept_ones_speak(settings) -> None:  # type: ignore[no-untyped-def]
    """A code nothing holds and a name nothing holds are told apart ("unknown_code",
    "unknown_name"); the rules the weights leave out say nothing; the order of the rules is
    the order of their reasons."""
    from dataclasses import replace
    from datetime import UTC, datetime

    from appliance.recall.weights import NOT_FOUND_RULES

    app = _fake_app(settings, "customer_service", "nf.duckdb")
    now = datetime(2026, 5, 4, 9, 0, tzinfo=UTC)
    app.record("My order 12345 arrived broken", "a", now=now)
    shipped = app.recaller.tuning
    app.recaller.tuning = replace(shipped, not_found_rules=frozenset(NOT_FOUND_RULES))
    assert "'99999'" in app.recall("What happened to order 99999?", "a", now=now).not_found
    assert "'Zanzibar'" in app.recall("Did Zanzibar ship my order?", "a", now=now).not_found
    app.recaller.tuning = replace(shipped, not_found_rules=frozenset(NOT_FOUND_RULES) - {"unknown_code"})
    assert "'99999'" not in app.recall("What happened to order 99999?", "a", now=now).not_found
    app.recaller.tuning = replace(shipped, not_found_rules=frozenset())
    assert not app.recall("Did Zanzibar ship my order?", "a", now=now).not_found
    assert not app.recall("What happened to order 99999?", "a", now=now).not_found
    app.close()


def test_not_found_for_an_owner_never_told_an_unlinked_possession_and_an_untold_amount(settings) -> None:  # type: ignore[no-untyped-def]
    """A question about "my dog's name" with no dog stored, "Barry's wife" where Barry and a wife are stored but
    never together, "how much is my pension" where the pension is stored without any number: each
    is said to be not found — and a stored amount, or a possession told together, is not."""
    from datetime import UTC, datetime, timedelta

    app = _fake_app(settings, "personal_memory", "p.duckdb")
    t0 = datetime(2026, 5, 4, 9, 0, tzinfo=UTC)
    told = [
        "Barry came fishing with me on the lake",
        "My wife made a lemon cake for the neighbours",
        "I finally bought the bike, it was 300 pounds",
        "I keep worrying about my pension these days",
        "Claire's vet practice is on the high street",
    ]
    for i, text in enumerate(told):  # a day apart: no turn inherits the words of another
        app.record(text, "a", now=t0 + timedelta(days=i))
    later = t0 + timedelta(days=10)

    def not_found(question: str) -> str:
        return app.recall(question, "a", now=later).not_found

    assert "'dog'" in not_found("What is my dog's name?")
    unlinked = not_found("What is Barry's wife called?")
    assert "'barry'" in unlinked and "'wife'" in unlinked
    assert "'pension'" in not_found("How much is my pension?")
    assert not not_found("How much was the bike?")
    assert not not_found("Where is Claire's vet practice?")
    assert not not_found("Who went fishing with Barry?")
    app.close()


def test_a_question_asking_only_for_an_attribute_is_answered_by_the_entity_holding_it(settings) -> None:  # type: ignore[no-untyped-def]
    """An imported service schema (no ids): "What is the city where bus is leaving from?" names
    nothing, so the entity holding from_location is the structured answer, listed first; a
    question that names someone else ("Maria's bus") does not get that entity as its answer."""
    from datetime import UTC, datetime, timedelta

    from appliance.domain.importers import from_sgd
    from appliance.domain.loading import parse_schema

    def slot(name: str, description: str) -> dict[str, object]:
        return {"name": name, "description": description, "is_categorical": False, "possible_values": []}

    service = {
        "service_name": "Buses_9",
        "description": "Bus tickets",
        "slots": [
            slot("from_location", "City where bus is leaving from"),
            slot("to_location", "City where bus is going to"),
            slot("travelers", "Number of travelers"),
        ],
        "intents": [
            {
                "name": "FindBus",
                "description": "Find a bus journey",
                "is_transactional": False,
                "required_slots": ["from_location", "to_location"],
                "optional_slots": {},
                "result_slots": [],
            }
        ],
    }
    app = _fake_app(settings, parse_schema(from_sgd(service)), "b.duckdb")
    t0 = datetime(2026, 3, 1, 9, tzinfo=UTC)
    for i, text in enumerate(["I need a bus for two people", "Leaving from Portland to Seattle"]):
        app.record(text, "d1", now=t0 + timedelta(minutes=i))
    later = t0 + timedelta(hours=1)
    res = app.recall("What is the city where bus is leaving from?", "d1", now=later)
    assert [h.path for h in res.hits] == ["attribute"]
    assert res.hits[0].entity.attributes["from_location"] == "Portland"
    assert res.context.splitlines()[0] == "Answer:" and "from_location=Portland" in res.context.splitlines()[1]
    named = app.recall("What is the city where Maria's bus is leaving from?", "d1", now=later)
    assert all(h.path != "attribute" for h in named.hits)
    # a typed attribute asked (a number): the memories stating a number are found by their shape
    counted = app.recall("What is the number of travelers?", "d1", now=later)
    shaped = {m.memory.source_text for m in counted.memories if "shape" in m.paths}
    assert shaped == {"I need a bus for two people"}
    app.close()


def test_not_found_for_two_chinese_things_told_but_never_together(settings) -> None:  # type: ignore[no-untyped-def]
    """ "我弟弟的女朋友" where a brother and a girlfriend are both told, never together, is not
    found; "X的Y" told together is, and a relative clause ("舅舅开的川菜馆", where the memory
    says "舅舅在成都开了一家川菜馆") is never taken for a missing owner."""
    from datetime import UTC, datetime, timedelta

    app = _fake_app(settings, "personal_memory", "z.duckdb")
    t0 = datetime(2026, 5, 4, 9, 0, tzinfo=UTC)
    told = ["我的女朋友叫韩梅梅，她是老师。", "我有个弟弟叫李明，在北京读书。", "舅舅在成都开了一家川菜馆。"]
    for i, text in enumerate(told):  # a day apart: no turn inherits the words of another
        app.record(text, "z", now=t0 + timedelta(days=i))
    later = t0 + timedelta(days=10)

    def not_found(question: str) -> str:
        return app.recall(question, "z", now=later).not_found

    assert "'弟弟'" in not_found("我弟弟的女朋友叫什么？") and "'女朋友'" in not_found("我弟弟的女朋友叫什么？")
    assert not not_found("我的女朋友叫什么？")
    assert not not_found("舅舅开的川菜馆叫什么？")
    app.close()


def test_not_found_for_a_speaker_asked_what_only_the_other_told(settings) -> None:  # type: ignore[no-untyped-def]
    """Two friends' chat: "When did Ben adopt a dog?" finds Nora's news and Ben's questions about
    it, never a word of Ben's own — not found, naming Ben; asked of Nora it is found. The same
    in Chinese. A question naming both speakers, or one user's unlabelled notes, say nothing."""
    from datetime import UTC, datetime, timedelta

    t0 = datetime(2026, 4, 2, 20, 0, tzinfo=UTC)
    later = t0 + timedelta(days=30)
    turns = [
        "Nora: Guess what, we adopted a dog last weekend!",
        "Ben: WHAT. Does she run with you?",
        "Nora: Not yet, the vet said to wait.",
        "Ben: I went surfing for the first time on Saturday.",
        "Nora: Did you stand up? You'll be great at it.",
        "小雨：我们养了一只狗，叫豆包。",
        "阿浩：什么狗？",
        "阿浩：我在学游泳，教练姓陈。",
    ]
    app = _fake_app(settings, "personal_memory", "sw.duckdb")
    for i, text in enumerate(turns):
        app.record(text, "s", now=t0 + timedelta(minutes=i))

    def not_found(question: str) -> str:
        return app.recall(question, "s", now=later).not_found

    swapped = not_found("When did Ben adopt a dog?")
    assert "of Ben" in swapped and "'dog'" in swapped and "someone else" in swapped
    assert not not_found("When did Nora adopt a dog?")
    assert "of Nora" in not_found("Where did Nora go surfing?")
    assert not not_found("Where did Ben go surfing?")
    assert not not_found("Did Nora and Ben adopt a dog?")  # both speakers named: nothing to decide
    assert "of 阿浩" in not_found("阿浩的狗叫什么？")
    assert not not_found("小雨的狗叫什么？")
    assert "of 小雨" in not_found("小雨的游泳教练姓什么？")
    app.close()

    plain = _fake_app(settings, "personal_memory", "sw_plain.duckdb")
    for i, text in enumerate(t.split(": ", 1)[-1] for t in turns[:5]):  # no speaker labels
        plain.record(text, "s", now=t0 + timedelta(minutes=i))
    assert "someone else" not in plain.recall("When did Ben adopt a dog?", "s", now=later).not_found
    plain.close()


def test_a_period_holding_nothing_is_said_and_other_days_are_neighbours(settings) -> None:  # type: ignore[no-untyped-def]
    """ "What did I cook on 18 May?" when nothing is stored on that day: the context says so and
    shows the cooking told on another day as a neighbour, not an empty list; a day that holds
    the memory answers it plainly."""
    from datetime import UTC, datetime

    app = _fake_app(settings, "personal_memory", "period.duckdb")
    app.record("I cooked kimchi stew tonight", "p", now=datetime(2026, 3, 16, 19, 0, tzinfo=UTC))
    later = datetime(2026, 5, 20, 12, 0, tzinfo=UTC)
    empty = app.recall("What did I cook on May 18?", "p", now=later)
    assert empty.not_found == "nothing stored on 2026-05-18."
    assert [m.memory.source_text for m in empty.memories] == ["I cooked kimchi stew tonight"]
    assert empty.context.startswith("Not found:") and "Neighbours" in empty.context
    told = app.recall("What did I cook on March 16?", "p", now=later)
    assert not told.not_found and told.memories[0].memory.source_text == "I cooked kimchi stew tonight"
    app.close()


def test_a_date_told_with_the_thing_answers_a_bare_when(settings) -> None:  # type: ignore[no-untyped-def]
    """ "读书会是哪天？" names no attribute, only asks when: a date told with 读书会 may be its answer,
    so it is not "not found"; "梅梅的生日是哪天？" names the birthday, and a date told with 梅梅
    (a dinner) is no birthday."""
    from datetime import UTC, datetime, timedelta

    app = _fake_app(settings, "personal_memory", "w.duckdb")
    t0 = datetime(2026, 5, 4, 9, 0, tzinfo=UTC)
    told = ["小雨：四月十九号的读书会也办了，读的是《三体》。", "阿浩：五月二号和梅梅一起吃了火锅。"]
    for i, text in enumerate(told):
        app.record(text, "w", now=t0 + timedelta(days=i))
    later = t0 + timedelta(days=10)
    assert not app.recall("改期后的读书会是哪天？", "w", now=later).not_found
    assert "梅梅" in app.recall("梅梅的生日是哪天？", "w", now=later).not_found
    app.close()


NOT_FOUND_CASES = {
    # No memory says every word of "Where did Iris present her water sensor?": Sam's turn says two
    # of them and tells of Sam; Iris's "water filters" says one — it is no telling of a sensor.
    "the memories holding most of the words": (
        [
            "Sam: A conference for work, I presented our new water sensor.",
            "Iris: How did the talk go?",
            "Sam: Better than I expected.",
            "Iris: My students are building water filters for the science fair.",
        ],
        {"Where did Iris present her water sensor?": "of Iris"},
        ["Where did Sam present his water sensor?"],
    ),
    # "shop" is a word of the personal-memory schema, yet what the question is about: with it,
    # only Nora's shop and Ben's advice to her hold the words; Ben's "buy one online" holds one.
    "the schema's own words": (
        [
            "Ben: I'll buy one online if you have any left.",
            "Ben: You should open an online shop.",
            "Nora: I opened the online shop last week, it's called Pepper Clay.",
        ],
        {"What is Ben's online shop called?": "of Ben"},
        ["What is Nora's online shop called?"],
    ),
    # Dana only "finished ten minutes ahead": no number of hers is an age; "Ellie, she's 9" tells
    # one, and so does the reply to a question naming Tasha.
    "an age said in years or in no unit": (
        [
            "Sam: Claire's kids are Ellie, she's 9, and Rory.",
            "Iris: How is Tasha doing?",
            "Sam: Great, she turned 41 in May.",
            "Iris: Dana ran it with me, she finished ten minutes ahead.",
            "Sam: Next year you'll beat her.",
        ],
        {"How old is Dana?": "no age stored for Dana"},
        ["How old is Ellie?", "How old is Tasha?"],
    ),
    # every turn of 阿浩's is labelled with his name, and one of them holds a number (a score):
    # his name says nothing of where an amount for the car is stored
    "an amount, a speaker's name aside": (
        [
            "阿浩：阿琳模拟考考了六百五十分。",
            "阿浩：我车也买了，上周末提的。",
            "小雨：什么颜色？",
            "阿浩：白色的。",
            "小雨：我的新耳机花了899块钱。",
        ],
        {"阿浩的车多少钱买的？": "no amount stored"},
        ["小雨的新耳机多少钱？"],
    ),
}


@pytest.mark.parametrize("case", list(NOT_FOUND_CASES))
def test_not_found_is_said_of_whom_and_what_nothing_tells(settings, case: str) -> None:  # type: ignore[no-untyped-def]
    from datetime import UTC, datetime, timedelta

    turns, missing, found = NOT_FOUND_CASES[case]
    t0 = datetime(2026, 5, 16, 17, 0, tzinfo=UTC)
    app = _recorded(settings, "nf.duckdb", turns, t0)
    later = t0 + timedelta(days=3)
    for question, said in missing.items():
        assert said in app.recall(question, "s", now=later).not_found, question
    for question in found:
        assert not app.recall(question, "s", now=later).not_found, question
    app.close()


def _chat(settings, db: str, turns: list[str], t0: Any, step: Any) -> tuple[Appliance, list[Any]]:  # type: ignore[no-untyped-def]
    """A fake-model appliance without an encoder holding ``turns`` in session "s", ``step`` apart."""
    app = Appliance(db=settings.home / db, model=FakeEngine(), settings=settings, embedder=None)
    return app, [app.record(t, "s", now=t0 + i * step) for i, t in enumerate(turns)]


def _fake_app(settings, schema: Any, db: str) -> Appliance:  # type: ignore[no-untyped-def]
    """An appliance on ``schema`` with the fake model and encoder (the logic under test is not theirs)."""
    from appliance.testing import FakeEmbedder

    return Appliance(
        schema=schema, db=settings.home / db, model=FakeEngine(), settings=settings, embedder=FakeEmbedder()
    )


def _recorded(settings, db: str, turns: list[str], t0: Any) -> Appliance:  # type: ignore[no-untyped-def]
    """A fake-model appliance (personal memory) holding ``turns`` in session "s", a minute apart."""
    from datetime import timedelta

    app = _fake_app(settings, "personal_memory", db)
    for i, text in enumerate(turns):
        app.record(text, "s", now=t0 + timedelta(minutes=i))
    return app


def test_words_meet_across_derivations_in_recall(settings) -> None:  # type: ignore[no-untyped-def]
    """ "adopted" is found by "adopt", "teaching" by "teach"; a question word already reduced is
    not reduced again ("pension" → "pens", never "pen"), so a stored word is never called absent."""
    from datetime import UTC, datetime, timedelta

    from appliance.lang.segment import index_terms

    assert index_terms("we adopted a dog")[0] == index_terms("adopt")[0]
    assert index_terms("teaching")[0] == index_terms("teach")[0]
    assert index_terms("she stole it") == index_terms("she stolen it") == index_terms("steal")
    assert index_terms("we bought shoes") == index_terms("shoes")  # "buy" is a function word
    assert index_terms("my left hand") != index_terms("leave")  # "left" is also a side
    app = Appliance(db=settings.home / "d.duckdb", model=FakeEngine(), settings=settings, embedder=None)
    t0 = datetime(2026, 4, 2, 20, 0, tzinfo=UTC)
    adopted = app.record("We adopted a greyhound last weekend", "s", now=t0)
    pension = app.record("my pension went up a bit this April", "s", now=t0 + timedelta(days=3))
    res = app.recall("When did we adopt the greyhound?", "s", now=t0 + timedelta(days=9))
    assert res.memories[0].memory.memory_id == adopted.memory_id
    res = app.recall("When did my pension go up?", "s", now=t0 + timedelta(days=9))
    assert not res.not_found and res.memories[0].memory.memory_id == pension.memory_id
    stole = app.record("Pepper stole a whole block of cheddar on Monday", "s", now=t0 + timedelta(days=4))
    res = app.recall("What did Pepper steal?", "s", now=t0 + timedelta(days=9))
    assert res.memories[0].memory.memory_id == stole.memory_id
    app.close()


def test_a_when_question_ranks_the_memories_telling_a_time_first(settings) -> None:  # type: ignore[no-untyped-def]
    """ "When did Nora adopt Pepper?" in a chat where Pepper is in many turns: the turn that says
    "adopted" and a time ("last weekend") comes first; among two that tell the fair's date, the
    newer ("moved to April 25") comes first."""
    from datetime import UTC, datetime, timedelta

    t0 = datetime(2026, 3, 9, 18, 0, tzinfo=UTC)
    turns = [
        "Nora: Guess what, we adopted a dog last weekend!",
        "Ben: WHAT. Tell me everything.",
        "Nora: She's a greyhound called Pepper, and Pepper loves the couch.",
        "Nora: Pepper needs her walk now, Pepper is impatient.",
        "Ben: Give Pepper a pat from me! Pepper sounds adorable.",
        "Nora: The craft fair is on April 18 at the community center.",
        "Ben: I'll buy a mug at the craft fair.",
        "Nora: Oh and the craft fair got moved to April 25 because of the snow.",
    ]
    app, recs = _chat(settings, "w.duckdb", turns, t0, timedelta(minutes=1))
    res = app.recall("When did Nora adopt Pepper?", "s", now=t0 + timedelta(days=3))
    assert res.memories[0].memory.memory_id == recs[0].memory_id
    assert "shape" in res.memories[0].paths
    res = app.recall("When is the craft fair?", "s", now=t0 + timedelta(days=3))
    ranked = [m.memory.memory_id for m in res.memories]
    assert ranked[0] == recs[7].memory_id and recs[5].memory_id in ranked
    app.close()


def test_an_index_written_with_older_terms_is_rebuilt_as_record_writes_it(settings) -> None:  # type: ignore[no-untyped-def]
    """A file indexed before words were reduced to their roots gets its lexical index rebuilt on
    the first recall — the same postings ``record`` writes, the words of the turn before included
    (turns minutes apart, turns all stamped with their session's date, a turn after a long pause)."""
    from datetime import UTC, datetime, timedelta

    from appliance.lang.segment import INDEX_TERMS_VERSION, search_terms

    path = settings.home / "old.duckdb"
    app = Appliance(db=path, model=FakeEngine(), settings=settings, embedder=None)
    t0 = datetime(2026, 5, 4, 9, 0, tzinfo=UTC)
    app.record("my wife Margaret loves tea", "a", now=t0)
    reply = app.record("she adopted a kitten with no name", "a", now=t0 + timedelta(minutes=1))
    app.record("the kitten sleeps all day", "a", now=t0 + timedelta(days=3))
    for text in ("Nora: we adopted Pepper", "Ben: a greyhound?", "Nora: yes, retired from racing"):
        app.record(text, "b", now=t0)  # a session recorded with its date on every turn

    def postings() -> list[tuple[str, str, int, int]]:
        return sorted(app.store.db.fetch("SELECT memory_id, term, tf, length FROM lexical_terms"))

    as_recorded = postings()
    with app.store.db.transaction() as con:  # the index as an older version wrote it
        con.execute("DELETE FROM lexical_terms")
        con.execute("DELETE FROM lexical_docs")
        con.execute("DELETE FROM meta WHERE key = 'lexical_terms_version'")
    for row in app.store.db.fetch("SELECT memory_id, session_id, source_text FROM memories"):
        app.store.add_terms([(row[0], row[1], search_terms(row[2]))])
    assert app.store.lexical.search("a", ["adopt"]) == []
    app.close()
    app = Appliance(db=path, model=FakeEngine(), settings=settings, embedder=None)
    assert app.store.lexical.written_with() is None
    app.recall("who adopted a kitten?", "a", now=t0 + timedelta(days=4))
    assert app.store.lexical.written_with() == INDEX_TERMS_VERSION
    assert postings() == as_recorded
    assert [m for m, _ in app.store.lexical.search("a", ["adopt"])] == [reply.memory_id]
    assert app.reindex_lexical() == 0  # once
    app.close()


def test_a_name_in_every_other_turn_does_not_outrank_the_turn_that_answers(settings) -> None:  # type: ignore[no-untyped-def]
    """Two friends chatting, each turn prefixed with its speaker: "Where does Nora teach?" is
    answered by the one turn about teaching ("teaching" meets "teach"), not by Nora's latest
    small talk, which holds her name and nothing else the question asks."""
    from datetime import UTC, datetime, timedelta

    t0 = datetime(2026, 3, 7, 18, 0, tzinfo=UTC)
    turns = ["Nora: I'm still teaching art at Westridge High here in Denver."]
    turns += [
        f"{'Nora' if i % 2 else 'Ben'}: {x}"
        for i, x in enumerate(
            ["Ha, nice.", "Nora, what about you?", "Ok!", "Haha true.", "Nora, see you!", "Sure.", "Bye Nora!", "Bye!"]
        )
    ]
    app, recs = _chat(settings, "n.duckdb", turns, t0, timedelta(hours=2))
    res = app.recall("Where does Nora teach?", "s", now=t0 + timedelta(days=30))
    assert res.memories[0].memory.memory_id == recs[0].memory_id
    app.close()


def test_equal_fused_scores_are_ordered_by_rank_and_channel_not_by_id() -> None:
    """Mirrored ranks sum alike; the order must not depend on the memory ids (random uuids: two
    recordings of one conversation ranked differently)."""
    from appliance.recall.fusion import fuse

    for first, second in (("a", "z"), ("z", "a")):
        fused = fuse({"lexical": [first, second], "semantic": [second, first], "time": ["t2", "t1"]})
        assert fused[0].score == fused[1].score
        assert [f.memory_id for f in fused[:2]] == [first, second]  # lexical's first: channel listed first
        assert [f.memory_id for f in fused[2:]] == ["t2", "t1"]  # the better single rank first


def test_the_rank_constant_decides_whether_one_first_place_beats_two_middling_ones() -> None:
    """Large k: a memory found by two channels at ranks 8 and 9 beats one found first by a
    single channel (nearly a vote count); small k: the first place wins."""
    from appliance.recall.fusion import fuse

    channels = {
        "lexical": ["top", *(f"l{i}" for i in range(6)), "both"],
        "semantic": [*(f"s{i}" for i in range(8)), "both"],
    }
    weights = {"lexical": 1.0, "semantic": 1.0}

    def order(k: float) -> list[str]:
        return [f.memory_id for f in fuse(channels, weights, k) if f.memory_id in ("top", "both")]

    assert order(60.0) == ["both", "top"]
    assert order(5.0) == ["top", "both"]


def test_equal_bm25_scores_come_in_the_order_they_were_told(settings) -> None:  # type: ignore[no-untyped-def]
    """Six memories scoring alike (the same word once, the same length) come in the order they
    were told, not in the order of their random ids — one chance in 720 of passing without it."""
    from datetime import UTC, datetime, timedelta

    app = Appliance(db=settings.home / "tie.duckdb", model=FakeEngine(), settings=settings, embedder=None)
    t0 = datetime(2026, 3, 7, 8, 0, tzinfo=UTC)
    colours = ["red", "blue", "green", "pink", "grey", "gold"]
    recs = [app.record(f"apples {c}", "s", now=t0 + timedelta(hours=2 * i)) for i, c in enumerate(colours)]
    found = app.store.lexical.search("s", ["apple"], 10)
    assert len({round(score, 9) for _, score in found}) == 1
    assert [m for m, _ in found] == [r.memory_id for r in recs]
    app.close()


def test_lexical_hits_far_below_the_best_are_left_to_the_other_channels() -> None:
    from appliance.recall.fusion import within_reach

    hits = [("teach", 4.9), ("talk", 2.0), ("name-only", 0.7), ("other", 0.6)]
    assert within_reach(hits, 0.3) == ["teach", "talk"]
    assert within_reach(hits, 0.0) == ["teach", "talk", "name-only", "other"]
    assert within_reach([], 0.3) == []


def test_the_text_channel_fuses_scores_not_ranks() -> None:
    """A memory far ahead in meaning stays ahead of one a little ahead in words (rank fusion would
    tie them), a memory in one list only takes that list's lowest in the other, and the BM25
    share decides between the two lists."""
    from appliance.recall.fusion import text_scores

    lexical = [("words", 5.0), ("both", 4.0), ("w2", 1.0), ("w3", 1.0)]
    semantic = [("meaning", 0.95), ("both", 0.80), ("m2", 0.78), ("m3", 0.77)]
    assert text_scores(lexical, semantic, 0.3)[:2] == ["meaning", "both"]
    assert text_scores(lexical, semantic, 0.7)[0] == "words"
    assert text_scores(lexical, [], 0.5) == ["words", "both", "w2", "w3"]
    assert text_scores([], [], 0.5) == []


def test_the_shipped_recall_weights_cover_every_channel_and_encoder() -> None:
    from appliance.model.embed import ENCODERS
    from appliance.recall.fusion import SHIPPED
    from appliance.store.vectors import ENCODER_TABLES

    assert {"lexical", "semantic", "text", "entity", "reply", "follow"} <= set(SHIPPED.channels)
    assert set(ENCODERS) - {"minilm"} <= set(SHIPPED.semantic) <= set(ENCODER_TABLES)
    assert 0.0 <= SHIPPED.text_lexical_weight <= 1.0 and SHIPPED.bm25_k1 > 0


def test_speaker_labels() -> None:
    from appliance.lang.speakers import speaker

    assert speaker("Nora: Is she marrying the guy from Dublin?") == "Nora"
    assert speaker("Mary Ann Lee: hi there") == "Mary Ann Lee"
    assert speaker("李雷：你好") == "李雷"
    assert speaker("order 4567: still late") is None
    assert speaker("Note that the meeting moved: 3pm") is None
    assert speaker("my sister Priya is a nurse") is None
    assert speaker("Nora:") is None  # a label and nothing said


def test_the_reply_to_a_question_among_the_best_hits_is_recalled_as_its_answer(settings) -> None:  # type: ignore[no-untyped-def]
    """In a transcript of labelled speakers, "Who is Hannah marrying?" finds "Nora: Is she marrying
    the guy from Dublin?" and, through it, Ben's reply — which shares no word with the question.
    One user's own messages (no labels) have no replies: the next message is no answer."""
    from datetime import UTC, datetime, timedelta

    def conversation(labelled: bool, step: timedelta = timedelta(minutes=1)) -> tuple[Appliance, list[Any]]:
        db = settings.home / f"r{labelled}{step.seconds}.duckdb"
        app = Appliance(db=db, model=FakeEngine(), settings=settings, embedder=None)
        t0 = datetime(2026, 3, 7, 18, 0, tzinfo=UTC)
        turns = [
            ("Ben", "By the way, my sister Hannah is getting married in September."),
            ("Nora", "Oh lovely! Where?"),
            ("Ben", "In a vineyard near Porto, that's partly why I moved here."),
            ("Nora", "Is she marrying the guy from Dublin?"),
            ("Ben", "Yes, Callum. He's an architect, really nice guy."),
            ("Nora", "I'm so happy for her."),
        ]
        recs = [
            app.record(f"{who}: {text}" if labelled else text, "s", now=t0 + i * step)
            for i, (who, text) in enumerate(turns)
        ]
        return app, recs

    for step in (timedelta(minutes=1), timedelta(0)):  # turns a minute apart, or all stamped alike
        app, recs = conversation(labelled=True, step=step)
        res = app.recall("Who is Hannah marrying?", "s", now=datetime(2026, 8, 1, tzinfo=UTC))
        reply = next(m for m in res.memories if m.memory.memory_id == recs[4].memory_id)
        assert "reply" in reply.paths
        app.close()
    app, recs = conversation(labelled=False)
    res = app.recall("Who is Hannah marrying?", "s", now=datetime(2026, 8, 1, tzinfo=UTC))
    assert all("reply" not in m.paths for m in res.memories)
    app.close()


def test_a_turn_that_only_asks_back_goes_after_the_statements(settings) -> None:  # type: ignore[no-untyped-def]
    """ "Ben: What happened?" shares the asked name and a question's shape with every question
    about Ben and says nothing: with the fitted limit it ranks after the turns that tell things,
    and stays in the list (its reply is found through it)."""
    from dataclasses import replace
    from datetime import UTC, datetime, timedelta

    from appliance.recall.fusion import SHIPPED
    from appliance.recall.service import RecallService

    app = Appliance(db=settings.home / "bare.duckdb", model=FakeEngine(), settings=settings, embedder=None)
    t0 = datetime(2026, 3, 7, 18, 0, tzinfo=UTC)
    turns = [
        "Nora: Ben's bike was stolen outside the gym on Monday, it happened at noon.",
        "Ben: What happened?",
        "Nora: Someone cut the lock.",
    ]
    recs = [app.record(text, "s", now=t0 + timedelta(minutes=i)) for i, text in enumerate(turns)]
    question, now = "What happened with Ben?", datetime(2026, 8, 1, tzinfo=UTC)
    parsed = app.parser_for(app.schema).parse(question, now)

    def ranked(limit: int) -> list[str]:
        service = RecallService(app.store, None, replace(SHIPPED, bare_question_terms=limit))
        res = service.recall(app.schema, parsed, question, "s", now)
        return [m.memory.memory_id for m in res.memories]

    off, on = ranked(-1), ranked(2)
    assert off.index(recs[1].memory_id) < off.index(recs[0].memory_id)  # the bare question first
    assert on.index(recs[0].memory_id) < on.index(recs[1].memory_id)
    assert set(on) == set(off)
    app.close()


def test_a_turns_content_words_are_counted_in_either_script() -> None:
    from appliance.lang import language_for
    from appliance.recall.service import _content_count

    lang = language_for(("en", "zh"))
    assert _content_count(lang, "What?") == 0
    assert _content_count(lang, "What happened?") == 1
    assert _content_count(lang, "Big jump. Can you afford it?") == 3
    assert _content_count(lang, "什么？") == 0
    assert _content_count(lang, "你说呢？") == 1


def test_the_turn_after_a_best_hit_is_recalled_with_it(settings) -> None:  # type: ignore[no-untyped-def]
    """In a labelled transcript the answer is often the turn after the one sharing the question's
    words: "Ben's Portuguese lessons" finds "I take lessons twice a week", and with it the next
    turn, "Tuesdays and Fridays", among the five best. One user's unlabelled messages do not
    follow each other that way: no such path."""
    from datetime import UTC, datetime, timedelta

    turns = [
        ("Nora", "So are you learning Portuguese?"),
        ("Ben", "Trying to. I take lessons twice a week with a tutor called Inês."),
        ("Ben", "Tuesdays and Fridays at seven in the evening."),
        *[(("Nora", "Ben")[i % 2], f"Filler line number {i} about the weather and the football.") for i in range(12)],
    ]
    t0 = datetime(2026, 3, 7, 18, 0, tzinfo=UTC)
    for labelled in (True, False):
        app = Appliance(db=settings.home / f"f{labelled}.duckdb", model=FakeEngine(), settings=settings, embedder=None)
        recs = [
            app.record(f"{who}: {text}" if labelled else text, "s", now=t0 + i * timedelta(minutes=1))
            for i, (who, text) in enumerate(turns)
        ]
        res = app.recall("On which days are Ben's Portuguese lessons?", "s", now=datetime(2026, 8, 1, tzinfo=UTC))
        top = {m.memory.memory_id: m for m in res.memories[:5]}
        if labelled:
            assert recs[2].memory_id in top and "follow" in top[recs[2].memory_id].paths
        else:
            assert all("follow" not in m.paths for m in res.memories)
        app.close()


def test_a_best_hit_followed_by_the_other_speakers_turn_brings_the_one_after(settings) -> None:  # type: ignore[no-untyped-def]
    """ "I moved here for the new job" → "What are you doing there again?" → "I'm a software
    tester": after a best hit whose next turn is the other speaker's — a question back or a mere
    interjection ("WHAT. Tell me everything.") — the turn after that follows too, when someone
    other than that speaker says it (the asker going on is no answer); a speaker going on
    without interruption brings only the next turn."""
    from datetime import UTC, datetime, timedelta

    t0 = datetime(2026, 3, 7, 18, 0, tzinfo=UTC)
    turns = [
        "Ben: I moved here in January for the new job.",
        "Nora: What are you doing there again?",
        "Ben: I'm a software tester at a fintech company.",
        "Nora: Nice. Is it calm?",
        "Nora: Mine is not.",
        "Nora: Guess what, we adopted a dog last weekend!",
        "Ben: WHAT. Tell me everything.",
        "Nora: She's a three-year-old greyhound called Pepper.",
        "Nora: We got her from a rescue in Boulder.",
    ]
    app, recs = _chat(settings, "ask.duckdb", turns, t0, timedelta(minutes=1))
    ids = [r.memory_id for r in recs]
    assert app.recaller._follows([(ids[0], turns[0])]) == [ids[1], ids[2]]
    assert app.recaller._follows([(ids[2], turns[2])]) == [ids[3]]  # Nora asks, Nora goes on
    assert app.recaller._follows([(ids[5], turns[5])]) == [ids[6], ids[7]]  # past Ben's interjection
    assert app.recaller._follows([(ids[7], turns[7])]) == [ids[8]]
    # source by source: each best hit's turns come before the next best hit's
    assert app.recaller._follows([(ids[5], turns[5]), (ids[0], turns[0])]) == [ids[6], ids[7], ids[1], ids[2]]
    app.close()


def test_concurrent_first_recalls_rebuild_the_index_once(settings) -> None:  # type: ignore[no-untyped-def]
    """Several threads asking at once right after an upgrade: the postings come out as ``record``
    wrote them, not doubled by two rebuilds racing."""
    import threading
    from datetime import UTC, datetime, timedelta

    path = settings.home / "race.duckdb"
    app = Appliance(db=path, model=FakeEngine(), settings=settings, embedder=None)
    t0 = datetime(2026, 5, 4, 9, 0, tzinfo=UTC)
    for i in range(40):
        app.record(f"turn {i}: we adopted kitten number {i}", "a", now=t0 + timedelta(minutes=i))
    as_recorded = sorted(app.store.db.fetch("SELECT memory_id, term, tf FROM lexical_terms"))
    with app.store.db.transaction() as con:
        con.execute("DELETE FROM meta WHERE key = 'lexical_terms_version'")
    app.close()
    app = Appliance(db=path, model=FakeEngine(), settings=settings, embedder=None)
    threads = [
        threading.Thread(target=app.recall, args=("who adopted a kitten?", "a"), kwargs={"now": t0 + timedelta(days=1)})
        for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(app.store.db.fetch("SELECT memory_id, term, tf FROM lexical_terms")) == as_recorded
    app.close()


def test_teach_stores_exactly_the_values_given(app: Appliance) -> None:
    """A taught record's attributes are the ones given: what the extractor filled besides is
    cleared (an example must not teach the mistake it corrects), and teaching another entity
    type than the one extracted works."""
    rec = app.record("order 4567 is late, I paid 299元", "s")
    assert rec.entity_type == "Order" and rec.attributes.get("amount") is not None
    taught = app.teach("order 4567 is late, I paid 299元", {"attributes": {"payment_status": "paid"}}, "s")
    assert {k: v for k, v in taught.attributes.items() if v is not None} == {"payment_status": "paid"}
    ticket = {"event_type": "complaint_registered", "entity_type": "ServiceTicket", "attributes": {"order_id": "4567"}}
    other = app.teach("order 4567 is late, I paid 299元", ticket, "s")
    assert other.entity_type == "ServiceTicket" and other.attributes.get("order_id") == "4567"
    assert other.status == "reviewed"
