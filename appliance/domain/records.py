"""Domain types: what a record, an entity, a relationship and a recall query are. No I/O."""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field as dc_field
from datetime import datetime, timedelta
from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator

# Two memories of a session at most this far apart are turns of one conversation: a turn's lexical
# terms carry the words of the turn just before it that it does not repeat (a reply or a pronoun,
# "she likes her tea strong", is found by the name said one turn earlier: conversational set MRR
# 0.65 → 0.70), and recall reads the turn after a question as its answer.
CONVERSATION_GAP = timedelta(hours=1)

__all__ = [
    "CONVERSATION_GAP",
    "RecordStatus",
    "EntityRef",
    "RelationshipDraft",
    "RecordDraft",
    "MemoryRecord",
    "Entity",
    "Relationship",
    "Filter",
    "Sort",
    "Hop",
    "RecallQuery",
    "RecallHit",
    "RecallResult",
    "RankedMemory",
    "FILTER_OPS",
    "MAX_RELATIONSHIPS",
    "MAX_FILTERS",
    "MAX_HOPS",
    "SUMMARY_EVENT",
    "RecordWrite",
    "AttrValue",
]

RecordStatus = Literal["ok", "needs_review", "unparsed", "reviewed"]
AttrValue = Union[str, float, int, bool, list[str], None]
FILTER_OPS = ("eq", "contains", "gt", "lt", "in")
MAX_RELATIONSHIPS = 3
MAX_FILTERS = 3
MAX_LIMIT = 100
MAX_HOPS = 3
SUMMARY_EVENT = "summary"  # reserved event type of the records compaction writes


