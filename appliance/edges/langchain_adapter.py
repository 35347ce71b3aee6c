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

A namespace or session is a wall, as in LangGraph's own stores: a prefix matches whole labels
(``("user-4",)`` is no prefix of ``("user-42", …)``), a search reads only its namespaces
whatever the question says ("across all sessions…" is refused, not answered from other users'
memories), and a history needs a session id (an empty one would be every session's).

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
from ..domain.inputs import clean_session, is_memory_id
from ..domain.records import MemoryRecord
from ..errors import InputError

__all__ = ["ApplianceStore", "ApplianceRetriever", "ApplianceChatHistory", "session_of"]

TEXT_KEYS = ("text", "content", "memory")
MAX_SEARCHED_SESSIONS = 20  # a search recalls once per session: its cost grows with them


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
        session = session_of(namespace)
        rec = self.app.record_by_request(session, key)
        if rec is None and is_memory_id(key):  # a memory told through another edge: its id
            rec = self.app.get_record(key)
            rec = rec if rec is not None and rec.session_id == session else None
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

    def _sessions(self, prefix: tuple[str, ...]) -> list[str]:
        """The sessions under a namespace prefix, matched label by label (the store's
        ``starts_with`` alone would take "user-42" and "user-4%" for "user-4")."""
        if not prefix:
            return self.app.sessions()
        head = session_of(prefix)
        return [s for s in self.app.sessions(head) if tuple(s.split("/"))[: len(prefix)] == prefix]

    def _search(self, op: SearchOp) -> list[SearchItem]:
        found: list[SearchItem] = []
        for session in self._sessions(op.namespace_prefix)[:MAX_SEARCHED_SESSIONS]:
            namespace = tuple(session.split("/"))
            if op.query:
                ranked = self.app.recall(op.query, session_id=session, across_sessions=False).memories
                pairs: list[tuple[MemoryRecord, float | None]] = [(r.memory, r.score) for r in ranked]
            else:
                pairs = [(m, None) for m in self.app.list_records(session=session, limit=op.limit + op.offset)]
            pairs = [(rec, score) for rec, score in pairs if rec.session_id == session]
            keys = self.app.request_ids([rec.memory_id for rec, _ in pairs])
            for rec, score in pairs:
                value = _value(rec)
                if _matches(value, op.filter):
                    key = keys.get(rec.memory_id, rec.memory_id)
                    found.append(SearchItem(namespace, key, value, rec.timestamp, rec.timestamp, score))
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
    """Recall as LangChain documents: the best evidence first, one document per memory, from
    ``session_id`` only unless ``across_sessions`` (an operator's choice, never the question's)."""

    app: Any
    session_id: str = "default"
    k: int = 5
    across_sessions: bool = False

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        res = self.app.recall(query, session_id=self.session_id, across_sessions=self.across_sessions)
        docs = []
        if res.not_found:
            docs.append(Document(page_content=f"NOT FOUND: {res.not_found}", metadata={"not_found": True}))
        mine = [r for r in res.memories if self.across_sessions or r.memory.session_id == self.session_id]
        for ranked in mine[: self.k]:
            rec = ranked.memory
            meta = {**_value(rec), "score": ranked.score, "paths": ranked.paths, "session_id": rec.session_id}
            docs.append(Document(page_content=rec.source_text, metadata=meta))
        return docs


class ApplianceChatHistory(BaseChatMessageHistory):
    """A chat history whose human messages are recorded as memories of ``session_id``; AI
    messages are kept in this object only (the appliance remembers what the user says)."""

    def __init__(self, app: Appliance, session_id: str) -> None:
        self.app = app
        self.session_id = clean_session(session_id)  # "" would read, and clear, every session
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
