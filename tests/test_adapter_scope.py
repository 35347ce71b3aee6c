"""The LangGraph/LangChain adapter keeps namespaces and sessions apart, as LangGraph's own
``InMemoryStore`` does (the same operations run on both, side by side). Over a FakeEngine: what is
tested is the adapter's scoping, not extraction."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.store.memory import InMemoryStore

from appliance.edges.langchain_adapter import ApplianceChatHistory, ApplianceRetriever, ApplianceStore
from appliance.errors import AccessDenied, InputError

SPACES = [("user-4", "memories"), ("user-42", "memories"), ("user-420", "notes"), ("user-4%", "x"), ("user-4",)]


def _filled(store: Any) -> Any:
    for i, ns in enumerate(SPACES):
        store.put(ns, f"k{i}", {"text": f"order {40000 + i} for {'/'.join(ns)} was shipped"})
    return store


@pytest.fixture
def stores(fake_app: Any) -> tuple[Any, Any]:
    return _filled(ApplianceStore(fake_app)), _filled(InMemoryStore())


def _seen(items: list[Any]) -> list[tuple[tuple[str, ...], str]]:
    return sorted((tuple(i.namespace), i.key) for i in items)


@pytest.mark.parametrize("prefix", [("user-4",), ("user-4", "memories"), ("user-42",), ("user-4%",), ()])
def test_a_prefix_matches_whole_labels_like_langgraphs_own_store(
    stores: tuple[Any, Any], prefix: tuple[str, ...]
) -> None:
    ours, theirs = stores
    assert _seen(ours.search(prefix, limit=50)) == _seen(theirs.search(prefix, limit=50))


def test_a_search_hit_carries_the_key_it_was_put_under(stores: tuple[Any, Any]) -> None:
    ours, _ = stores
    hits = ours.search(("user-4", "memories"), query="which order was shipped?")
    assert hits and {h.key for h in hits} == {"k0"}
    assert all(h.namespace == ("user-4", "memories") for h in hits)
    got = ours.get(("user-4", "memories"), hits[0].key)
    assert got is not None and "40000" in got.value["text"]


def test_a_question_cannot_reach_other_namespaces(stores: tuple[Any, Any]) -> None:
    ours, _ = stores
    with pytest.raises(AccessDenied):
        ours.search(("user-4", "memories"), query="across all sessions, what happened to order 40001?")


def test_the_retriever_reads_its_own_session_only(fake_app: Any) -> None:
    _filled(ApplianceStore(fake_app))
    retriever = ApplianceRetriever(app=fake_app, session_id="user-4/memories")
    with pytest.raises(AccessDenied):
        retriever.invoke("across all sessions, what happened to order 40001?")
    docs = retriever.invoke("what happened to order 40001?")
    memories = [d for d in docs if not d.metadata.get("not_found")]
    assert all(d.metadata["session_id"] == "user-4/memories" for d in memories)
    assert not any("40001" in d.page_content for d in memories)  # user-42's order


def test_a_chat_history_needs_a_session_and_clears_only_its_own(fake_app: Any) -> None:
    _filled(ApplianceStore(fake_app))
    with pytest.raises(InputError):
        ApplianceChatHistory(fake_app, "")
    before = len(fake_app.list_records(limit=100))
    ApplianceChatHistory(fake_app, "user-4/memories").clear()
    assert len(fake_app.list_records(limit=100)) == before - 1
    assert fake_app.list_records(session="user-42/memories")


LABEL = st.text(alphabet="ab4%_-", min_size=1, max_size=4)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    puts=st.lists(
        st.tuples(st.lists(LABEL, min_size=1, max_size=3).map(tuple), st.text(alphabet="kxy1", min_size=1, max_size=3)),
        min_size=1,
        max_size=6,
    ),
    prefix=st.lists(LABEL, max_size=2).map(tuple),
)
def test_fuzzed_namespaces_and_keys_match_langgraphs_own_store(
    fake_app: Any, puts: list[tuple[tuple[str, ...], str]], prefix: tuple[str, ...]
) -> None:
    ours, theirs = ApplianceStore(fake_app), InMemoryStore()
    for s in fake_app.sessions():  # hypothesis reuses the fixture: start from an empty memory
        for rec in fake_app.list_records(session=s, limit=1000):
            fake_app.delete_record(rec.memory_id)
    for i, (ns, key) in enumerate(puts):
        value = {"text": f"order {70000 + i} was noted"}
        ours.put(ns, key, value)
        theirs.put(ns, key, value)
    assert _seen(ours.search(prefix, limit=100)) == _seen(theirs.search(prefix, limit=100))
    for ns, key in puts:
        mine, ref = ours.get(ns, key), theirs.get(ns, key)
        assert (mine is None) == (ref is None)
        assert mine is None or ref is None or mine.value["text"] == ref.value["text"]
