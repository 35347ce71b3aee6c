"""The ``Appliance`` facade: wires schema → grammar → model → extract → store → recall.

Everything the CLI, the panel and the HTTP edge do goes through here; it holds no SQL and no
recall policy. The model is loaded lazily (schema commands never pay for it) and one lock
serialises generation, because a llama.cpp context holds exactly one conversation state.

The record path, one step per room:

1. ``domain.inputs``      — clean the text and session id
2. ``extract.routing``    — choose the schema when several are loaded
3. ``extract.extractor``  — grounded, grammar-constrained record draft
4. ``model.embed``        — the text's sentence vector (cached from extraction's evidence)
5. ``lifecycle.resolve``  — which stored entity it is about (rules, suffixes, corrections)
6. ``store.write``        — one transaction: memory, entities, merges, correction, vector
"""

from __future__ import annotations

import json
import logging
import threading
import uuid
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from .config import Settings
from .domain.inputs import MAX_TEXT_CHARS, clean_memory_id, clean_session, clean_text
from .domain.links import days_of, derived_links, mentions_of, relationship_of
from .domain.loading import load_schema, parse_schema
from .domain.records import CONVERSATION_GAP, Entity, MemoryRecord, RecallQuery, RecallResult, Relationship
from .domain.schema import MemorySchema
from .domain.validation import check_fields, check_record
from .errors import AccessDenied, InputError, NotFoundError, QueryError, SchemaError, SchemaMismatchError, StoreError
from .extract.examples import ExampleBank
from .extract.extractor import ExtractMode, Extractor, SessionHint
from .extract.routing import SchemaChoice, choose_schema
from .lang.segment import INDEX_TERMS_VERSION, index_terms
from .lifecycle.forgetting import Decision
from .lifecycle.indexing import VectorIndexer, embed_rows
from .lifecycle.migrate import MigrationPlan, MigrationSpec
from .lifecycle.resolve import Resolver
from .lifecycle.service import LifecycleService
from .model.embed import EXTRACTION_ENCODER, Embedder, embedder_available, shared_embedder
from .model.engine import Engine, LlamaCppEngine, resolve_model_path
from .model.grammar import CompiledGrammar, GrammarCache
from .recall.question import QuestionParser
from .recall.service import RecallService
from .store import MemoryStore

__all__ = ["Appliance", "resolve_schema", "MAX_TEXT_CHARS", "clean_text", "clean_session"]

log = logging.getLogger("appliance")

SchemaSpec = str | Path | MemorySchema | dict[str, Any]
# a long step's progress: (stage, done, total or None when unknown); edges draw it
Progress = Callable[[str, int, int | None], None]
MAINTAIN_EVERY = 1000  # records between checks that the vector index still fits its size
# a question waits at most this long for the vectors of what was told before it in this process
# (milliseconds usually; the encoder's first load takes seconds on a busy machine)
SETTLE_SECONDS = 30.0
KNOWN_KEYS = 500  # the newest entities of a session whose keys a note may name again
DEFAULT_SCHEMA = "customer_service"  # what a new memory is created with when none is named


def _adds_to(given: Sequence[MemorySchema], held: Sequence[MemorySchema]) -> bool:
    """``given`` names every ``held`` schema as it is held, and only other domains besides."""
    held_ids, held_domains = {x.schema_id for x in held}, {x.domain for x in held}
    return held_ids <= {x.schema_id for x in given} and all(
        x.schema_id in held_ids for x in given if x.domain in held_domains
    )


def _names(schemas: Sequence[MemorySchema]) -> str:
    return ", ".join(f"{x.domain!r} (version {x.schema_version}, id {x.schema_id})" for x in schemas)


def resolve_schema(schema: SchemaSpec, schema_dir: Path) -> MemorySchema:
    """A schema object, dict, file path, or the name of a shipped schema."""
    if isinstance(schema, MemorySchema):
        return schema
    if isinstance(schema, dict):
        return parse_schema(schema)
    p = Path(schema)
    if p.suffix == ".json" or p.exists():
        return load_schema(p)
    shipped = schema_dir / f"{schema}.json"
    if shipped.exists():
        return load_schema(shipped)
    names = ", ".join(sorted(f.stem for f in schema_dir.glob("*.json")))
    raise SchemaError(f"no schema named {str(schema)!r}", hint=f"use a file path or one of: {names}")


