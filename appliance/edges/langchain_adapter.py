"""LangChain / LangGraph on top of the appliance (optional extra: ``pip install -e ".[langchain]"``),
so an agent keeps its framework's chains, graphs and agents and gains structured memory:

* ``ApplianceStore`` — a LangGraph long-term memory store (``BaseStore``): ``put`` records the
  item's text as a typed memory, ``get`` returns it with its entity, state and attributes,
  ``search(query=…)`` is the appliance's recall (structured + lexical + semantic, fused),
  ``delete`` removes it. A namespace is a session: ``("user-42", "memories")`` →
  session ``user-42/memories``; a put under the same key replaces the earlier memory.
* ``ApplianceRetriever`` — a LangChain retriever: recall as ``Document`` s, best evidence first
  (a NOT FOUND answer comes back as a document that says so, never as another memory).
* ``ApplianceChatHistory`` — a chat message history whose human messages become memories.

Values need a ``text`` (or ``content``/``memory``) string: that is what the appliance reads."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.retrievers import BaseRetriever
from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from ..api import Appliance
from ..domain.records import MemoryRecord
from ..errors import InputError

__all__ = ["ApplianceStore", "ApplianceRetriever", "ApplianceChatHistory", "session_of"]

TEXT_KEYS = ("text", "content", "memory")


def session_of(namespace: tuple[str, ...]) -> str:
    if not namespace or not all(isinstance(p, str) and p and "/" not in p for p in namespace):
        raise InputError("a namespace is a non-empty tuple of labels without '/'", hint='e.g. ("user-42", "memories")')
    return "/".join(namespace)


def _text_of(value: Any) -> str:
    for key in TEXT_KEYS:
        if isinstance(value.get(key), str) and value[key].strip():
            return str(value[key])
    raise InputError(f"the value needs a text under one of {', '.join(TEXT_KEYS)}", hint='e.g. {"text": "..."}')


def _value(rec: MemoryRecord) -> dict[str, Any]:
    return {
        "text": rec.source_text,
        "memory_id": rec.memory_id,
        "event_type": rec.event_type,
        "entity_type": rec.entity_type,
        "entity_id": rec.entity_id,
        "state": rec.state,
        "attributes": rec.attributes,
        "status": rec.status,
        "summary": rec.summary(),
    }


def _matches(value: dict[str, Any], wanted: dict[str, Any] | None) -> bool:
    return not wanted or all(value.get(k) == v or value["attributes"].get(k) == v for k, v in wanted.items())


class ApplianceStore(BaseStore):
    """LangGraph's long-term memory ``BaseStore`` over an ``Appliance``."""

    def __init__(self, app: Appliance) -> None:
        self.app = app

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return [self._one(op) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.to_thread(self.batch, list(ops))

    def _one(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            return self._get(op.namespace, op.key)
        if isinstance(op, PutOp):
            self._put(op.namespace, op.key, op.value)
            return None
        if isinstance(op, SearchOp):
            return self._search(op)
        if isinstance(op, ListNamespacesOp):
            return self._namespaces(op)
        raise InputError(f"unsupported store operation {type(op).__name__}")

    def _item(self, namespace: tuple[str, ...], key: str, rec: MemoryRecord) -> Item:
        return Item(value=_value(rec), key=key, namespace=namespace, created_at=rec.timestamp, updated_at=rec.timestamp)

    def _get(self, namespace: tuple[str, ...], key: str) -> Item | None:
        rec = self.app.record_by_request(session_of(namespace), key)
        return self._item(namespace, key, rec) if rec is not None else None

    def _put(self, namespace: tuple[str, ...], key: str, value: Any) -> None:
        session = session_of(namespace)
        earlier = self.app.record_by_request(session, key)
        if value is None:  # LangGraph's delete
            if earlier is not None:
                self.app.delete_record(earlier.memory_id)
            return
        text = _text_of(value)
        if earlier is not None:
            if earlier.source_text == text:
                return
            self.app.delete_record(earlier.memory_id)  # a put under a key replaces its memory
        when = value.get("at")
        self.app.record(
            text,
            session_id=session,
            request_id=key,
            now=datetime.fromisoformat(when) if isinstance(when, str) else None,
        )

    def _search(self, op: SearchOp) -> list[SearchItem]:
        sessions = self.app.sessions(session_of(op.namespace_prefix) if op.namespace_prefix else "")
        found: list[SearchItem] = []
        for session in sessions[:20]:
            namespace = tuple(session.split("/"))
            if op.query:
                ranked = self.app.recall(op.query, session_id=session).memories
                pairs: list[tuple[MemoryRecord, float | None]] = [(r.memory, r.score) for r in ranked]
            else:
                pairs = [(m, None) for m in self.app.list_records(session=session, limit=op.limit + op.offset)]
            for rec, score in pairs:
                value = _value(rec)
                if _matches(value, op.filter):
                    item = SearchItem(namespace, rec.memory_id, value, rec.timestamp, rec.timestamp, score)
                    found.append(item)
        if op.query:
            found.sort(key=lambda i: -(i.score or 0.0))
        return found[op.offset : op.offset + op.limit]

    def _namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        spaces = [tuple(s.split("/")) for s in self.app.sessions()]
        for cond in op.match_conditions or ():
            path, n = tuple(cond.path), len(cond.path)
            spaces = [
                ns for ns in spaces if len(ns) >= n and (ns[:n] if cond.match_type == "prefix" else ns[-n:]) == path
            ]
        if op.max_depth is not None:
            spaces = list(dict.fromkeys(ns[: op.max_depth] for ns in spaces))
        return spaces[op.offset : op.offset + op.limit]


class ApplianceRetriever(BaseRetriever):
    """Recall as LangChain documents: the best evidence first, one document per memory."""

    app: Any
    session_id: str = "default"
    k: int = 5

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        res = self.app.recall(query, session_id=self.session_id)
        docs = []
        if res.not_found:
            docs.append(Document(page_content=f"NOT FOUND: {res.not_found}", metadata={"not_found": True}))
        for ranked in res.memories[: self.k]:
            rec = ranked.memory
            meta = {**_value(rec), "score": ranked.score, "paths": ranked.paths, "session_id": rec.session_id}
            docs.append(Document(page_content=rec.source_text, metadata=meta))
        return docs


class ApplianceChatHistory(BaseChatMessageHistory):
    """A chat history whose human messages are recorded as memories of ``session_id``; AI
    messages are kept in this object only (the appliance remembers what the user says)."""

    def __init__(self, app: Appliance, session_id: str) -> None:
        self.app = app
        self.session_id = session_id
        self._replies: list[tuple[datetime, AIMessage]] = []

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        said = [
            (r.timestamp, HumanMessage(content=r.source_text, id=r.memory_id))
            for r in self.app.list_records(session=self.session_id, limit=500)
        ]
        return [m for _, m in sorted([*said, *self._replies], key=lambda p: p[0])]

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        for message in messages:
            if isinstance(message, HumanMessage) and isinstance(message.content, str):
                self.app.record(message.content, session_id=self.session_id)
            elif isinstance(message, AIMessage):
                self._replies.append((datetime.now(UTC), message))

    def clear(self) -> None:
        for rec in self.app.list_records(session=self.session_id, limit=10_000):
            self.app.delete_record(rec.memory_id)
        self._replies.clear()
