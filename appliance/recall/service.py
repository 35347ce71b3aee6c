"""The recall path: question → structured query → SQL hits → fallbacks → context.

1. ``QuestionParser`` turns the question into a ``RecallQuery`` (grammar-checked);
2. the store compiles it to parameterised SQL and returns entities with their memories;
3. a multi-hop query whose path ends empty shows what its start matched, and says so;
4. when the structured path finds nothing, memories containing the question's grounded
   values (codes, numbers, dates) are looked up by text;
5. the semantic side adds the memories nearest to the question's sentence vector;
6. ``summarise`` writes the context an agent reads.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Protocol

from ..domain.records import MemoryRecord, RecallQuery, RecallResult, SemanticHit
from ..domain.schema import MemorySchema
from ..extract.candidates import find_candidates
from ..model.embed import Embedder
from ..store import MemoryStore
from .context import summarise
from .question import ParsedQuestion

__all__ = ["RecallService", "SEMANTIC_MIN_SCORE"]

SEMANTIC_MIN_SCORE = 0.35  # cosine; below this a "related" memory is noise (all-MiniLM-L6-v2)


class Parser(Protocol):
    def parse(self, question: str, now: datetime) -> ParsedQuestion: ...


class RecallService:
    def __init__(self, store: MemoryStore, embedder: Embedder | None) -> None:
        self.store = store
        self.embedder = embedder

    def query(self, schema: MemorySchema, q: RecallQuery, session_id: str, question: str = "") -> RecallResult:
        """Run a structured query (no model involved)."""
        sql, params, hits = self.store.run_query(schema, q, session_id)
        return RecallResult(question=question, query=q, sql=sql, params=params, hits=hits, context=summarise(hits))

    def recall(self, schema: MemorySchema, parsed: ParsedQuestion, question: str, session_id: str) -> RecallResult:
        """Everything after parsing: structured hits, fallbacks, semantic neighbours, context."""
        query = parsed.query or RecallQuery()
        result = self.query(schema, query, session_id, question=question)
        result.raw_output = parsed.raw_output
        partial = ""
        if not result.hits and query.chain:
            # Nothing at the end of the path: show what the conditions matched at its start.
            start = self.query(schema, query.model_copy(update={"hop": None, "hops": []}), session_id)
            for h in start.hits:
                h.path = "structured (path start)"
            result.hits = start.hits
            if start.hits:
                partial = f"No {query.result_type} reached from these through {', '.join(h.relationship for h in query.chain)}.\n"
        seen = {m.memory_id for h in result.hits for m in h.memories}
        extra: dict[str, MemoryRecord] = {}
        if not result.hits:
            # The structured path found nothing: fall back to the message text itself.
            words = [
                str(c.surface)
                for c in find_candidates(schema.language, question, datetime.now(UTC), schema.entity_nouns)
            ]
            for w in words[:3]:
                for m in self.store.records.containing(session_id, w, limit=5):
                    extra[m.memory_id] = m
        if self.embedder is not None:
            try:
                vec = self.embedder.encode([question])[0]
                found = self.store.semantic_search(
                    None if query.all_sessions else session_id, vec, k=5, min_score=SEMANTIC_MIN_SCORE
                )
            except Exception:  # noqa: BLE001 - the structured answer stands on its own
                found = []
            result.semantic = [
                SemanticHit(memory=m, score=round(sc, 4))
                for m, sc in found
                if m.memory_id not in seen and m.memory_id not in extra
            ]
        result.context = partial + summarise(result.hits, list(extra.values()), result.semantic)
        return result