class RelationshipDraft(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: str
    from_type: str
    from_id: str
    to_type: str
    to_id: str


class EntityDraft(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: str
    id: Optional[str]
    state: Optional[str]
    attributes: dict[str, AttrValue]


class RecordDraft(BaseModel):
    """What extraction produces from one utterance (before ids and timestamps)."""

    model_config = ConfigDict(extra="forbid")

    event_type: str
    entity: EntityDraft
    relationships: list[RelationshipDraft] = Field(default_factory=list)


class Relationship(BaseModel):
    type: str
    source_type: str
    source_id: str
    target_type: str
    target_id: str


class EntityRef(BaseModel):
    type: str
    id: str


class MemoryRecord(BaseModel):
    """A stored memory: the draft plus provenance. ``unparsed`` records keep only the text."""

    memory_id: str
    session_id: str
    timestamp: datetime
    schema_id: str
    status: RecordStatus
    confidence: float = Field(ge=0.0, le=1.0)
    source_text: str
    event_type: Optional[str] = None
    entity_type: Optional[str] = None
    entity_id: Optional[str] = None
    state: Optional[str] = None
    attributes: dict[str, AttrValue] = Field(default_factory=dict)
    relationships: list[Relationship] = Field(default_factory=list)
    mentions: list[EntityRef] = Field(default_factory=list)  # entities named by ref attributes
    spans: dict[str, str] = Field(default_factory=dict)  # attribute → the text its value was read from
    raw_output: str = ""
    note: str = ""

    def summary(self) -> str:
        """One line a person or an agent can read."""
        if self.status == "unparsed":
            return f"[unparsed] {self.source_text[:200]}"
        attrs = ", ".join(f"{k}={v}" for k, v in self.attributes.items() if v is not None)
        ident = f"{self.entity_type} {self.entity_id}" if self.entity_id else f"{self.entity_type}"
        state = f" [{self.state}]" if self.state else ""
        flag = " (needs review)" if self.status == "needs_review" else ""
        return f"{self.event_type}: {ident}{state}{' ' + attrs if attrs else ''}{flag}"


class Entity(BaseModel):
    type: str
    id: str
    state: Optional[str] = None
    attributes: dict[str, AttrValue] = Field(default_factory=dict)
    version: int = 1
    updated_at: Optional[datetime] = None
    as_of: Optional[datetime] = None  # message time of the newest value it holds
    session_id: Optional[str] = None


class Filter(BaseModel):
    model_config = ConfigDict(extra="forbid")

    field: str
    op: Literal["eq", "contains", "gt", "lt", "in"]
    value: Union[str, float, int, list[Union[str, float, int]]]


class Sort(BaseModel):
    model_config = ConfigDict(extra="forbid")

    field: str
    descending: bool = True


class Hop(BaseModel):
    """Follow a declared relationship to ``target_type``, keeping targets that pass ``filters``.

    Hops chain: each starts from the entities the previous step kept, so "users whose
    orders over 1000 have a logistics complaint" is tickets → orders → users."""

    model_config = ConfigDict(extra="forbid")

    relationship: str
    target_type: str
    filters: list[Filter] = Field(default_factory=list, max_length=MAX_FILTERS)


class RecallQuery(BaseModel):
    """A structured question: compiled to parameterised SQL by ``recall``."""

    model_config = ConfigDict(extra="forbid")

    entity_type: Optional[str] = None
    event_type: Optional[str] = None
    filters: list[Filter] = Field(default_factory=list, max_length=MAX_FILTERS)
    sort: Optional[Sort] = None
    limit: int = Field(default=10, ge=1, le=MAX_LIMIT)
    hop: Optional[Hop] = None  # one hop (kept for callers written before ``hops``)
    hops: list[Hop] = Field(default_factory=list, max_length=MAX_HOPS)
    all_sessions: bool = False

    @property
    def chain(self) -> list[Hop]:
        """Every hop in order: ``hop`` first, then ``hops``."""
        return ([self.hop] if self.hop else []) + list(self.hops)

    @property
    def result_type(self) -> Optional[str]:
        """The entity type the answer is made of (the last hop's target)."""
        return self.chain[-1].target_type if self.chain else self.entity_type

    @field_validator("filters")
    @classmethod
    def _bounded(cls, v: list[Filter]) -> list[Filter]:
        return v[:MAX_FILTERS]


class RecallHit(BaseModel):
    entity: Entity
    memories: list[MemoryRecord] = Field(default_factory=list)
    path: str = "structured"


class RankedMemory(BaseModel):
    """A memory in the fused recall ranking, with every path that found it."""

    memory: MemoryRecord
    score: float
    paths: list[str] = Field(default_factory=list)


class RecallResult(BaseModel):
    question: str
    query: RecallQuery
    sql: str
    params: list[Any]
    hits: list[RecallHit]
    context: str
    raw_output: str = ""
    memories: list[RankedMemory] = Field(default_factory=list)  # the fused ranking, best first
    not_found: str = ""  # what the question asks that nothing stored holds ("" when found)
    time_range: Optional[tuple[str, str]] = None  # the days the question is limited to
    signals: dict[str, Any] = Field(default_factory=dict)  # what the not-found decision looked at


@dataclass
class RecordWrite:
    """A record ready to store and everything storing it implies, written in one transaction:
    the memory row, its entity upserts, suffix ids to remember, merges, a correction of an
    earlier record, and its sentence vector."""

    record: MemoryRecord
    notes: list[str] = dc_field(default_factory=list)
    partial_ids: list[tuple[str, str]] = dc_field(default_factory=list)  # (type, id) stored as suffixes
    merges: list[tuple[str, str, str, str]] = dc_field(default_factory=list)  # (type, from, to, rule)
    correction: tuple[str, str, str, str] | None = None  # (memory_id, type, old id, new id)
    vector: Any = None  # the record text's sentence vector (None: not embedded)
    terms: tuple[str, ...] | None = None  # its lexical-search terms (None: indexed later by a backfill)
    days: tuple[tuple[Any, Any, str], ...] = ()  # (first day, last day, source) it is about
    summary_of: tuple[str, ...] = ()  # ids of the memories a summary record compacts
