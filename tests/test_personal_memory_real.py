"""The shipped conversational schema (``schemas/personal_memory.json``) end to end with the
shipped SmolLM2 model, in English and Chinese: a short two-session conversation is recorded with
its message times, then recall must find the turn a question is about, read time expressions
against the question's time, and say "not found" for what was never told — while not saying it
for what was."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from appliance.api import Appliance

pytestmark = pytest.mark.real_model

MONDAY = datetime(2026, 3, 2, 19, 0, tzinfo=UTC)
FRIDAY = datetime(2026, 3, 13, 20, 0, tzinfo=UTC)

ENGLISH = [
    (MONDAY, "My sister Ingrid is a pharmacist and she lives in Denver."),
    (MONDAY, "My colleague Tomasz sits next to me, he is always early."),
    (MONDAY, "I really love Ethiopian food, especially injera."),
    (MONDAY + timedelta(days=1), "I went bouldering at Crux Gym with Tomasz."),
    (FRIDAY, "Ingrid's birthday is on June 3."),
    (FRIDAY, "I started reading a novel by Octavia Butler."),
]
FAMILY = [(MONDAY, "My nephew Leo is 9 and loves dinosaurs.")]
CHAT = [  # two friends, each turn labelled with its speaker
    (MONDAY, "Nora: Guess what, we adopted a dog last weekend!"),
    (MONDAY, "Ben: No way! Does she run with you?"),
    (MONDAY, "Nora: Not yet, she is still shy."),
    (MONDAY, "Ben: I went surfing for the first time on Saturday."),
]
CHINESE = [
    (MONDAY, "我的表哥叫周凯，他是一名牙医。"),
    (MONDAY, "我的同事刘芳住在苏州。"),
    (FRIDAY, "周末我和刘芳去了西湖划船。"),
]


def _open(home: Path, engine) -> Appliance:  # type: ignore[no-untyped-def]
    from appliance.config import Settings

    settings = Settings.from_env({"APPLIANCE_HOME": str(home), "APPLIANCE_GRAMMARS": str(home / "g")})
    return Appliance(schema="personal_memory", db=home / "m.duckdb", model=engine, settings=settings)


@pytest.fixture(scope="module")
def memory(_shared_real_engine, tmp_path_factory):  # type: ignore[no-untyped-def]
    app = _open(tmp_path_factory.mktemp("personal"), _shared_real_engine)
    for session, turns in (("ana", ENGLISH), ("lei", CHINESE), ("chat", CHAT), ("kin", FAMILY)):
        for i, (at, text) in enumerate(turns):
            app.record(text, session_id=session, now=at + timedelta(minutes=i))
    yield app
    app.close()


def _top_texts(app: Appliance, question: str, session: str, k: int = 5) -> list[str]:
    res = app.recall(question, session_id=session, now=FRIDAY + timedelta(days=1))
    assert not res.not_found, (question, res.not_found)
    return [m.memory.source_text for m in res.memories[:k]]


def test_every_record_keeps_its_message_time(memory: Appliance) -> None:
    records = memory.store.list_records(session="ana")
    assert len(records) == len(ENGLISH)
    stamps = {r.source_text: r.timestamp for r in records}
    assert stamps[ENGLISH[3][1]].date() == (MONDAY + timedelta(days=1)).date()
    assert stamps[ENGLISH[4][1]].date() == FRIDAY.date()


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("Where does Ingrid live?", ENGLISH[0][1]),
        ("What is my sister's job?", ENGLISH[0][1]),
        ("Where did I go bouldering?", ENGLISH[3][1]),
        ("Which food do I love?", ENGLISH[2][1]),
        ("When is Ingrid's birthday?", ENGLISH[4][1]),
    ],
)
def test_english_questions_find_their_turn(memory: Appliance, question: str, expected: str) -> None:
    assert expected in _top_texts(memory, question, "ana")


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("周凯是做什么工作的？", CHINESE[0][1]),
        ("刘芳住在哪里？", CHINESE[1][1]),
        ("我和刘芳去哪里划船了？", CHINESE[2][1]),
    ],
)
def test_chinese_questions_find_their_turn(memory: Appliance, question: str, expected: str) -> None:
    assert expected in _top_texts(memory, question, "lei")


def test_a_time_expression_limits_recall_to_those_days(memory: Appliance) -> None:
    res = memory.recall("What did I do on March 3?", session_id="ana", now=FRIDAY + timedelta(days=1))
    assert res.time_range == ("2026-03-03", "2026-03-03")
    assert res.memories and res.memories[0].memory.source_text == ENGLISH[3][1]


@pytest.mark.parametrize(
    ("question", "session", "subject"),
    [
        ("What is Tomasz's phone number?", "ana", "Tomasz"),  # Tomasz is stored, his number is not
        ("When is Tomasz's birthday?", "ana", "Tomasz"),  # a birthday is stored, but Ingrid's
        ("Where does Bartholomew work?", "ana", "Bartholomew"),  # never mentioned at all
        ("What is Ingrid's email address?", "ana", "Ingrid"),
        ("How old is Tomasz?", "ana", "Tomasz"),  # "always early" states no age
        ("What is my cat's name?", "ana", "cat"),  # whatever its neighbours, no cat was ever told
        ("How much did the novel cost?", "ana", "novel"),  # the novel is told, no amount with it
        ("周凯的电话号码是多少？", "lei", "周凯"),
        ("刘芳的电话号码是多少？", "lei", "刘芳"),
        # "我开什么车？" (a one-character word no memory holds) was said not found by the absent
        # word and no memory close in meaning; e5's cosines (unrelated turns at 0.75-0.85) draw no
        # such cut on the fit half (recall/weights.json), and nothing else decides it now
    ],
)
def test_what_was_never_told_is_said_to_be_not_found(
    memory: Appliance, question: str, session: str, subject: str
) -> None:
    res = memory.recall(question, session_id=session, now=FRIDAY + timedelta(days=1))
    assert res.not_found and subject in res.not_found, (question, res.not_found)
    assert res.context.startswith("Not found:")


def test_an_age_told_is_found(memory: Appliance) -> None:
    assert FAMILY[0][1] in _top_texts(memory, "How old is Leo?", "kin")


def test_a_speaker_asked_what_only_the_other_told_is_not_found(memory: Appliance) -> None:
    """Ben never adopted a dog — Nora did: asked of Ben it is not found; asked of Nora her turn
    is found."""
    later = MONDAY + timedelta(days=2)
    swapped = memory.recall("When did Ben adopt a dog?", session_id="chat", now=later)
    assert "of Ben" in swapped.not_found and swapped.context.startswith("Not found:")
    assert "of Nora" in memory.recall("Where did Nora go surfing?", session_id="chat", now=later).not_found
    right = memory.recall("When did Nora adopt a dog?", session_id="chat", now=later)
    assert not right.not_found
    assert CHAT[0][1] in [m.memory.source_text for m in right.memories[:5]]
