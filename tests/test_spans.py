from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from appliance.extract.candidates import Candidate, lexical_similarity, tag_codes
from appliance.extract.candidates import find_candidates as _find
from appliance.lang import language_for
from appliance.lang.numbers import normalise_number as _normalise

NOW = datetime(2026, 12, 2, 10)
LANG = language_for(("en", "zh"))
NOUNS = ("order", "ticket", "booking", "trip", "订单", "工单", "预订", "行程")  # the shipped schemas' entity words


def find_candidates(text: str, now: datetime) -> list[Candidate]:
    return _find(LANG, text, now, NOUNS)


def normalise_number(surface: str) -> float | None:
    return _normalise(LANG, surface)


def is_question(text: str) -> bool:
    return LANG.is_question(text)


def _by_role(text: str) -> dict[str, list[object]]:
    out: dict[str, list[object]] = {}
    for c in find_candidates(text, NOW):
        out.setdefault(c.role, []).append(c.value)
    return out


def test_chinese_order_tail_and_relative_date() -> None:
    r = _by_role("你好，我昨天买的手机订单尾号4567还没发货")
    assert r["code"] == ["4567"]
    assert r["date"] == ["2026-12-01"]


def test_amounts_dates_contacts_en() -> None:
    r = _by_role("Order 12345 for $1,299.50 on Nov 28, call +1 415 555 0100 or bob@x.com")
    assert r["code"] == ["12345"]
    assert 1299.5 in r["number"]
    assert r["date"] == ["2026-11-28"]
    assert set(r["contact"]) == {"bob@x.com", "+1 415 555 0100"}


def test_lettered_codes_and_yuan() -> None:
    r = _by_role("我的订单A-778花了299元，3天前下单")
    assert "A-778" in r["code"] and 299.0 in r["number"] and 778.0 not in r["number"]
    assert r["date"] == ["2026-11-29"]


def test_normalise_number() -> None:
    assert normalise_number("¥1,299.50") == 1299.5
    assert normalise_number("2k") == 2000
    assert normalise_number("none") is None


def test_tag_codes_by_nearby_keyword() -> None:
    text = "ticket T-9 about order 88812"
    codes = [c for c in find_candidates(text, NOW) if c.role == "code"]
    tags = tag_codes(text, codes, {"Order": ("order",), "ServiceTicket": ("ticket",)})
    assert tags == {"T-9": "ServiceTicket", "88812": "Order"}


def test_lexical_similarity_cjk_and_words() -> None:
    assert lexical_similarity("东西坏了我要投诉", ["东西坏了，我要投诉"]) > 0.8
    assert lexical_similarity("where is my package", ["the problem is fixed"]) == 0.0


def test_corrections_rule_out_the_negated_id() -> None:
    assert _by_role("not 12345, I meant 12354")["code"] == ["12354"]
    assert _by_role("不是订单11111，是订单11112")["code"] == ["11112"]
    assert "BK-78" in _by_role("not BK-77, I meant cancel BK-78")["code"]
    assert "BK-77" not in _by_role("not BK-77, I meant cancel BK-78")["code"]


def test_tag_codes_falls_back_to_the_declared_id_shape() -> None:
    text = "Cancel BK-44 for trip TR-9, and U-7 as well"
    codes = [c for c in find_candidates(text, NOW) if c.role == "code"]
    shapes = {"Booking": re.compile(r"BK-\d+"), "Traveler": re.compile(r"[A-Z]-\d+")}
    tags = tag_codes(text, codes, {"Trip": ("trip",)}, shapes)
    # keyword first (TR-9 matches no shape but "trip" precedes it); shape for the rest;
    # U-7 matches one shape only; BK-44 matches only Booking (fullmatch, not search)
    assert tags == {"TR-9": "Trip", "BK-44": "Booking", "U-7": "Traveler"}
    assert tag_codes(text, codes, {}, {"A": re.compile(r"\w+-\d+"), "B": re.compile(r"BK-\d+")}).get("BK-44") is None


def test_is_question_english_and_chinese() -> None:
    asks = [
        "Where is order 20455 now",
        "has it shipped?",
        "订单44144是不是已经签收了",
        "请问什么时候到",
        "我的订单到哪了",
    ]
    tells = ["I paid for order 555 today", "订单87878发错货了", "Your courier was rude, order 21212", "Cancel BK-44"]
    assert all(is_question(t) for t in asks)
    assert not any(is_question(t) for t in tells)


