"""Whose fact a transcript turn tells (recall/attribution.py): pure logic, no model."""

from __future__ import annotations

from appliance.lang import language_for
from appliance.recall.attribution import content_words, names, tells_of

LANG = language_for(("en", "zh"))


def test_a_turn_tells_its_speakers_first_person_news_and_asks_the_other_about_theirs() -> None:
    dog = {"dog"}
    assert tells_of(LANG, "Nora: Guess what, we adopted a dog!", "Nora", dog)
    assert not tells_of(LANG, "Nora: Guess what, we adopted a dog!", "Ben", dog)
    # another speaker asking or saying "you" speaks of the one spoken to
    assert tells_of(LANG, "Ben: Does your dog run?", "Nora", dog)
    assert tells_of(LANG, "Ben: Which dog?", "Nora", dog)
    assert not tells_of(LANG, "Ben: Which dog?", "Ben", dog)
    # a statement naming nobody is the speaker's own
    assert tells_of(LANG, "Ben: The dog park, on Sunday.", "Ben", dog)
    # only the sentences saying the words count: "You'll be great." is not what Rotterdam is told in
    rotterdam = {"rotterdam"}
    assert not tells_of(LANG, "Sam: You'll be great. I'm busy packing for Rotterdam.", "Iris", rotterdam)
    assert tells_of(LANG, "Sam: You'll be great. I'm busy packing for Rotterdam.", "Sam", rotterdam)
    # a turn naming the person, or without a speaker, may tell anything of them
    assert tells_of(LANG, "Nora: Ben got a dog too.", "Ben", dog)
    assert tells_of(LANG, "we adopted a dog", "Ben", dog)
    assert tells_of(LANG, "小雨：海豹吗？什么颜色？", "阿浩", {"颜色"})
    assert not tells_of(LANG, "小雨：我们养了一只狗。", "阿浩", {"狗"})


def test_names_are_whole_words_and_content_words_leave_the_person_out() -> None:
    assert names("When did Sam adopt Mochi?", "Sam") and not names("Samantha's dog", "Sam")
    assert names("小雨的老家在哪里？", "小雨")
    words = content_words(["阿浩做", "杯送|茶杯送", "Ben", "dog"], "阿浩", lambda r: r)
    said = [w for w, _ in words]
    assert "阿浩做" not in said and "做" not in said  # the name's stray character is no word
    assert said[:1] == ["茶杯送"] and "dog" in said
    assert content_words(["Nora's Portuguese"], "Nora", lambda r: r)[0][0] == "Portuguese"
