"""The LangChain/LangGraph adapter with the real appliance (shipped model) underneath: a LangGraph
graph that records and recalls through the store, answered by langchain-core's fake chat model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.store.base import BaseStore

from appliance.api import Appliance
from appliance.edges.langchain_adapter import ApplianceChatHistory, ApplianceRetriever, ApplianceStore
from appliance.errors import InputError

pytestmark = pytest.mark.real_model


@pytest.fixture
def app(tmp_path: Path, real_engine) -> Any:  # type: ignore[no-untyped-def]
    from appliance.config import Settings

    settings = Settings.from_env({"APPLIANCE_HOME": str(tmp_path)})
    a = Appliance(db=tmp_path / "m.duckdb", model=real_engine, settings=settings)
    yield a
    a.close()


def test_store_put_get_search_delete(app: Appliance) -> None:
    store = ApplianceStore(app)
    ns = ("alice", "memories")
    store.put(ns, "m1", {"text": "Order 55501 arrived broken"})
    store.put(ns, "m2", {"text": "订单44144还没发货"})
    item = store.get(ns, "m1")
    assert item is not None and item.value["entity_id"] == "55501" and item.value["entity_type"] == "Order"
    hits = store.search(("alice",), query="What happened to order 55501?", limit=3)
    assert hits and hits[0].value["entity_id"] == "55501" and hits[0].score is not None
    assert [i.value["entity_id"] for i in store.search(ns, filter={"entity_id": "44144"})] == ["44144"]
    store.put(ns, "m1", {"text": "Order 55502 arrived broken"})  # same key: the memory is replaced
    replaced = store.get(ns, "m1")
    assert replaced is not None and replaced.value["text"] == "Order 55502 arrived broken"
    assert "55502" in replaced.value["summary"] and replaced.value["memory_id"] != item.value["memory_id"]
    store.delete(ns, "m1")
    assert store.get(ns, "m1") is None
    assert ("alice", "memories") in store.list_namespaces(prefix=("alice",))
    with pytest.raises(InputError):
        store.put(ns, "m3", {"title": "no text"})


def test_a_langgraph_graph_records_and_recalls_through_the_store(app: Appliance) -> None:
    seen: list[list[Any]] = []
    model = GenericFakeChatModel(messages=iter([AIMessage(content="Noted."), AIMessage(content="It arrived broken.")]))

    def remember(state: MessagesState, *, store: BaseStore) -> dict[str, Any]:
        last = state["messages"][-1]
        store.put(("bob", "memories"), str(last.id), {"text": last.content})
        return {}

    def answer(state: MessagesState, *, store: BaseStore) -> dict[str, Any]:
        question = str(state["messages"][-1].content)
        found = store.search(("bob", "memories"), query=question, limit=3)
        prompt = [SystemMessage(content="Memories:\n" + "\n".join(i.value["text"] for i in found)), *state["messages"]]
        seen.append(prompt)
        return {"messages": [model.invoke(prompt)]}

    graph = StateGraph(MessagesState)
    graph.add_node("remember", remember)
    graph.add_node("answer", answer)
    graph.add_edge(START, "remember")
    graph.add_edge("remember", "answer")
    compiled = graph.compile(store=ApplianceStore(app))
    compiled.invoke({"messages": [HumanMessage(content="My order 77123 arrived broken", id="u1")]})
    out = compiled.invoke({"messages": [HumanMessage(content="What happened to order 77123?", id="u2")]})
    assert out["messages"][-1].content == "It arrived broken."
    assert "77123 arrived broken" in seen[-1][0].content  # the model was given the recalled memory


def test_retriever_and_chat_history(app: Appliance) -> None:
    history = ApplianceChatHistory(app, "carol")
    history.add_messages([HumanMessage(content="Order 88001 was paid 30 yuan"), AIMessage(content="Got it.")])
    assert [type(m).__name__ for m in history.messages] == ["HumanMessage", "AIMessage"]
    docs = ApplianceRetriever(app=app, session_id="carol", k=3).invoke("Was order 88001 paid?")
    assert docs and docs[0].metadata["entity_id"] == "88001"
    missing = ApplianceRetriever(app=app, session_id="carol").invoke("Where is order 99999?")
    assert missing[0].page_content.startswith("NOT FOUND")
    history.clear()
    assert app.list_records(session="carol") == []


def test_the_docs_langgraph_example_runs_as_written(tmp_path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    """The LangGraph block of docs/agents.md, executed as a user would paste it: the graph
    records the message through the store and the retriever finds it."""
    import re

    from appliance.config import PROJECT_ROOT

    doc = (PROJECT_ROOT / "docs" / "agents.md").read_text(encoding="utf-8")
    block = re.search(r"```python\n(.*?)```", doc, re.S)
    assert block is not None
    monkeypatch.chdir(tmp_path)  # its memory.duckdb is made here
    monkeypatch.setenv("APPLIANCE_HOME", str(tmp_path / "home"))
    scope: dict[str, object] = {}
    exec(compile(block.group(1), "docs/agents.md", "exec"), scope)  # noqa: S102 - the docs' own example
    stored = scope["app"].store.counts()["memories"]  # type: ignore[attr-defined]
    scope["app"].close()  # type: ignore[attr-defined]
    assert "Lisbon" in capsys.readouterr().out and stored >= 1