def test_an_address_ends_at_its_street_word_unless_a_unit_follows() -> None:
    from appliance.extract.spans import find_spans

    lang = language_for(("en",))
    now = datetime(2026, 5, 4)

    def addresses(text: str) -> list[str]:
        return [s.text for s in find_spans(lang, text, now) if s.kind == "address"]

    assert addresses("I need a cab to 100 Van Ness Avenue ASAP!") == ["100 Van Ness Avenue"]
    assert addresses("a cab to 16 Mint Plaza with my friends") == ["16 Mint Plaza"]
    assert addresses("the office is at 310 Sutter Street 4th Floor") == ["310 Sutter Street 4th Floor"]
    assert addresses("I want to head to 45 San Clemente Drive b200.") == ["45 San Clemente Drive b200"]
    # a full stop after the street word ends the address with the sentence
    assert addresses("I need to go to 1546 Maurice Lane. Just one person") == ["1546 Maurice Lane"]
    texts = [s.text for s in find_spans(lang, "Actually I need to go to Iberia instead.", now) if s.kind == "text"]
    assert "Iberia" in texts and "Iberia instead" not in texts


def test_a_capitalised_function_word_stays_inside_a_name_but_never_ends_one() -> None:
    from appliance.extract.spans import find_spans

    lang = language_for(("en",))
    now = datetime(2026, 5, 4)

    def texts(text: str) -> list[str]:
        return [s.text for s in find_spans(lang, text, now) if s.kind == "text"]

    found = texts("Take me to Banquets Fine Indian Cuisine instead.")
    assert "Banquets Fine Indian Cuisine" in found
    assert not any(t.split()[0] == "Fine" or t.split()[-1] == "Fine" for t in found)
    assert texts("That's fine. Great Thanks") == []  # sentence-initial, lower-case: no name
    assert "kind" not in " ".join(texts("find comic kind of movies"))  # "kind of" is no value
    assert "Ellie" in texts("Ellie's sunflowers are taller than me")  # the owner, not "Ellie's"
    assert "Ellie's" not in texts("Ellie's sunflowers are taller than me")
    assert "Denny's" in texts("Book a table at Denny's in San Jose")  # a name that is a possessive


def test_derived_words_share_a_root_and_short_words_keep_their_ending() -> None:
    en = language_for(("en",))
    assert en.root("directed") == en.root("director") == "direct"
    assert en.root("starring") == en.root("starred") == "star"
    assert en.root("travelers") != en.root("transfers")
    assert [en.root(w) for w in ("order", "rider", "actor", "leo")] == ["order", "rider", "actor", "leo"]
    assert language_for(("zh",)).root("导演") == "导演"


@pytest.mark.parametrize(
    ("text", "dates"),
    [
        ("How does Margaret take her tea?", []),  # "Mar…" is no month
        ("I started reading a novel by Octavia Butler", []),
        ("we decided to meet at the market", []),
        ("maybe I may come", []),  # "may" the verb
        ("Leo turns 21 on February 9th", ["2026-02-09"]),
        ("on Feb. 3 2025", ["2025-02-03"]),
        ("the 3rd of March", ["2026-03-03"]),
        ("Sept 14", ["2026-09-14"]),
        ("in May 2023", ["2023-05"]),
        ("last December", ["2025-12"]),
    ],
)
def test_months_are_whole_words(text: str, dates: list[str]) -> None:
    from appliance.lang.dates import find_dates

    now = datetime(2026, 6, 30, tzinfo=UTC)
    assert [d.value for d in find_dates(language_for(), text, now)] == dates


