"""Whose fact a transcript turn tells (recall/attribution.py): pure logic, no model."""

from __future__ import annotations

from appliance.lang import language_for
from appliance.recall.attribution import content_words, named_beyond_address, names, tells_of

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
    # a CJK word may carry the verb after it: "茶杯" is one reading of "茶杯送", "杯送" of its
    # shorter cut too, but not cut further ("杯" alone is no reading)
    readings = [set(r) for r in dict(words)["茶杯送"]]
    assert {"茶", "杯", "茶杯"} in readings and {"杯"} not in readings


def test_calling_someone_by_name_is_no_telling_of_them() -> None:
    # "小雨！…我考过游泳了！" is 阿浩's news said to 小雨: the name only calls her
    passed = "阿浩：小雨！告诉你个好消息，我考过游泳了！"
    assert not tells_of(LANG, passed, "小雨", {"游泳"}) and tells_of(LANG, passed, "阿浩", {"游泳"})
    assert not tells_of(LANG, "Sam: Iris! Good, busy. I just got back from Montreal.", "Iris", {"montreal"})
    assert not named_beyond_address(LANG, "Hey Sam, I got back from Montreal.", "Sam")
    # named beyond the call: a name inside a sentence, or after a word that is no greeting
    assert named_beyond_address(LANG, "Dana got engaged! Her boyfriend Felix proposed.", "Felix")
    assert named_beyond_address(LANG, "Tell Felix!", "Felix")
    assert named_beyond_address(LANG, "Iris! Iris got a cat.", "Iris")
    # ...and a name after a comma that ends the sentence calls too
    assert not named_beyond_address(LANG, "That is so cool, Melanie! I went hiking too.", "Melanie")
    assert not named_beyond_address(LANG, "太好了，小雨！", "小雨")
    assert named_beyond_address(LANG, "Wow, Melanie went hiking.", "Melanie")


def test_the_person_is_read_in_the_clauses_holding_the_words() -> None:
    # "我跟你说" says "你", the news after the comma is the speaker's own
    proposal = "小雨：我跟你说，大伟跟我求婚了！"
    assert not tells_of(LANG, proposal, "阿浩", {"求婚"}) and tells_of(LANG, proposal, "小雨", {"求婚"})
    assert tells_of(LANG, "Ben: Congrats, did your dog settle in?", "Nora", {"dog"})
    # a clause naming no one is read with its sentence
    assert tells_of(LANG, "Nora: Congrats on the promotion, you deserve it!", "Ben", {"promot"})
    # no clause holding the words alone: the whole sentence is read
    assert tells_of(LANG, "Ben: You, of all people, adopted a dog?", "Nora", {"adopt", "dog"})
    assert LANG.clauses("我跟你说，大伟跟我求婚了！") == ["我跟你说，", "大伟跟我求婚了！"]
