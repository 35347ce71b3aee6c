"""Lifecycle with the shipped SmolLM2 model: corrections, merges, multi-hop questions,
model-written summaries, and choosing a schema per utterance."""

from __future__ import annotations

import json
import re

import pytest

from appliance.api import Appliance
from appliance.config import Settings
from appliance.lifecycle.compact import SUMMARY_REGEX, SummaryDraft, grounded_sentence

from .conftest import SCHEMAS

pytestmark = pytest.mark.real_model


def _app(real_engine, tmp_path, schema="customer_service", encoder=False):  # type: ignore[no-untyped-def]
    settings = Settings.from_env(
        {
            "APPLIANCE_HOME": str(tmp_path),
            "APPLIANCE_GRAMMARS": str(tmp_path / "g"),
            "APPLIANCE_SCHEMAS": str(SCHEMAS),
            "APPLIANCE_SEMANTIC": "on" if encoder else "off",
        }
    )
    # the product's wiring: extraction's encoder and recall's ("auto"), or none
    return Appliance(
        schema=schema,
        db=tmp_path / "m.duckdb",
        model=real_engine,
        settings=settings,
        embedder="auto" if encoder else None,
    )


def test_correction_and_suffix_merge_from_real_utterances(real_engine, tmp_path) -> None:  # type: ignore[no-untyped-def]
    app = _app(real_engine, tmp_path)
    first = app.record("I paid for order 12345 yesterday", "s")
    assert first.entity_type == "Order" and first.entity_id == "12345"
    fix = app.record("Sorry, not 12345, I meant 12354", "s")
    assert fix.entity_id == "12354" and "corrects memory" in fix.note
    assert app.store.get_record(first.memory_id).entity_id == "12354"  # type: ignore[union-attr]
    assert app.store.entities.get("s", "Order", "12345") is None
    # suffix mention resolves to the one stored id ending in it
    tail = app.record("我的订单尾号2354怎么还没发货", "s")
    assert tail.entity_id == "12354" and "id_suffix_digits" in tail.note
    assert {m["rule"] for m in app.store.merges.recent("s")} == {"correction"}


def test_multi_hop_question_over_recorded_memories(real_engine, tmp_path) -> None:  # type: ignore[no-untyped-def]
    # with the shipped sentence encoder, as the product runs: without it "for $1500" fits an
    # order's amount and its payment status alike (only their descriptions tell them apart)
    app = _app(real_engine, tmp_path, encoder=True)
    # seed users/orders directly (names are not codes the extractor can ground), then
    # record the complaints through the model
    from appliance.domain.records import RecallQuery

    for user, order, amount in (("U-1", "1001", 1500.0), ("U-2", "1002", 300.0), ("U-3", "1003", 2500.0)):
        rec = app.record(f"User {user} placed order {order} for ${amount:.0f}", "s")
        assert rec.entity_id == order, rec
        assert rec.attributes.get("amount") == amount and rec.attributes.get("user_id") == user, rec
    for order, text in (
        ("1001", "Order 1001 is lost by the courier, terrible logistics, I want to complain"),
        ("1002", "Order 1002 logistics is so slow, I want to complain"),
        ("1003", "The screen of order 1003 arrived cracked, I want to complain"),
    ):
        t = app.record(text, "s")
        assert t.entity_type == "ServiceTicket" and t.attributes.get("order_id") == order, t
    res = app.recall("users who complained about logistics on orders over 1000", "s")
    assert res.query.entity_type == "ServiceTicket" and [h.target_type for h in res.query.chain] == ["Order", "User"]
    assert [h.entity.id for h in res.hits] == ["U-1"], res.context
    assert res.sql.count("JOIN relationships") == 2
    zh = app.recall("投诉过物流问题、订单金额超过1000的用户有哪些？", "s")
    assert zh.query.model_dump() == res.query.model_dump() | {"filters": zh.query.model_dump()["filters"]}
    assert [h.entity.id for h in app.query(RecallQuery.model_validate(res.query.model_dump()), "s").hits] == ["U-1"]


def test_model_written_summary_is_grammar_valid_and_grounded(real_engine, tmp_path) -> None:  # type: ignore[no-untyped-def]
    app = _app(real_engine, tmp_path)
    for text in (
        "Where is my order 4567? It has not shipped.",
        "Order 4567 still has not shipped, any news?",
        "订单4567什么时候发货？",
        "I am still waiting for order 4567",
    ):
        app.record(text, "s")
    done = app.compact(entity_type="Order", min_records=4)
    assert len(done) == 1
    summary = app.store.get_record(done[0]["summary_id"])
    assert summary is not None and summary.event_type == "summary" and summary.entity_id == "4567"
    assert len(app.summary_sources(summary.memory_id)) == 4
    raw = summary.raw_output
    if "cut at the token limit" in summary.note:  # never stored as a sentence
        assert summary.source_text.count("\n") == 0
        return
    assert re.fullmatch(SUMMARY_REGEX, raw), raw  # the model wrote under the grammar
    sentence = SummaryDraft.model_validate_json(raw).summary
    sources = app.summary_sources(summary.memory_id)
    if sentence in summary.source_text:  # kept: then it must be grounded
        assert grounded_sentence(sentence, sources) == []
    else:  # dropped: the note says why
        assert "facts only" in summary.note or "dropped" in summary.note
    assert summary.source_text.startswith("Order 4567")


@pytest.mark.parametrize(
    ("text", "domain"),
    [
        ("I booked a hotel in Kyoto for my trip TR-12", "travel_assistant"),
        ("我的订单尾号4567还没发货", "customer_service"),
        ("My order 88812 arrived broken, I want to complain!", "customer_service"),
        ("I prefer window seats on flights", "travel_assistant"),
    ],
)
def test_schema_is_chosen_per_utterance(real_engine, tmp_path, text: str, domain: str) -> None:  # type: ignore[no-untyped-def]
    app = _app(real_engine, tmp_path, schema=["customer_service", "travel_assistant"])
    rec = app.record(text, "s")
    assert rec.schema_id == app.schemas[domain].schema_id, rec.note
    assert f"schema {domain} chosen" in rec.note
    named = app.record(text, "s", schema="customer_service")  # the caller can always name it
    assert named.schema_id == app.schemas["customer_service"].schema_id
    assert json.loads(json.dumps(rec.model_dump(mode="json")))  # stored record is plain JSON