@pytest.mark.parametrize(
    ("text", "day"),
    [  # said on Saturday 21 March 2026
        ("Iris: I ran 10 kilometers for the first time on Thursday.", "2026-03-19"),  # told in the past
        ("Ben: My manager told me on Monday, it starts in May.", "2026-03-16"),
        ("She started on Monday.", "2026-03-16"),  # a subject, then a past ending
        ("Did you go on Monday?", "2026-03-16"),
        ("Ben: I went surfing for the first time on Saturday.", "2026-03-14"),  # "went", then "-ing"
        ("I ran there this Monday.", "2026-03-16"),  # this week's Monday, already past
        ("We went there this Sunday.", "2026-03-22"),  # this week's Sunday is still ahead
        ("I'm meeting her this Monday.", "2026-03-23"),
        ("周一去了医院。", "2026-03-16"),
        ("Let's meet on Thursday.", "2026-03-26"),  # not the past: the one ahead
        ("I need it on Monday.", "2026-03-23"),  # "need" is no past verb
        ("I was hoping to pick it up Thursday.", "2026-03-26"),  # a polite present
        ("周一去医院。", "2026-03-23"),
    ],
)
def test_a_bare_weekday_told_in_the_past_is_the_one_before(text: str, day: str) -> None:
    from appliance.lang.dates import find_dates

    found = find_dates(language_for(("en", "zh")), text, datetime(2026, 3, 21, 20, 0, tzinfo=UTC))
    assert [d.first.isoformat() for d in found if d.first is not None][:1] == [day]


@pytest.mark.parametrize(
    ("text", "first", "last"),
    [
        ("we adopted a dog last weekend", "2026-03-28", "2026-03-29"),  # said on Thursday 2 April
        ("this weekend we go hiking", "2026-04-04", "2026-04-05"),
        ("next weekend", "2026-04-11", "2026-04-12"),
        ("我上周末去了杭州", "2026-03-28", "2026-03-29"),
        ("这周末去爬山", "2026-04-04", "2026-04-05"),
        ("三天前我去了医院", "2026-03-30", "2026-03-30"),
        ("两个星期前", "2026-03-19", "2026-03-19"),
        ("活动要改到四月十九号了", "2026-04-19", "2026-04-19"),  # Chinese numerals
        ("十二月三十一日", "2026-12-31", "2026-12-31"),
    ],
)
def test_weekends_and_days_ago(text: str, first: str, last: str) -> None:
    from datetime import UTC, datetime

    from appliance.lang.dates import find_dates

    (found,) = find_dates(language_for(("en", "zh")), text, datetime(2026, 4, 2, 20, 0, tzinfo=UTC))
    assert (found.first.isoformat() if found.first else None, found.last.isoformat() if found.last else None) == (
        first,
        last,
    )


def test_the_context_resolves_the_days_a_memory_states_against_when_it_was_said() -> None:
    from datetime import UTC, datetime

    from appliance.domain.records import MemoryRecord, RankedMemory
    from appliance.recall.context import compose

    said = MemoryRecord(
        memory_id="m1",
        session_id="s",
        timestamp=datetime(2026, 3, 7, 18, 57, tzinfo=UTC),
        schema_id="x",
        status="ok",
        confidence=0.9,
        source_text="Nora: I ran 8 kilometres yesterday without stopping.",
    )
    context = compose([], [RankedMemory(memory=said, score=1.0, paths=["lexical"])], lang=language_for(("en",)))
    assert '"Nora: I ran 8 kilometres yesterday without stopping." (yesterday = 2026-03-06)' in context


def test_a_chinese_question_word_keeps_its_measure_word() -> None:
    """ "哪所大学" asks for a university: the piece is "大学", not a name "所大学"; and a metro
    line ("三号线") is no day of the month."""
    from appliance.lang.dates import find_dates
    from appliance.lang.segment import cjk_pieces, tokens

    lang = language_for(("zh",))
    pieces = [p.text for tok in tokens("阿琳想考哪所大学？") if tok.cjk for p in cjk_pieces(lang, tok)]
    assert "大学" in pieces and "所大学" not in pieces
    assert find_dates(lang, "三号线", datetime(2026, 1, 1, tzinfo=UTC)) == []


def test_a_speaker_label_ends_where_a_sentence_starts() -> None:
    """ "Ben: Amazing!!" — the word after a speaker label opens a sentence, so its capital makes
    no name (a transcript made persons "Amazing", "Congratulations", "Welcome"); a capitalised
    word later in the turn still is one."""
    from appliance.extract.spans import find_spans
    from appliance.lang.speakers import opening

    lang = language_for(("en",))
    now = datetime(2026, 5, 4)

    def names(text: str) -> list[str]:
        return [s.text for s in find_spans(lang, text, now) if s.kind == "text" and s.capital]

    assert opening("Ben: Amazing!! Was the ankle ok?") == 5 and opening("no label here") == 0
    assert names("Ben: Amazing!! Was the ankle ok?") == []
    assert names("Nora: Congratulations on the job") == []
    assert "Tasha" in names("Nora: I know, but my friend Tasha talked me into it.")
    assert "Amazing" in names("The film was called Amazing")  # mid-sentence, unlabelled: a name