class Appliance:
    """Offline memory for agents: ``record`` what you are told, ``recall`` what you need."""

    def __init__(
        self,
        schema: SchemaSpec | Sequence[SchemaSpec] | None = None,
        db: str | Path | None = None,
        model: str | Engine | None = None,
        settings: Settings | None = None,
        mode: ExtractMode = "grounded",
        embedder: Embedder | None | str = "auto",
        create: bool = True,
    ) -> None:
        """``schema``: what a new memory is created with (default: the shipped
        ``customer_service``); a memory that holds schemas is read with them, and naming others
        is a ``SchemaMismatchError`` (switch with ``migrate``). ``create=False``: a database file
        that does not exist is an error, not a new file (a mistyped path must not start an
        empty memory)."""
        self.settings = settings or Settings.from_env()
        recall_embedder: Embedder | None
        if embedder == "auto":
            # extraction reads use3 (its fitted weights are in its units); recall the set encoder
            on = self.settings.semantic
            embedder = shared_embedder(EXTRACTION_ENCODER) if on and embedder_available(EXTRACTION_ENCODER) else None
            name = self.settings.encoder
            recall_embedder = shared_embedder(name) if on and embedder_available(name) else None
        else:  # one encoder given (tests, benches): it serves both
            recall_embedder = embedder if not isinstance(embedder, str) else None
        self.embedder: Embedder | None = embedder if not isinstance(embedder, str) else None
        self.recall_embedder = recall_embedder
        given = self._given_schemas(schema)  # a bad schema fails before the file is opened
        encoder = self.recall_embedder.name if self.recall_embedder is not None else self.settings.encoder
        self.store = MemoryStore(
            db if db is not None else self.settings.db_path, encoder=_known(encoder), create=create
        )
        loaded = self._open_with(given)
        self.grammars = GrammarCache(self.settings.grammar_dir, shipped=self.settings.shipped_grammar_dir)
        for sch in loaded:
            self.grammars.compile(sch)
        # domain → schema; the first is the default (editing, panel, single-schema callers)
        self.schemas: dict[str, MemorySchema] = {sch.domain: sch for sch in loaded}
        self.schema = loaded[0]
        self.compiled: CompiledGrammar = self.grammars.compile(self.schema)
        if self.store.wal_copy is not None:
            log.warning(
                "the last stop was unclean: its write-ahead log was replayed; a copy is kept at %s "
                "(if memories told before the stop are missing, the log was damaged)",
                self.store.wal_copy,
            )
        if not self.store.read_only and self.store.lexical.empty() and self.store.lexical.written_with() is None:
            self.store.lexical.mark_written_with(INDEX_TERMS_VERSION)  # a new file: indexed as written
        self.mode = mode
        self._model_spec = model if model is not None else self.settings.model
        self._engine: Engine | None = model if (model is not None and not isinstance(model, str)) else None
        self._extractors: dict[str, Extractor] = {}
        self._examples: dict[str, tuple[int, ExampleBank]] = {}  # schema id → (reviewed count, bank)
        self._indexed = False  # lexical/time backlog checked
        self._writes = 0
        self._parsers: dict[str, QuestionParser] = {}
        self._lock = threading.Lock()
        self._backlog_lock = threading.Lock()
        self.recaller = RecallService(self.store, self.recall_embedder)
        # vectors of another encoder than extraction's are written by a background thread
        self.indexer = (
            VectorIndexer(self.store, self.recall_embedder)
            if self.recall_embedder is not None
            and self.recall_embedder is not self.embedder
            and not self.store.read_only
            else None
        )
        self.lifecycle = LifecycleService(
            self.store, self.grammars, lambda: list(self.schemas.values()), lambda: self.engine, self._lock
        )

    # --- model ------------------------------------------------------------------------
    @property
    def engine(self) -> Engine:
        if self._engine is None:
            assert isinstance(self._model_spec, str)
            path = resolve_model_path(self._model_spec, self.settings.models_dir, self.settings.model_cache_dir)
            self._engine = LlamaCppEngine(path, n_ctx=self.settings.n_ctx, n_threads=self.settings.n_threads)
        return self._engine

    @property
    def extractor(self) -> Extractor:
        return self.extractor_for(self.schema)

    def extractor_for(self, schema: MemorySchema) -> Extractor:
        if schema.schema_id not in self._extractors:
            self._extractors[schema.schema_id] = Extractor(
                schema,
                self.engine,
                self.grammars,
                self.mode,
                backend=self.settings.grammar_backend,
                embedder=self.embedder,
            )
        return self._extractors[schema.schema_id]

    @property
    def parser(self) -> QuestionParser:
        return self.parser_for(self.schema)

    def parser_for(self, schema: MemorySchema) -> QuestionParser:
        if schema.schema_id not in self._parsers:
            self._parsers[schema.schema_id] = QuestionParser(schema, self.engine, self.grammars)
        return self._parsers[schema.schema_id]

    def schema_for(
        self, text: str, named: str | None = None, session_id: str | None = None, now: datetime | None = None
    ) -> tuple[MemorySchema, SchemaChoice | None]:
        """The schema a caller named, else the loaded one that fits ``text`` (model, lexical and
        semantic evidence, and the schema of ``session_id``'s previous record in the same
        conversation: told less than ``CONVERSATION_GAP`` before ``now``)."""
        if named is not None:
            if named not in self.schemas:
                raise SchemaError(f"schema {named!r} is not loaded", hint=f"loaded: {', '.join(self.schemas)}")
            return self.schemas[named], None
        if len(self.schemas) == 1:
            return self.schema, None
        with self._lock:
            latest, now = None, now or datetime.now(UTC)
            if session_id is not None:
                latest = self.store.records.latest_schema(session_id, now - CONVERSATION_GAP, now)
            previous = next((x.domain for x in self.schemas.values() if x.schema_id == latest), None)
            choice = choose_schema(list(self.schemas.values()), self.engine, text, previous, self.embedder)
        return self.schemas[choice.domain], choice

    def schema_by_id(self, schema_id: str) -> MemorySchema:
        """The loaded schema a record was written under (else the default)."""
        return next((x for x in self.schemas.values() if x.schema_id == schema_id), self.schema)

    # --- schema -----------------------------------------------------------------------
    def _given_schemas(self, schema: SchemaSpec | Sequence[SchemaSpec] | None) -> list[MemorySchema] | None:
        if schema is None:
            return None
        specs: list[SchemaSpec] = list(schema) if isinstance(schema, (list, tuple)) else [schema]  # type: ignore[list-item]
        if not specs:
            raise SchemaError("at least one schema is needed")
        return [resolve_schema(x, self.settings.schema_dir) for x in specs]

    def _open_with(self, given: list[MemorySchema] | None) -> list[MemorySchema]:
        """The schemas this memory is read with: the ones it holds; a new memory (or a file
        written before memories held their schema) takes the given ones, else the default.
        Given ones that name every held schema and add other domains load those beside it (the
        memory holds them from now on); leaving a held one out, or another version of one, is a
        mismatch: that is a migration."""
        held = [parse_schema(body) for _, _, body in self.store.schemas.current()]
        if given is None:
            loaded = held or [resolve_schema(DEFAULT_SCHEMA, self.settings.schema_dir)]
        elif held and not _adds_to(given, held):
            raise SchemaMismatchError(
                f"this memory holds {_names(held)} but was opened with {_names(given)}",
                hint="leave out --schema (schema=) to read it with the schema it holds, or move its records "
                "to the new schema with `appliance schema migrate FILE --dry-run`, then without --dry-run",
            )
        else:
            loaded = given
        if not self.store.read_only and [x.schema_id for x in loaded] != [x.schema_id for x in held]:
            self._hold(loaded)
        return loaded

    def _hold(self, loaded: Sequence[MemorySchema], con: Any = None) -> None:
        """Store ``loaded`` as the memory's schemas (in ``con``'s transaction when given)."""
        self.store.schemas.hold([(x.schema_id, x.domain, x.to_json_dict()) for x in loaded], con)

    def _after_switch(self, new: MemorySchema) -> list[MemorySchema]:
        """The loaded schemas once ``new`` replaces the default (and any of its domain)."""
        old = self.schema
        return [new, *(x for d, x in self.schemas.items() if d not in (new.domain, old.domain))]

    def _use(self, loaded: Sequence[MemorySchema], compiled: CompiledGrammar | None = None) -> None:
        self.schemas = {x.domain: x for x in loaded}
        self.schema = loaded[0]
        self.compiled = compiled or self.grammars.compile(self.schema)
        # decoders of schemas no longer loaded hold prompts and grammar indexes: drop them
        live = {x.schema_id for x in self.schemas.values()}
        self._extractors = {k: v for k, v in self._extractors.items() if k in live}
        self._parsers = {k: v for k, v in self._parsers.items() if k in live}

    def set_schema(self, schema: SchemaSpec, force: bool = False) -> CompiledGrammar:
        """Validate, compile and switch the memory to another schema, stored with it; records
        are not rewritten (``migrate`` rewrites them and can be undone)."""
        new = resolve_schema(schema, self.settings.schema_dir)
        compiled = self.grammars.compile(new, force=force)
        loaded = self._after_switch(new)
        self._hold(loaded)
        self._use(loaded, compiled)
        return compiled

    def add_schema(self, schema: SchemaSpec, default: bool = False) -> MemorySchema:
        """Load another schema alongside the others (utterances are routed among them); the
        memory holds it from now on. ``default``: it becomes the default schema."""
        new = resolve_schema(schema, self.settings.schema_dir)
        self.grammars.compile(new)
        others = [x for d, x in self.schemas.items() if d != new.domain]
        first = default or self.schema.domain == new.domain
        loaded = [new, *others] if first else [*others, new]
        self._hold(loaded)
        self._use(loaded)
        return new

    def schema_history(self) -> list[dict[str, Any]]:
        """Every schema version this memory held, oldest first (``loaded``: held now)."""
        return self.store.schemas.history()

    # --- record -----------------------------------------------------------------------
    def record(
        self,
        text: Any,
        session_id: str = "default",
        now: datetime | None = None,
        on_progress: Callable[[str], None] | None = None,
        schema: str | None = None,
        request_id: str | None = None,
    ) -> MemoryRecord:
        """Extract a memory from ``text`` and store it; nothing is dropped.

        ``on_progress`` receives the record JSON as it is written (for streaming UIs);
        ``schema`` names the loaded schema to use (default: chosen per utterance);
        ``request_id`` makes the call idempotent: a retry with the same id in the same session
        returns the record stored the first time instead of a duplicate."""
        text = clean_text(text)
        session_id = clean_session(session_id)
        if request_id is not None:
            request_id = clean_session(request_id, "request_id")
            done = self.store.records.by_request(session_id, request_id)
            if done is not None:
                return done
        now = now or datetime.now(UTC)
        sch, routed = self.schema_for(text, schema, session_id, now)
        base = dict(
            memory_id=uuid.uuid4().hex,
            session_id=session_id,
            timestamp=now,
            schema_id=sch.schema_id,
            source_text=text,
        )
        with self._lock:
            extractor = self.extractor_for(sch)
            hint = SessionHint(
                previous_event=self.store.records.latest_event(session_id, sch.schema_id),
                corrects=Resolver(sch, self.store).corrected_event(text, session_id),
                examples=self._example_bank(sch),
                told=self.store.records.told(session_id, sch.schema_id),
                known=self._known_keys(sch, session_id),
            )
            try:
                extractor.on_progress = on_progress
                try:
                    result = extractor.extract(text, now, hint=hint)
                finally:
                    extractor.on_progress = None
            except InputError as exc:  # e.g. context overflow: keep the text, flag it
                rec = MemoryRecord(**base, status="unparsed", confidence=0.0, note=exc.message)
                return self._store(sch, rec, request_id)
        if result.draft is None:
            rec = MemoryRecord(
                **base,
                status="unparsed",
                confidence=0.0,
                raw_output=result.raw_output[:4000],
                note=result.note or "no valid record",
            )
            return self._store(sch, rec, request_id)
        d = result.draft
        ent = sch.entity(d.entity.type)
        review = result.review or (
            f"low confidence ({result.confidence:.2f})" if result.confidence < self.settings.review_threshold else ""
        )
        status: Literal["ok", "needs_review"] = "needs_review" if review else "ok"
        rec = MemoryRecord(
            **base,
            status=status,
            confidence=round(min(max(result.confidence, 0.0), 1.0), 4),
            event_type=d.event_type,
            entity_type=d.entity.type,
            entity_id=d.entity.id,
            state=d.entity.state,
            attributes=dict(d.entity.attributes),
            raw_output=result.raw_output,
            note=" | ".join(
                x
                for x in (
                    result.note,
                    f"schema {routed.domain} chosen (p={routed.probability:.2f})" if routed else "",
                    f"review: {review}" if review else "",
                )
                if x
            ),
            spans=result.spans,
            relationships=[relationship_of(r.model_dump()) for r in d.relationships],
            mentions=mentions_of(sch, ent, d.entity.attributes),
        )
        return self._store(sch, rec, request_id)

    def _known_keys(self, schema: MemorySchema, session_id: str) -> dict[str, frozenset[str]]:
        """Per keyed entity type of ``schema``: the key values of the session's entities of it
        (the newest ``KNOWN_KEYS``), lower-case."""
        keyed = {e.name: e.key[0] for e in schema.entities if e.key}
        out: dict[str, set[str]] = {}
        for ent in self.store.entities.of_types(session_id, list(keyed), limit=KNOWN_KEYS):
            value = ent.attributes.get(keyed[ent.type])
            if isinstance(value, str) and value:
                out.setdefault(ent.type, set()).add(value.lower())
        return {k: frozenset(v) for k, v in out.items()}

    def _example_bank(self, schema: MemorySchema) -> ExampleBank | None:
        """The reviewed records of ``schema`` (its own id and earlier versions of its domain
        are the same schema's examples), rebuilt when their number changes."""
        ids = [schema.schema_id]
        count = self.store.records.reviewed_count(ids)
        if not count:
            return None
        cached = self._examples.get(schema.schema_id)
        if cached is None or cached[0] != count:
            bank = ExampleBank.build(schema, self.store.records.reviewed(ids), self.embedder)
            self._examples[schema.schema_id] = (count, bank)
        return self._examples[schema.schema_id][1]

    def _store(self, schema: MemorySchema, rec: MemoryRecord, request_id: str | None = None) -> MemoryRecord:
        """Resolve and store in one transaction (memory, entities, merges, correction, vector).

        One lock around read-resolve-write, so two records cannot both mint or merge the same
        entity: this process's, and the session's in the store (other processes sharing a
        PostgreSQL memory)."""
        vector = self._vector(rec.source_text)
        with self._lock, self.store.session_transaction(rec.session_id):
            if request_id is not None:  # a concurrent retry of the same request finished first
                done = self.store.records.by_request(rec.session_id, request_id)
                if done is not None:
                    return done
            plan = Resolver(schema, self.store).resolve(rec)
            plan.vector = vector
            before = self.store.records.text_before(rec.session_id, rec.timestamp, CONVERSATION_GAP)
            plan.terms = tuple(with_turn_before(memory_terms(plan.record), before))
            plan.days = tuple(days_of(schema, plan.record))
            stored = self.store.write(plan, request_id)
        with self._lock:
            if self.indexer is not None:
                self.indexer.add(stored.memory_id, stored.session_id, stored.source_text)
            self._writes += 1
            if self._writes % MAINTAIN_EVERY == 0:
                self.store.maintain()  # rewrites and checkpoints: outside the record's transaction
        return stored

    def _vector(self, text: str) -> Any:
        """The text's sentence vector when extraction's encoder is recall's too (it has just
        encoded the text), or None: the background indexer embeds it, and a failing encoder
        never loses the record (``backfill_vectors`` embeds whatever is missing)."""
        if self.recall_embedder is None or self.indexer is not None:
            return None
        try:
            return self.recall_embedder.encode([text])[0]
        except Exception:  # noqa: BLE001 - embedding is an optional complement
            return None

    def backfill_lexical(self, batch: int = 2000) -> int:
        """Index stored records the lexical channel does not hold yet (imports, older files), as
        ``record`` indexes them: text, entity id and values, and the words of the turn before."""
        done = 0
        while rows := self.store.lexical.missing(CONVERSATION_GAP, batch):
            docs = [
                (
                    row.memory_id,
                    row.session_id,
                    with_turn_before(
                        memory_terms_of(row.text, json.loads(row.attributes), row.entity_id), row.text_before
                    ),
                )
                for row in rows
            ]
            self.store.add_terms(docs)
            done += len(rows)
        return done

    def reindex_lexical(self) -> int:
        """Rebuild the lexical index when it was written with another term function (an upgrade
        that changed how words are reduced); returns how many memories were indexed again."""
        lexical = self.store.lexical
        if self.store.read_only or lexical.written_with() == INDEX_TERMS_VERSION:
            return 0
        if not lexical.empty():
            lexical.clear()
        done = self.backfill_lexical(batch=20_000)  # each batch orders its sessions' memories once
        lexical.mark_written_with(INDEX_TERMS_VERSION)
        return done

    def backfill_days(self, batch: int = 2000) -> int:
        """Record the days of stored records that have none yet (imports, older files)."""
        done = 0
        while rows := self.store.days.missing(batch):
            recs = self.store.records.by_ids([m for m, _ in rows])
            self.store.add_days([(r.memory_id, r.session_id, days_of(self.schema_by_id(r.schema_id), r)) for r in recs])
            done += len(rows)
            if len(recs) < len(rows):
                break
        return done

    def backfill_vectors(self, batch: int = 256) -> int:
        """Embed stored records that have no vector of the active encoder; returns how many."""
        if self.recall_embedder is None:
            return 0
        done = 0
        while rows := self.store.vectors.missing(batch):
            embed_rows(self.store, self.recall_embedder, rows)
            done += len(rows)
        return done

    # --- recall -----------------------------------------------------------------------
    def recall(
        self,
        question: Any,
        session_id: str = "default",
        schema: str | None = None,
        now: datetime | None = None,
        across_sessions: bool = True,
    ) -> RecallResult:
        """Answer a question from memory (``now``: when it is asked; relative dates in it — "last
        week" — are read against it). ``across_sessions=False`` (a caller holding one session's
        key) refuses a question that asks across sessions instead of answering it."""
        question = clean_text(question, "question")
        session_id = clean_session(session_id)
        now = now or datetime.now(UTC)
        sch, _ = self.schema_for(question, schema)
        self._index_backlog()
        with self._lock:
            parsed = self.parser_for(sch).parse(question, now)
        _check_scope(parsed.query is not None and parsed.query.all_sessions, across_sessions)
        if self.indexer is not None:  # what was just told is searchable by meaning too
            self.indexer.settle(SETTLE_SECONDS)
        return self.recaller.recall(sch, parsed, question, session_id, now)

    def _index_backlog(self) -> None:
        """Index memories the lexical and time channels do not hold yet (once, e.g. after an
        upgrade from a file written before they existed)."""
        if self._indexed or self.store.read_only:  # a read-only file is searched as it stands
            return
        with self._backlog_lock:  # one thread rebuilds; two clearing and refilling would double postings
            if not self._indexed:
                if self.indexer is not None:  # a file written before this encoder: embedded meanwhile
                    self.indexer.notify()
                self.reindex_lexical()
                self.backfill_lexical()
                self.backfill_days()
                self._indexed = True

    def query(
        self,
        query: RecallQuery | dict[str, Any],
        session_id: str = "default",
        question: str = "",
        schema: str | None = None,
        across_sessions: bool = True,
    ) -> RecallResult:
        """Run a structured query directly (agents that skip the model)."""
        sch = self.schema_for("", schema)[0] if schema is not None else self.schema
        try:
            q = query if isinstance(query, RecallQuery) else RecallQuery.model_validate(query)
        except ValidationError as exc:
            err = exc.errors()[0]
            raise QueryError(f"invalid query at {'.'.join(map(str, err['loc']))}: {err['msg']}") from None
        _check_scope(q.all_sessions, across_sessions)
        return self.recaller.query(sch, q, clean_session(session_id), question)

    # --- reading ------------------------------------------------------------------------
    def get_record(self, memory_id: str) -> MemoryRecord | None:
        return self.store.records.get(clean_memory_id(memory_id))

    def list_records(
        self, session: str | None = None, search: str = "", limit: int = 100, offset: int = 0, status: str | None = None
    ) -> list[MemoryRecord]:
        return self.store.records.page(session=session, search=search, limit=limit, offset=offset, status=status)

    def record_by_request(self, session_id: str, request_id: str) -> MemoryRecord | None:
        """The record stored under a client's id (``record(request_id=...)``) in a session."""
        return self.store.records.by_request(clean_session(session_id), clean_session(request_id, "request_id"))

    def request_ids(self, memory_ids: list[str]) -> dict[str, str]:
        """The client keys (``record(request_id=...)``) the memories were stored under, by memory id."""
        return self.store.records.request_ids([clean_memory_id(m) for m in memory_ids])

    def sessions(self, prefix: str = "", limit: int = 1000) -> list[str]:
        """Session ids that hold memories (those starting with ``prefix``)."""
        return self.store.records.sessions(prefix, limit)

    def list_entities(self, session: str | None = None, limit: int = 200) -> list[Entity]:
        return self.store.entities.page(session=session, limit=limit)

    def get_entity(self, session: str, etype: str, eid: str) -> Entity | None:
        return self.store.entities.get(session, etype, eid)

    def entity_memories(self, session: str, etype: str, eid: str, limit: int = 50) -> list[MemoryRecord]:
        """The latest memories about one entity, newest first."""
        return self.store.records.for_entities(session, [(etype, eid)], limit).get((etype, eid), [])

    def entity_history(self, session: str, etype: str, eid: str) -> list[dict[str, Any]]:
        return self.store.entities.history(session, etype, eid)

    def list_relationships(self, session: str | None = None, limit: int = 500) -> list[Relationship]:
        return self.store.list_relationships(session=session, limit=limit)

    def list_merges(self, session: str | None = None) -> list[dict[str, Any]]:
        return self.store.merges.recent(session)

    def list_migrations(self) -> list[dict[str, Any]]:
        return self.store.lifecycle.list_migrations()

    def forget_log(self, limit: int = 200) -> list[dict[str, Any]]:
        return self.store.lifecycle.forget_log(limit)

    # --- editing ----------------------------------------------------------------------
    def edit_record(self, memory_id: str, changes: dict[str, Any]) -> MemoryRecord:
        """Change a record's fields; the result must still validate against the schema."""
        memory_id = clean_memory_id(memory_id)
        rec = self.store.records.get(memory_id)
        if rec is None:
            raise QueryError(f"no memory with id {memory_id!r}")
        sch = self.schema_by_id(rec.schema_id)
        merged: dict[str, Any] = {
            "event_type": rec.event_type,
            "entity_type": rec.entity_type,
            "entity_id": rec.entity_id,
            "state": rec.state,
            "attributes": dict(rec.attributes),
        }
        if not isinstance(changes, dict):
            raise QueryError("changes must be an object of field → value")
        unknown = set(changes) - set(merged) - {"status"}
        if unknown:
            raise QueryError(f"cannot edit {sorted(unknown)}", hint=f"editable: {', '.join(merged)}, status")
        if "attributes" in changes and not isinstance(changes["attributes"], dict):
            raise QueryError("attributes must be an object of attribute → value")
        status = changes.get("status", "reviewed")
        if status not in ("ok", "needs_review", "reviewed"):
            raise QueryError(f"status must be ok, needs_review or reviewed, not {str(status)[:40]!r}")
        if changes.get("entity_type", rec.entity_type) != rec.entity_type:
            merged["attributes"] = {}  # another entity type: the old values and state are not its own
            merged["state"] = None
        merged.update({k: v for k, v in changes.items() if k not in ("status", "attributes")})
        merged["attributes"] = {**merged["attributes"], **changes.get("attributes", {})}
        attrs = check_fields(sch, merged)
        spans = {k: v for k, v in rec.spans.items() if attrs.get(k) == rec.attributes.get(k)}
        for name, value in attrs.items():  # a corrected value keeps the text it stands for, if any
            if value is not None and name not in spans:
                pos = rec.source_text.lower().find(str(value).lower())
                if pos >= 0:
                    spans[name] = rec.source_text[pos : pos + len(str(value))]
        fields = {
            **{k: merged[k] for k in ("event_type", "entity_type", "entity_id", "state")},
            "attributes": attrs,
            "spans": spans,
            "status": status,
        }
        edited = self.store.edit(memory_id, **fields)
        self._examples.clear()  # reviewed records teach the extractors: reload them
        return edited

    def teach(
        self, text: Any, fields: dict[str, Any], session_id: str = "default", now: datetime | None = None
    ) -> MemoryRecord:
        """Record ``text`` and correct the result to ``fields`` at once: the reviewed record
        becomes an example later extractions learn from. ``fields["attributes"]``, when given,
        are all the record's values: one the extractor filled and ``fields`` leaves out is
        cleared, or the example would teach the mistake it corrects."""
        rec = self.record(text, session_id=session_id, now=now)
        changes = {**fields, "status": "reviewed"}
        same_entity = fields.get("entity_type", rec.entity_type) == rec.entity_type  # else edit clears them
        if isinstance(fields.get("attributes"), dict) and same_entity:
            changes["attributes"] = {**dict.fromkeys(rec.attributes), **fields["attributes"]}
        return self.edit_record(rec.memory_id, changes)

    def delete_record(self, memory_id: str) -> bool:
        return self.store.delete_record(clean_memory_id(memory_id))

    # --- import / export / backup --------------------------------------------------------
    def export(
        self, path: str | Path, fmt: str | None = None, force: bool = False, progress: Progress | None = None
    ) -> int:
        """Write every record to ``path`` as JSONL or Parquet (``fmt``, else the file's
        extension); never overwrites without ``force``; written to a temporary file beside it
        and renamed, so a full disk leaves no half file under the name."""
        target = Path(path)
        fmt = fmt or {".parquet": "parquet", ".jsonl": "jsonl", ".json": "jsonl"}.get(target.suffix.lower())
        if fmt not in ("jsonl", "parquet"):
            raise InputError(
                f"cannot tell the format of {target.name}", hint="name it .jsonl or .parquet, or pass --format"
            )
        if target.exists() and not force:
            raise InputError(f"{target} exists", hint="pass --force to overwrite it")
        if not target.parent.is_dir():
            raise InputError(f"no directory {target.parent}", hint="create it first")
        tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.tmp")
        try:
            n = self.export_jsonl(tmp, progress) if fmt == "jsonl" else self.export_parquet(tmp)
            tmp.replace(target)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise StoreError(
                f"cannot write {target}: {exc.strerror or exc}", hint="check free space and permissions"
            ) from None
        except StoreError:
            tmp.unlink(missing_ok=True)
            raise
        return n

    def export_jsonl(self, path: Path, progress: Progress | None = None) -> int:
        n = 0
        total = self.store.counts().get("memories") if progress else None
        with Path(path).open("w", encoding="utf-8") as fh:
            for rec in self.store.records.iter():
                fh.write(rec.model_dump_json() + "\n")
                n += 1
                if progress and n % 500 == 0:
                    progress("exporting", n, total)
        if progress:
            progress("exporting", n, n)
        return n

    def export_parquet(self, path: Path) -> int:
        return self.store.records.export_parquet(Path(path))

    def backup(self, path: str | Path) -> dict[str, Any]:
        """A consistent, self-contained snapshot of the whole database at ``path`` (a new file),
        taken while the appliance keeps serving; ``restore`` brings it back exactly."""
        target = Path(path)
        if not target.parent.is_dir():
            raise InputError(f"no directory {target.parent}", hint="create it first")
        self.store.snapshot(target)
        return {"path": str(target), "bytes": target.stat().st_size, **self.store.counts()}

    def restore(self, path: str | Path) -> dict[str, Any]:
        """Fill this (empty) database from a ``backup`` snapshot: every memory, the entity
        timeline, merge and forget logs, migrations — as they were."""
        if not Path(path).is_file():
            raise InputError(f"no snapshot at {path}")
        self.store.restore_from(path)
        self._indexed = False
        return self.store.counts()

    def import_jsonl(self, path: Path, progress: Progress | None = None) -> tuple[int, list[str]]:
        """Import records exported by ``export_jsonl``; bad lines are reported, not fatal."""
        parsed: list[tuple[int, MemoryRecord | str]] = []
        for lineno, line in enumerate(_lines(Path(path)), 1):
            try:
                parsed.append((lineno, MemoryRecord.model_validate_json(line)))
            except ValidationError as exc:
                parsed.append((lineno, exc.errors()[0]["msg"]))
            if progress and lineno % 1000 == 0:
                progress("reading", lineno, None)
        return self._import(parsed, progress)

    def import_parquet(self, path: Path, progress: Progress | None = None) -> tuple[int, list[str]]:
        """Import a Parquet export (memory rows; relationships are re-derived from refs)."""
        parsed: list[tuple[int, MemoryRecord | str]] = []
        for i, raw in enumerate(self.store.records.read_parquet_rows(Path(path)), 1):
            row: dict[str, Any] = {("timestamp" if k == "ts" else k): v for k, v in raw.items()}
            row["attributes"] = json.loads(row.get("attributes") or "{}")
            row["spans"] = json.loads(row.get("spans") or "{}")
            fields = {k: v for k, v in row.items() if k not in ("recorded_at", "request_id") and v is not None}
            try:
                rec = MemoryRecord.model_validate(fields)
            except ValidationError as exc:
                parsed.append((i, exc.errors()[0]["msg"]))
                continue
            if rec.entity_type in self.schema.entity_names and rec.status != "unparsed":
                ent = self.schema.entity(rec.entity_type or "")
                rec.relationships = derived_links(self.schema, ent, rec.entity_id, rec.attributes)
            parsed.append((i, rec))
        return self._import(parsed, progress)

    def _import(
        self, parsed: list[tuple[int, MemoryRecord | str]], progress: Progress | None = None
    ) -> tuple[int, list[str]]:
        problems: list[str] = []
        existing = self.store.records.ids()
        batch: list[MemoryRecord] = []
        loaded = list(self.schemas.values())
        for where, item in parsed:
            if isinstance(item, str):
                problems.append(f"line {where}: {item}")
                continue
            schema, problem = check_record(loaded, item)
            if problem:
                problems.append(f"line {where}: {problem}")  # refused: never reaches a live entity
            elif item.memory_id not in existing:
                if schema is not None and schema.schema_id != item.schema_id:
                    item = item.model_copy(update={"schema_id": schema.schema_id})
                existing.add(item.memory_id)
                batch.append(item)
        for start in range(0, len(batch), 5000):
            self.store.write_many(batch[start : start + 5000])
            if progress:
                progress("storing", min(start + 5000, len(batch)), len(batch))
        if progress:
            progress("indexing", 0, None)
        if self.indexer is not None:  # a large import is embedded in the background
            self.indexer.notify()
        else:
            self.backfill_vectors()
        self.backfill_lexical()
        self.backfill_days()
        self.store.maintain()
        if progress:
            progress("indexing", 1, 1)
        return len(batch), problems

    def schema_suggestions(self, limit: int = 5000) -> list[dict[str, Any]]:
        """Attributes (and entity types) that recur in stored records but not in the schema."""
        found: dict[tuple[str, str], list[str]] = {}
        for rec in self.store.records.page(limit=limit):
            if not rec.entity_type or rec.status == "unparsed":
                continue
            try:
                known = set(self.schema.entity(rec.entity_type).attribute_names)
            except KeyError:
                found.setdefault((rec.entity_type, "(entity type)"), []).append(rec.source_text[:80])
                continue
            for name, value in rec.attributes.items():
                if name not in known and value is not None:
                    found.setdefault((rec.entity_type, name), []).append(str(value)[:80])
        rows = [
            {"entity": e, "attribute": a, "count": len(v), "examples": list(dict.fromkeys(v))[:3]}
            for (e, a), v in found.items()
        ]
        return sorted(rows, key=lambda r: -int(r["count"]))

    def entity_graph(self, session_id: str, entity_type: str, entity_id: str, depth: int = 2) -> list[str]:
        """Lines of an indented tree: the entity and what its relationships reach."""
        rels = self.store.list_relationships(session=session_id, limit=5000)
        lines = [f"{entity_type} {entity_id}"]
        seen = {(entity_type, entity_id)}

        def walk(etype: str, eid: str, level: int) -> None:
            if level > depth:
                return
            for r in rels:
                if (r.source_type, r.source_id) == (etype, eid):
                    nxt, arrow = (r.target_type, r.target_id), f"─{r.type}→"
                elif (r.target_type, r.target_id) == (etype, eid):
                    nxt, arrow = (r.source_type, r.source_id), f"←{r.type}─"
                else:
                    continue
                if nxt in seen:
                    continue
                seen.add(nxt)
                lines.append(f"{'    ' * level}{arrow} {nxt[0]} {nxt[1]}")
                walk(nxt[0], nxt[1], level + 1)

        walk(entity_type, entity_id, 1)
        return lines

    # --- lifecycle (delegated) ---------------------------------------------------------------
    def compact(
        self,
        entity_type: str | None = None,
        min_records: int | None = None,
        session_id: str | None = None,
        dry_run: bool = False,
        use_model: bool = True,
        progress: Progress | None = None,
    ) -> list[dict[str, Any]]:
        """Summarise busy entities into one summary record each (see ``lifecycle.service``)."""
        return self.lifecycle.compact(
            entity_type, min_records, session_id, dry_run=dry_run, use_model=use_model, progress=progress
        )

    def summary_sources(self, summary_id: str) -> list[MemoryRecord]:
        return self.lifecycle.summary_sources(summary_id)

    def forget(
        self, dry_run: bool = True, session_id: str | None = None, now: datetime | None = None
    ) -> list[Decision]:
        return self.lifecycle.forget(dry_run=dry_run, session_id=session_id, now=now)

    def has_session(self, session_id: str) -> bool:
        return self.store.records.session_exists(clean_session(session_id))

    def end_session(self, session_id: str, dry_run: bool = False) -> list[Decision]:
        """Mark a stored session ended and apply its forgetting policies; a session with no
        memory is not stored, so ending it is an error rather than a false "ended"."""
        if not self.has_session(session_id):
            raise NotFoundError(f"no session {session_id[:60]!r}", hint="list sessions with /memories or `list`")
        return self.lifecycle.end_session(session_id, dry_run=dry_run)

    def plan_migration(self, target: MemorySchema, spec: MigrationSpec | dict[str, Any]) -> MigrationPlan:
        return self.lifecycle.plan_migration(target, spec)

    def migrate(self, target: MemorySchema, spec: MigrationSpec | dict[str, Any]) -> dict[str, Any]:
        """Rewrite stored records for ``target`` and switch to it; refused if any record would not fit."""
        compiled = self.grammars.compile(target)
        loaded = self._after_switch(target)
        # the stored schema switches in the migration's own transaction
        done = self.lifecycle.migrate(self.schema, target, spec, then=lambda con: self._hold(loaded, con))
        self._use(loaded, compiled)
        return done

    def revert_migration(self, migration_id: str) -> dict[str, Any]:
        """Restore every row a migration changed and switch back to the schema it came from."""
        previous = self.lifecycle.migration_source(migration_id)
        compiled = self.grammars.compile(previous)
        loaded = self._after_switch(previous)
        done = self.lifecycle.revert_migration(migration_id, then=lambda con: self._hold(loaded, con))
        self._use(loaded, compiled)
        return done

    def warm_up(self) -> None:
        """Load the model and encoder and evaluate the default schema's prompts once, so the
        first request of a server is as fast as the next (servers call this before serving)."""
        with self._lock:
            extractor = self.extractor_for(self.schema)
            extractor.prepare()
            self.parser_for(self.schema).prepare()
        self._vector("warm up")

    # --- status -------------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        return {
            "schema": self.schema.domain,
            "schema_id": self.schema.schema_id,
            "schemas": {
                d: {"schema_id": x.schema_id, "schema_version": x.schema_version} for d, x in self.schemas.items()
            },
            "db": self.store.path,
            "counts": self.store.counts(),
            "model": self._model_spec
            if isinstance(self._model_spec, str)
            else getattr(self._model_spec, "model_id", "engine"),
            **({"recovered_log_copy": str(self.store.wal_copy)} if self.store.wal_copy else {}),
        }

    def close(self) -> None:
        if self.indexer is not None:
            self.indexer.close()
        self.store.close()

    def __enter__(self) -> Appliance:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _check_scope(all_sessions: bool, allowed: bool) -> None:
    if all_sessions and not allowed:
        raise AccessDenied("asking across sessions needs an admin key", hint="ask within your own session")


def memory_terms_of(text: str, attributes: dict[str, Any], entity_id: str | None = None) -> list[str]:
    """A memory's lexical terms: its text, its entity id and its values."""
    values = " ".join(str(v) for v in attributes.values() if v is not None and not isinstance(v, bool))
    return index_terms(f"{text} {entity_id or ''} {values}")


def memory_terms(rec: MemoryRecord) -> list[str]:
    return memory_terms_of(rec.source_text, rec.attributes, rec.entity_id)


def with_turn_before(terms: list[str], before: str | None) -> list[str]:
    """A turn's terms and the words of the turn just before it (``before``, None when there is
    none within the conversation gap) that it does not repeat: ``record`` and the backfill index
    a turn alike."""
    if before is None:
        return terms
    own = set(terms)
    return terms + [t for t in index_terms(before) if t not in own]


def _known(encoder: str) -> str:
    from .store import ENCODER_TABLES

    return encoder if encoder in ENCODER_TABLES else "use3"


def _lines(path: Path) -> Iterable[str]:
    with path.open(encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if line.strip():
                yield line
