"""The ``Appliance`` facade: wires schema → grammar → engine → extract → store → recall.

Everything the CLI, the panel and the HTTP edge do goes through here. The model is loaded
lazily (schema commands never pay for it) and one lock serialises generation, because a
llama.cpp context holds exactly one conversation state.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from .config import Settings
from .embed import Embedder, MiniLMEmbedder, embedder_available
from .engine import Engine, LlamaCppEngine, resolve_model_path
from .errors import InputError, QueryError, SchemaError
from .extract import ExtractMode, Extractor, derive_relationships, derived_links, mentions_of, relationship_of
from .grammar import CompiledGrammar, GrammarCache
from .lifecycle import LifecycleMixin
from .memory import MemoryRecord, RecallQuery, RecallResult, SemanticHit, draft_model
from .question import QuestionParser
from .recall import run_query, summarise
from .resolve import Resolver
from .route import SchemaChoice, choose_schema
from .schema import MemorySchema, load_schema, parse_schema
from .spans import find_candidates
from .store import MemoryStore

__all__ = ["Appliance", "resolve_schema", "MAX_TEXT_CHARS"]

MAX_TEXT_CHARS = 20_000
SEMANTIC_MIN_SCORE = 0.35  # cosine; below this a "related" memory is noise (all-MiniLM-L6-v2)
_EMBEDDER: Embedder | None = None
SchemaSpec = str | Path | MemorySchema | dict[str, Any]


def _shared_embedder() -> Embedder:
    """One MiniLM per process: loading torch and the weights costs seconds."""
    global _EMBEDDER
    if _EMBEDDER is None:
        _EMBEDDER = MiniLMEmbedder()
    return _EMBEDDER


def resolve_schema(schema: str | Path | MemorySchema | dict[str, Any], schema_dir: Path) -> MemorySchema:
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


def clean_text(text: Any, what: str = "text") -> str:
    """Refuse what cannot be a message: non-strings, empty, binary, oversize."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise InputError(f"the {what} is binary data, not UTF-8 text") from None
    if not isinstance(text, str):
        raise InputError(f"the {what} must be a string, not {type(text).__name__}")
    text = text.replace("\x00", "").strip()
    if not text:
        raise InputError(f"the {what} is empty")
    if len(text) > MAX_TEXT_CHARS:
        raise InputError(
            f"the {what} has {len(text)} characters, at most {MAX_TEXT_CHARS}", hint="split it into several messages"
        )
    control = sum(1 for ch in text if ord(ch) < 32 and ch not in "\n\r\t")
    if control > max(3, len(text) // 10):
        raise InputError(f"the {what} looks like binary data ({control} control characters)")
    return text


class Appliance(LifecycleMixin):
    """Offline memory for agents: ``record`` what you are told, ``recall`` what you need.

    Lifecycle operations (compact, forget, end_session, migrate) come from ``lifecycle``."""

    def __init__(
        self,
        schema: SchemaSpec | Sequence[SchemaSpec] = "customer_service",
        db: str | Path | None = None,
        model: str | Engine | None = None,
        settings: Settings | None = None,
        mode: ExtractMode = "grounded",
        embedder: Embedder | None | str = "auto",
    ) -> None:
        self.settings = settings or Settings.from_env()
        if embedder == "auto":
            embedder = _shared_embedder() if self.settings.semantic and embedder_available() else None
        self.embedder: Embedder | None = embedder if not isinstance(embedder, str) else None
        specs: list[SchemaSpec] = list(schema) if isinstance(schema, (list, tuple)) else [schema]  # type: ignore[list-item]
        if not specs:
            raise SchemaError("at least one schema is needed")
        loaded = [resolve_schema(x, self.settings.schema_dir) for x in specs]
        self.grammars = GrammarCache(self.settings.grammar_dir)
        # domain → schema; the first is the default (editing, panel, single-schema callers)
        self.schemas: dict[str, MemorySchema] = {}
        for sch in loaded:
            self.grammars.compile(sch)
            self.schemas[sch.domain] = sch
        self.schema = loaded[0]
        self.compiled: CompiledGrammar = self.grammars.compile(self.schema)
        self.store = MemoryStore(db if db is not None else self.settings.db_path)
        self.mode = mode
        self._model_spec = model if model is not None else self.settings.model
        self._engine: Engine | None = model if (model is not None and not isinstance(model, str)) else None
        self._extractors: dict[str, Extractor] = {}
        self._parsers: dict[str, QuestionParser] = {}
        self._lock = threading.Lock()

    # --- model ------------------------------------------------------------------------
    @property
    def engine(self) -> Engine:
        if self._engine is None:
            assert isinstance(self._model_spec, str)
            path = resolve_model_path(self._model_spec, self.settings.models_dir)
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

    def schema_for(self, text: str, named: str | None = None) -> tuple[MemorySchema, SchemaChoice | None]:
        """The schema a caller named, else the loaded one that fits ``text`` (model + lexical choice)."""
        if named is not None:
            if named not in self.schemas:
                raise SchemaError(f"schema {named!r} is not loaded", hint=f"loaded: {', '.join(self.schemas)}")
            return self.schemas[named], None
        if len(self.schemas) == 1:
            return self.schema, None
        with self._lock:
            choice = choose_schema(list(self.schemas.values()), self.engine, text)
        return self.schemas[choice.domain], choice

    def schema_by_id(self, schema_id: str) -> MemorySchema:
        """The loaded schema a record was written under (else the default)."""
        return next((x for x in self.schemas.values() if x.schema_id == schema_id), self.schema)

    # --- schema -----------------------------------------------------------------------
    def set_schema(self, schema: str | Path | MemorySchema | dict[str, Any], force: bool = False) -> CompiledGrammar:
        """Validate, compile and switch to another schema (stored records are kept)."""
        new = resolve_schema(schema, self.settings.schema_dir)
        compiled = self.grammars.compile(new, force=force)
        old = self.schema
        self.schema, self.compiled = new, compiled
        self.schemas = {new.domain: new, **{d: x for d, x in self.schemas.items() if d not in (new.domain, old.domain)}}
        # decoders of schemas no longer loaded hold prompts and grammar indexes: drop them
        live = {x.schema_id for x in self.schemas.values()}
        self._extractors = {k: v for k, v in self._extractors.items() if k in live}
        self._parsers = {k: v for k, v in self._parsers.items() if k in live}
        return compiled

    def add_schema(self, schema: SchemaSpec) -> MemorySchema:
        """Load another schema alongside the others (utterances are routed among them)."""
        new = resolve_schema(schema, self.settings.schema_dir)
        self.grammars.compile(new)
        self.schemas[new.domain] = new
        return new

    # --- record -----------------------------------------------------------------------
    def record(
        self,
        text: Any,
        session_id: str = "default",
        now: datetime | None = None,
        on_progress: Callable[[str], None] | None = None,
        schema: str | None = None,
    ) -> MemoryRecord:
        """Extract a memory from ``text`` and store it; nothing is dropped.

        ``on_progress`` receives the record JSON as it is written (for streaming UIs);
        ``schema`` names the loaded schema to use (default: chosen per utterance)."""
        text = clean_text(text)
        session_id = clean_session(session_id)
        now = now or datetime.now(UTC)
        sch, routed = self.schema_for(text, schema)
        base = dict(
            memory_id=uuid.uuid4().hex,
            session_id=session_id,
            timestamp=now,
            schema_id=sch.schema_id,
            source_text=text,
        )
        with self._lock:
            extractor = self.extractor_for(sch)
            try:
                extractor.on_progress = on_progress
                try:
                    result = extractor.extract(
                        text, now, corrects=Resolver(sch, self.store).corrected_event(text, session_id)
                    )
                finally:
                    extractor.on_progress = None
            except InputError as exc:  # e.g. context overflow: keep the text, flag it
                rec = MemoryRecord(**base, status="unparsed", confidence=0.0, note=exc.message)
                return self.store.add_record(rec)
        if result.draft is None:
            rec = MemoryRecord(
                **base,
                status="unparsed",
                confidence=0.0,
                raw_output=result.raw_output[:4000],
                note=result.note or "no valid record",
            )
            return self.store.add_record(rec)
        d = result.draft
        ent = sch.entity(d.entity.type)
        status: Literal["ok", "needs_review"] = (
            "ok" if result.confidence >= self.settings.review_threshold else "needs_review"
        )
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
            note=(
                result.note + (f" | schema {routed.domain} chosen (p={routed.probability:.2f})" if routed else "")
            ).strip(" |"),
            relationships=[relationship_of(r.model_dump()) for r in d.relationships],
            mentions=mentions_of(sch, ent, d.entity.attributes),
        )
        stored = self._store_resolved(rec)
        self._embed([stored])
        return stored

    def _store_resolved(self, rec: MemoryRecord) -> MemoryRecord:
        """Apply the schema's resolution rules, store, then the merges/corrections they imply.

        One lock around read-resolve-write, so two records cannot both mint or merge the
        same entity."""
        with self._lock:
            res = Resolver(self.schema_by_id(rec.schema_id), self.store).resolve(rec)
            stored = self.store.add_record(res.record)
            for etype, eid in res.partial_ids:
                self.store.mark_partial_id(stored.session_id, etype, eid)
            for etype, old, new, rule in res.merges:
                self.store.merge_entities(stored.session_id, etype, old, new, rule, stored.memory_id)
            if res.correction is not None:
                earlier, etype, old, new = res.correction
                self.store.relink_record(earlier, etype, old, new, by_memory=stored.memory_id)
        return stored

    def _embed(self, records: list[MemoryRecord]) -> None:
        """Store sentence vectors for records; a failure here never loses the record itself
        (``backfill_vectors`` embeds whatever is missing)."""
        if self.embedder is None or not records:
            return
        try:
            vecs = self.embedder.encode([r.source_text for r in records])
            self.store.add_vectors([(r.memory_id, r.session_id, v) for r, v in zip(records, vecs)])
        except Exception:  # noqa: BLE001 - embedding is an optional complement
            return

    def backfill_vectors(self, batch: int = 256) -> int:
        """Embed stored records that have no vector yet; returns how many were embedded."""
        if self.embedder is None:
            return 0
        done = 0
        while rows := self.store.memories_without_vectors(batch):
            vecs = self.embedder.encode([t for _, _, t in rows])
            self.store.add_vectors([(m, s, v) for (m, s, _), v in zip(rows, vecs)])
            done += len(rows)
        return done

    # --- recall -----------------------------------------------------------------------
    def recall(self, question: Any, session_id: str = "default", schema: str | None = None) -> RecallResult:
        """Answer a question from memory: parse → SQL → hits → context."""
        question = clean_text(question, "question")
        session_id = clean_session(session_id)
        sch, _ = self.schema_for(question, schema)
        with self._lock:
            parsed = self.parser_for(sch).parse(question, datetime.now(UTC))
        query = parsed.query or RecallQuery()
        result = self.query(query, session_id, question=question, schema=sch.domain)
        result.raw_output = parsed.raw_output
        partial = ""
        if not result.hits and query.chain:
            # Nothing at the end of the path: show what the conditions matched at its start.
            start = self.query(query.model_copy(update={"hop": None, "hops": []}), session_id, schema=sch.domain)
            for h in start.hits:
                h.path = "structured (path start)"
            result.hits = start.hits
            if start.hits:
                partial = f"No {query.result_type} reached from these through {', '.join(h.relationship for h in query.chain)}.\n"
        seen = {m.memory_id for h in result.hits for m in h.memories}
        extra: dict[str, MemoryRecord] = {}
        if not result.hits:
            # The structured path found nothing: fall back to the message text itself.
            words = [str(c.surface) for c in find_candidates(question, datetime.now(UTC))]
            for w in words[:3]:
                for m in self.store.records_where(
                    "m.session_id = ? AND contains(m.source_text, ?)", [session_id, w], limit=5
                ):
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

    def query(
        self,
        query: RecallQuery | dict[str, Any],
        session_id: str = "default",
        question: str = "",
        schema: str | None = None,
    ) -> RecallResult:
        """Run a structured query directly (agents that skip the model)."""
        sch = self.schema_for("", schema)[0] if schema is not None else self.schema
        try:
            q = query if isinstance(query, RecallQuery) else RecallQuery.model_validate(query)
        except ValidationError as exc:
            err = exc.errors()[0]
            raise QueryError(f"invalid query at {'.'.join(map(str, err['loc']))}: {err['msg']}") from None
        sql, params, hits = run_query(self.store, sch, q, clean_session(session_id))
        return RecallResult(question=question, query=q, sql=sql, params=params, hits=hits, context=summarise(hits))

    # --- editing ----------------------------------------------------------------------
    def edit_record(self, memory_id: str, changes: dict[str, Any]) -> MemoryRecord:
        """Change a record's fields; the result must still validate against the schema."""
        rec = self.store.get_record(memory_id)
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
        for key in ("event_type", "entity_type", "state", "entity_id"):
            if key in changes and changes[key] is not None and not isinstance(changes[key], str):
                raise QueryError(f"{key} must be a string or null")
        status = changes.get("status", "reviewed")
        if status not in ("ok", "needs_review", "reviewed"):
            raise QueryError(f"status must be ok, needs_review or reviewed, not {str(status)[:40]!r}")
        merged.update({k: v for k, v in changes.items() if k not in ("status", "attributes")})
        merged["attributes"] = {**merged["attributes"], **changes.get("attributes", {})}
        try:
            ent = sch.entity(str(merged["entity_type"]))
        except KeyError:
            raise QueryError(f"unknown entity type {merged['entity_type']!r}") from None
        attrs = {a.name: merged["attributes"].get(a.name) for a in ent.value_attributes}
        extra = set(merged["attributes"]) - set(attrs)
        if extra:
            raise QueryError(f"{ent.name} has no attribute(s) {sorted(extra)}")
        draft = {
            "event_type": merged["event_type"],
            "entity": {"type": ent.name, "id": merged["entity_id"], "state": merged["state"], "attributes": attrs},
            "relationships": derive_relationships(sch, ent, merged["entity_id"], attrs),
        }
        try:
            draft_model(sch).model_validate(draft)
        except ValidationError as exc:
            # Union errors list every entity branch: report the branch of this entity type.
            errs = [e for e in exc.errors() if f"{ent.name}Entity" in map(str, e["loc"])] or exc.errors()
            loc = ".".join(str(p) for p in errs[0]["loc"] if not str(p).endswith("Entity"))
            raise QueryError(f"invalid value at {loc}: {errs[0]['msg']}") from None
        fields = {
            **{k: merged[k] for k in ("event_type", "entity_type", "entity_id", "state")},
            "attributes": attrs,
            "status": status,
        }
        return self.store.update_record(memory_id, **fields)

    def delete_record(self, memory_id: str) -> bool:
        return self.store.delete_record(memory_id)

    # --- import / export ----------------------------------------------------------------
    def export_jsonl(self, path: Path) -> int:
        n = 0
        with Path(path).open("w", encoding="utf-8") as fh:
            for rec in self.store.iter_records():
                fh.write(rec.model_dump_json() + "\n")
                n += 1
        return n

    def import_jsonl(self, path: Path) -> tuple[int, list[str]]:
        """Import records exported by ``export_jsonl``; bad lines are reported, not fatal."""
        parsed: list[tuple[int, MemoryRecord | str]] = []
        for lineno, line in enumerate(_lines(Path(path)), 1):
            try:
                parsed.append((lineno, MemoryRecord.model_validate_json(line)))
            except ValidationError as exc:
                parsed.append((lineno, exc.errors()[0]["msg"]))
        return self._import(parsed)

    def import_parquet(self, path: Path) -> tuple[int, list[str]]:
        """Import a Parquet export (memory rows; relationships are re-derived from refs)."""
        parsed: list[tuple[int, MemoryRecord | str]] = []
        for i, row in enumerate(self.store.read_parquet_rows(Path(path)), 1):
            row = {("timestamp" if k == "ts" else k): v for k, v in row.items()}
            row["attributes"] = json.loads(row.get("attributes") or "{}")
            try:
                rec = MemoryRecord.model_validate({k: v for k, v in row.items() if v is not None})
            except ValidationError as exc:
                parsed.append((i, exc.errors()[0]["msg"]))
                continue
            if rec.entity_type in self.schema.entity_names and rec.status != "unparsed":
                ent = self.schema.entity(rec.entity_type or "")
                rec.relationships = derived_links(self.schema, ent, rec.entity_id, rec.attributes)
            parsed.append((i, rec))
        return self._import(parsed)

    def _import(self, parsed: list[tuple[int, MemoryRecord | str]]) -> tuple[int, list[str]]:
        problems: list[str] = []
        existing = {r.memory_id for r in self.store.iter_records()}
        batch: list[MemoryRecord] = []
        for where, item in parsed:
            if isinstance(item, str):
                problems.append(f"line {where}: {item}")
            elif item.memory_id not in existing:
                existing.add(item.memory_id)
                batch.append(item)
        for start in range(0, len(batch), 5000):
            self.store.add_records_bulk(batch[start : start + 5000])
        self.backfill_vectors()
        return len(batch), problems

    def schema_suggestions(self, limit: int = 5000) -> list[dict[str, Any]]:
        """Attributes (and entity types) that recur in stored records but not in the schema."""
        found: dict[tuple[str, str], list[str]] = {}
        for rec in self.store.list_records(limit=limit):
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

    def status(self) -> dict[str, Any]:
        return {
            "schema": self.schema.domain,
            "schema_id": self.schema.schema_id,
            "db": self.store.path,
            "counts": self.store.counts(),
            "model": self._model_spec
            if isinstance(self._model_spec, str)
            else getattr(self._model_spec, "model_id", "engine"),
        }

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Appliance:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def clean_session(session_id: Any) -> str:
    if not isinstance(session_id, str) or not session_id.strip() or len(session_id) > 128:
        raise InputError("session_id must be a non-empty string of at most 128 characters")
    return session_id.strip()


def _lines(path: Path) -> Iterable[str]:
    with path.open(encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if line.strip():
                yield line