def test_a_name_said_to_someone_is_no_subject() -> None:
    """ "Hey Nora! Lisbon is great …" — Nora is addressed; the rest is no fact about her. A name
    after other words ("I met Tasha, …") or an answer naming a place ("Yes, San Jose.") is kept."""
    from appliance.extract.spans import find_spans

    lang = language_for(("en",))
    now = datetime(2026, 5, 4)

    def names(text: str) -> list[str]:
        return [s.text for s in find_spans(lang, text, now) if s.kind == "text" and s.capital]

    assert "Nora" not in names("Ben: Hey Nora! Lisbon is great, better than Manchester.")
    assert "Manchester" in names("Ben: Hey Nora! Lisbon is great, better than Manchester.")
    assert names("Ben: Bye Nora, say hi to Marcus!") == ["Marcus"]
    assert names("Thanks, Ben.") == []
    assert "Tasha" in names("Nora: I met Tasha, she was lovely")
    assert "San Jose" in names("Yes, San Jose.")
    assert "New York" in names("New York.")  # a bare answer, addressed to no one


def test_a_name_cut_at_a_function_word_inside_it_is_offered_whole() -> None:
    """ "维也纳国际酒店(北京首体店)", "北京都季商旅酒店", "颐和园": the splitter cuts at 也 / 都 / 和;
    the pieces are offered joined again — but never across a preposition ("老书虫到万寿山")."""
    from appliance.extract.spans import find_spans

    lang = language_for(("zh",))
    now = datetime(2026, 5, 4)

    def texts(text: str) -> list[str]:
        return [s.text for s in find_spans(lang, text, now) if s.kind == "text"]

    assert "维也纳国际酒店(北京首体店)" in texts("维也纳国际酒店(北京首体店)有棋牌室吗？")
    assert "北京都季商旅酒店" in texts("北京都季商旅酒店的附近有什么餐馆可以用餐吗？")
    assert "颐和园" in texts("从颐和园到庆丰包子铺(月坛店)乘坐出租车")
    assert "老书虫到万寿山" not in texts("我打算坐出租车从老书虫到万寿山")
    assert "故宫和颐" not in texts("故宫和颐和园哪个好玩")


def test_a_bare_agreement_says_yes_and_nothing_else() -> None:
    bare = ["Yes, that's fine.", "That sounds good.", "Yes that works.", "ok", "好的", "好的，谢谢"]
    more = ["Yes, please book it", "Yes, 2 people", "是的，要有早餐", "Thanks!", "Paris is fine"]
    assert all(LANG.bare_agreement(t) for t in bare)
    assert not any(LANG.bare_agreement(t) for t in more)


def test_the_digits_of_a_code_are_no_number_of_their_own() -> None:
    from appliance.extract.spans import find_spans

    def kinds(text: str) -> dict[str, str]:
        return {s.text: s.kind for s in find_spans(LANG, text, NOW)}

    assert "99" not in kinds("How much is left of the budget for trip TR-99?")  # "TR-99" is a code
    assert "123" not in kinds("取消BK-123这张票")
    said = kinds("Order 33133 for 2 people")
    assert said["33133"] in ("number", "code") and said["2"] == "number"  # a number said on its own stays


@pytest.mark.parametrize(
    ("text", "surface", "value"),
    [
        ("transfer five hundred and thirty dollars.", "five hundred and thirty dollars", 530.0),
        ("one thousand three hundred and forty bucks to Grace", "one thousand three hundred and forty bucks", 1340.0),
        ("two thousand and five", "two thousand and five", 2005.0),
        ("five hundred and then some", "five hundred", 500.0),  # "and" joins only a number word
    ],
)
def test_a_number_in_words_goes_on_after_its_scale_and_joiner(text: str, surface: str, value: float) -> None:
    from appliance.extract.spans import find_spans

    assert [(s.text, s.value) for s in find_spans(LANG, text, NOW) if s.kind == "number"] == [(surface, value)]


