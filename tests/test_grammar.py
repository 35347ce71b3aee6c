from __future__ import annotations

import json
import random
import re

import pytest
from outlines_core import Index, Vocabulary

from appliance.domain.drafts import draft_model
from appliance.domain.loading import load_schema
from appliance.model.grammar import GrammarCache

from .conftest import SCHEMAS

CS = load_schema(SCHEMAS / "customer_service.json")


def _char_vocab() -> Vocabulary:
    """Single-byte tokens plus a few multi-byte CJK tokens: enough to walk any record."""
    toks: dict[bytes, list[int]] = {bytes([i]): [i] for i in range(32, 127)}
    for j, ch in enumerate("订单号你好"):
        toks[ch.encode()] = [200 + j]
    return Vocabulary(300, toks)


def _random_admitted(index: Index, rng: random.Random, inv: dict[int, bytes]) -> str:
    state = index.get_initial_state()
    out = b""
    for _ in range(4000):
        allowed = [t for t in index.get_allowed_tokens(state) if t != 300]
        if index.is_final_state(state) and (not allowed or rng.random() < 0.5):
            return out.decode()
        # Prefer closing strings so walks terminate; otherwise any admitted token.
        closing = [t for t in allowed if inv[t] in (b'"', b"}", b"]", b"n")]
        tok = rng.choice(closing) if closing and rng.random() < 0.6 else rng.choice(allowed)
        out += inv[tok]
        state = index.get_next_state(state, tok)
        assert state is not None
    raise AssertionError("walk did not terminate")


def test_every_admitted_record_validates(tmp_path) -> None:  # type: ignore[no-untyped-def]
    compiled = GrammarCache(tmp_path).compile(CS)
    vocab = _char_vocab()
    index = Index(compiled.record_regex, vocab)
    inv = {i: bytes([i]) for i in range(32, 127)} | {200 + j: ch.encode() for j, ch in enumerate("订单号你好")}
    model = draft_model(CS)
    rng = random.Random(7)
    seen_events = set()
    for _ in range(150):
        text = _random_admitted(index, rng, inv)
        rec = model.model_validate_json(text)  # raises if the grammar admitted an invalid record
        seen_events.add(rec.event_type)  # type: ignore[attr-defined]
    assert len(seen_events) >= 3  # the walk explores, it does not repeat one path


FORBIDDEN = [
    {
        "event_type": "refund",
        "entity": {
            "type": "Order",
            "id": "1",
            "state": None,
            "attributes": {"user_id": None, "create_time": None, "amount": None, "payment_status": None},
        },
        "relationships": [],
    },
    {
        "event_type": "order_created",
        "entity": {
            "type": "Order",
            "id": "1",
            "state": "lost",
            "attributes": {"user_id": None, "create_time": None, "amount": None, "payment_status": None},
        },
        "relationships": [],
    },
    {
        "event_type": "order_created",
        "entity": {
            "type": "Order",
            "id": "1",
            "state": None,
            "attributes": {
                "user_id": None,
                "create_time": None,
                "amount": None,
                "payment_status": None,
                "colour": "red",
            },
        },
        "relationships": [],
    },
    {
        "event_type": "order_created",
        "entity": {"type": "User", "id": "1", "state": "paid", "attributes": {"name": None, "contact_info": None}},
        "relationships": [],
    },
    {
        "event_type": "order_created",
        "entity": {"type": "Refund", "id": "1", "state": None, "attributes": {}},
        "relationships": [],
    },
    {
        "event_type": "order_created",
        "entity": {
            "type": "Order",
            "id": "1",
            "state": None,
            "attributes": {"user_id": None, "create_time": None, "amount": "lots", "payment_status": None},
        },
        "relationships": [],
    },
    {
        "event_type": "order_created",
        "entity": {
            "type": "Order",
            "id": "1",
            "state": None,
            "attributes": {"user_id": None, "create_time": None, "amount": None, "payment_status": None},
        },
        "relationships": [{"type": "LIKES", "from_type": "User", "from_id": "1", "to_type": "Order", "to_id": "1"}],
    },
    {
        "event_type": "order_created",
        "entity": {
            "type": "Order",
            "id": "1",
            "state": None,
            "attributes": {"user_id": None, "create_time": None, "amount": None, "payment_status": None},
        },
        "relationships": [{"type": "OWNS", "from_type": "Order", "from_id": "1", "to_type": "User", "to_id": "1"}],
    },
]


@pytest.mark.parametrize("record", FORBIDDEN)
def test_records_the_schema_forbids_are_rejected(tmp_path, record) -> None:  # type: ignore[no-untyped-def]
    compiled = GrammarCache(tmp_path).compile(CS)
    text = json.dumps(record, separators=(",", ":"))
    assert not re.fullmatch(compiled.record_regex, text)
    with pytest.raises(ValueError):
        draft_model(CS).model_validate_json(text)


def test_a_valid_record_is_admitted(tmp_path) -> None:  # type: ignore[no-untyped-def]
    compiled = GrammarCache(tmp_path).compile(CS)
    ok = {
        "event_type": "user_inquiry",
        "entity": {
            "type": "Order",
            "id": "4567",
            "state": "paid",
            "attributes": {"user_id": None, "create_time": "2026-12-01", "amount": 12.5, "payment_status": "已付款"},
        },
        "relationships": [{"type": "OWNS", "from_type": "User", "from_id": "U1", "to_type": "Order", "to_id": "4567"}],
    }
    text = json.dumps(ok, separators=(",", ":"), ensure_ascii=False)
    assert re.fullmatch(compiled.record_regex, text)
    draft_model(CS).model_validate_json(text)


def test_compile_is_cached_and_rebuilt_on_change(tmp_path) -> None:  # type: ignore[no-untyped-def]
    cache = GrammarCache(tmp_path)
    cold = cache.compile(CS)
    assert not cold.from_cache
    for name in ("record.schema.json", "query.schema.json", "record.regex", "query.regex", "schema.json"):
        assert (cold.directory / name).exists()
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert CS.schema_id in manifest["schemas"]
    warm = GrammarCache(tmp_path).compile(CS)
    assert warm.from_cache and warm.record_regex == cold.record_regex
    changed = CS.model_copy(update={"schema_version": "9.9"})
    rebuilt = cache.compile(changed)
    assert not rebuilt.from_cache and rebuilt.directory != cold.directory


@pytest.mark.parametrize(("key", "stale"), [("outlines_core", "0.0.1"), ("grammar_format", 1)])
def test_stale_outlines_or_generator_version_prunes_cache(tmp_path, key: str, stale: object) -> None:  # type: ignore[no-untyped-def]
    cache = GrammarCache(tmp_path)
    c = cache.compile(CS)
    (c.directory / "query.regex").write_text("stale")
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    manifest[key] = stale
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    again = GrammarCache(tmp_path).compile(CS)
    assert not again.from_cache and c.directory.exists()
    assert again.query_regex != "stale" and (c.directory / "query.regex").read_text() == again.query_regex


def test_index_is_pickled_and_reloaded(tmp_path) -> None:  # type: ignore[no-untyped-def]
    cache = GrammarCache(tmp_path)
    c = cache.compile(CS)
    vocab = _char_vocab()
    idx = cache.index(c, "query", vocab, "charvocab")
    assert (c.directory / "query.charvocab.index").exists()
    again = GrammarCache(tmp_path).index(c, "query", vocab, "charvocab")
    assert again.get_initial_state() == idx.get_initial_state()