@pytest.mark.parametrize(
    ("text", "surface", "value"),
    [
        ("人均100-150元的餐馆", "100-150元", "100-150"),
        ("能玩2-4个小时的景点", "2-4个小时", "2-4"),
        ("游玩时间3天 - 6天的景点", "3天 - 6天", "3-6"),  # 天 is a unit
        ("游玩时间0.3小时 - 0.3小时的", "0.3小时 - 0.3小时", "0.3-0.3"),  # equal ends, both with their unit
        ("能玩12小时-3天的景点", "12小时-3天", "12小时-3天"),  # ends in two units: kept as written
        ("between 50 and 100 dollars", "between 50 and 100 dollars", "50-100"),
    ],
)
def test_a_range_is_read_whole_with_the_units_of_its_ends(text: str, surface: str, value: str) -> None:
    from appliance.lang.numbers import find_numbers

    widest = find_numbers(LANG, text)[0]
    assert (widest.surface, widest.value) == (surface, value)


def test_equal_or_falling_numbers_without_units_are_no_range() -> None:
    from appliance.lang.numbers import find_numbers

    assert [n.surface for n in find_numbers(LANG, "from 5 to 3 people")] == ["5", "3"]
    assert [n.surface for n in find_numbers(LANG, "3-3 stars")] == ["3", "3"]


def test_a_cjk_piece_is_also_offered_without_the_verb_glued_after_it() -> None:
    from appliance.extract.spans import find_spans

    spans = find_spans(language_for(("zh",)), "红烧肉做了，酱油用完了", NOW)
    cut = {s.text for s in spans if s.kind == "text" and s.cut}
    whole = {s.text for s in spans if s.kind == "text" and not s.cut}
    verbal = {s.text for s in spans if s.kind == "text" and s.verbal}
    assert {"红烧肉", "酱油"} <= whole - verbal  # the noun without "做" / "用完": whole words
    assert {"红烧肉做", "酱油用完"} <= verbal  # the piece itself stays, marked: the scorer weighs it
    assert "烧肉做" in cut  # an edge inside a word ("红烧肉")


def test_a_function_word_inside_a_noun_does_not_cut_it() -> None:
    from appliance.extract.spans import find_spans

    texts = {s.text for s in find_spans(language_for(("zh",)), "卧室的被子装了2号箱，水电过户还没办", NOW)}
    assert {"被子", "水电过户"} <= texts


def test_a_title_in_book_quotes_is_one_value() -> None:
    from appliance.extract.spans import find_spans

    spans = find_spans(language_for(("zh",)), "《童年的回忆》开始练了", NOW)
    assert any(s.text == "童年的回忆" and s.quoted for s in spans)


def test_a_negation_ends_the_cjk_thing_it_follows() -> None:
    from appliance.extract.spans import find_spans

    texts = {s.text for s in find_spans(language_for(("zh",)), "陈老师不上门，书桌不卖了", NOW)}
    assert {"陈老师", "书桌"} <= texts
    assert not {"陈老师不", "书桌不"} & texts


@pytest.mark.parametrize(
    ("text", "value"),
    [("Game night at Tom's this Saturday, 7pm", "19:00"), ("Thursday at 10am", "10:00"), ("at 7:30pm", "19:30")],
)
def test_a_period_glued_to_the_hour_is_read(text: str, value: str) -> None:
    from appliance.lang.times import find_times

    assert [t.value for t in find_times(LANG, text)] == [value]
    assert find_times(LANG, "3 amps and 7 people") == []


def test_a_possessive_with_nothing_owned_after_it_offers_its_owner_too() -> None:
    from appliance.extract.spans import find_spans

    texts = {s.text for s in find_spans(LANG, "Game night at Tom's this Saturday", NOW)}
    assert {"Tom's", "Tom"} <= texts


def test_a_verb_opening_the_sentence_opens_no_name() -> None:
    from appliance.extract.spans import find_spans

    capital = {s.text for s in find_spans(LANG, "Lent Azul to Priya today. New York was fun", NOW) if s.capital}
    assert {"Azul", "Priya", "New York"} <= capital
    assert "Lent Azul" not in capital
    assert LANG.verb_form("Booked") and LANG.verb_form("lent") and not LANG.verb_form("Red")


@pytest.mark.parametrize(
    ("text", "offered"),
    [
        ("Bought Pegasus 41s, $130, for the long runs", "Pegasus 41s"),
        ("Signed up for the Harbour 10K on July 12", "Harbour 10K"),
    ],
)
def test_a_name_with_its_number_is_offered_whole(text: str, offered: str) -> None:
    from appliance.extract.spans import find_spans

    assert offered in {s.text for s in find_spans(LANG, text, NOW) if s.kind == "text" and s.capital}


@pytest.mark.parametrize("text", ["Table at Nopa 7pm", "Paid Ana 50 dollars", "Lunch with Ana Friday 3"])
def test_a_time_an_amount_or_a_date_is_no_part_of_a_name(text: str) -> None:
    from appliance.extract.spans import find_spans

    named = [s.text for s in find_spans(LANG, text, NOW) if s.kind == "text" and any(ch.isdigit() for ch in s.text)]
    assert named == []


@pytest.mark.parametrize(
    ("span", "after", "verbal"),
    [
        ("keeping", "", True),
        ("would've", " passed", True),
        ("Lent Cascadia", " to Marcus", True),
        ("Spirit Island", "", False),
        ("酱油用完", "了", True),  # a piece before an aspect particle ends with its verb
        ("北京", "到上海", False),  # a preposition follows nouns too
        ("钢琴", "", False),
    ],
)
def test_a_verb_phrase_is_told_from_a_name(span: str, after: str, verbal: bool) -> None:
    assert LANG.verbal(span, after) is verbal


def test_a_piece_of_a_longer_name_is_marked() -> None:
    from appliance.domain.loading import parse_schema
    from appliance.extract.evidence import SchemaEvidence
    from appliance.extract.spans import find_spans

    games = {
        "schema_version": "1.0",
        "domain": "games",
        "languages": ["en"],
        "entities": {
            "Game": {
                "description": "a board game I own",
                "key": ["title"],
                "attributes": [{"name": "title", "kind": "string", "description": "the game's title"}],
            }
        },
        "event_types": [
            {"name": "game_note", "entity": "Game", "description": "about a game", "attributes": ["title"]}
        ],
    }
    evidence = SchemaEvidence(parse_schema(games), None)
    text = "We played Spirit Island last night"
    cands = evidence.candidates("Game", text, find_spans(LANG, text, NOW), score=False)["title"]
    inside = {c.surface: c.features["inside_name"] for c in cands}
    assert inside["Spirit"] == 1.0 and inside["Island"] == 1.0 and inside["Spirit Island"] == 0.0
    # a word touching a number is its unit or label; one a word away is not
    text = "We rode 42 km to Lake Tahoe, then home"
    cands = evidence.candidates("Game", text, find_spans(LANG, text, NOW), score=False)["title"]
    beside = {c.surface: c.features.get("beside_number") for c in cands}
    assert beside["km"] == 1.0 and beside["rode"] == 1.0 and beside["Lake Tahoe"] == 0.0 and beside["home"] == 0.0
    # a piece of a quoted title is a piece of a name too, and the title keeps its quotes
    zh = language_for(("zh",))
    text = "《童年的回忆》开始练了"
    cands = evidence.candidates("Game", text, find_spans(zh, text, NOW), score=False)["title"]
    marks = {c.surface: (c.features["inside_name"], c.features["quoted"]) for c in cands}
    assert marks["童年的回忆"] == (0.0, 1.0) and marks["童年"][0] == 1.0


@pytest.mark.parametrize(
    ("text", "word", "scope", "negated"),
    [
        ("Commute, didn't get a flat", "flat", 2, True),
        ("Commute, didn't get a flat", "flat", 0, False),  # without a scope only what stands right after it
        ("它不算易碎，就是重", "易碎", 1, True),
        ("not cheap but has wifi", "wifi", 5, False),  # a contrast ends the negation's clause
        ("no pets, wifi included", "wifi", 5, False),  # so does a clause end
        ("I don't think the old tyre on the back has a flat", "flat", 2, False),  # too far
    ],
)
def test_a_negation_reaches_a_fitted_number_of_words_in_its_clause(
    text: str, word: str, scope: int, negated: bool
) -> None:
    low = text.lower()
    assert LANG.negated_at(low, low.find(word), scope) is negated


@pytest.mark.parametrize(
    ("text", "times"),
    [
        ("weighed biscuit this morning 13.6kg", []),  # a weight after the day period, no hour
        ("morning 135 people came", []),  # no hour inside a longer number
        ("this morning 9 am", ["09:00"]),
        ("morning 11:30", ["11:30"]),
    ],
)
def test_an_hour_is_a_whole_number(text: str, times: list[str]) -> None:
    from appliance.lang.times import find_times

    assert [t.value for t in find_times(LANG, text)] == times
