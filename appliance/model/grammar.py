"""Schema → JSON Schema → regex → outlines_core Index, cached on disk under ``grammars/``.

Why this module exists: compiling a grammar is the expensive, cacheable part of constrained
decoding (outlines rebuilds vocabulary and Index on every ``model(prompt, Type)`` call,
0.05–1.5 s). Here each schema compiles once to

* ``record.schema.json`` / ``query.schema.json`` — the JSON Schemas a record / recall query
  must satisfy (enums for event, entity and state; attribute keys restricted per entity;
  relationship types restricted to those declared),
* ``record.regex`` / ``query.regex`` — their regular languages (outlines_core), compact
  (no optional whitespace: fewer tokens, every key is forced),
* ``*.<tokenizer>.index`` — the pickled token-level Index for one tokenizer,

in ``grammars/<domain>-<schema hash>/`` with ``grammars/manifest.json`` mapping schema hash
→ files. Keys include the outlines_core version and tokenizer id, so an upgrade or another
model never reuses a stale Index. Strings carry no ``maxLength`` (it grows the Index ~0.33 MB
per character); length is bounded by ``max_tokens`` and by validation instead.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any, Literal

from ..domain.drafts import QUERY_LIMITS, query_json_schema, record_json_schema
from ..domain.schema import MemorySchema
from ..errors import GrammarError

__all__ = [
    "record_json_schema",
    "query_json_schema",
    "regex_for",
    "GrammarCache",
    "CompiledGrammar",
    "GrammarKind",
    "QUERY_LIMITS",
]

GrammarKind = Literal["record", "query"]
OUTLINES_CORE_VERSION = version("outlines_core")
# Bump when the JSON Schemas generated below change shape: cached files of an older
# format are pruned, as they are after an outlines_core upgrade.
GRAMMAR_FORMAT = 4


def regex_for(json_schema: dict[str, Any]) -> str:
    """The compact regular language of a JSON Schema (outlines_core)."""
    from outlines_core.json_schema import build_regex_from_schema

    try:
        regex = str(build_regex_from_schema(json.dumps(json_schema), ""))
    except Exception as exc:  # outlines_core raises bare ValueError/RuntimeError
        raise GrammarError(f"cannot compile JSON Schema to a regex: {exc}") from None
    # a JSON number of unbounded digits or exponent is no finite double ("9"*400, 1e400 read as
    # infinity), which validation refuses: the grammar admits only numbers that are finite
    return regex.replace(_EXPONENT, r"([eE][+-][0-9]{1,2})?").replace(_INTEGER, r"(0|[1-9][0-9]{0,29})")


_EXPONENT = r"([eE][+-][0-9]+)?"
_INTEGER = r"(0|[1-9][0-9]*)"


@dataclass
class CompiledGrammar:
    """The compiled artifacts of one schema (regexes are model-independent)."""

    schema_id: str
    directory: Path
    record_schema: dict[str, Any]
    query_schema: dict[str, Any]
    record_regex: str
    query_regex: str
    compile_seconds: float
    from_cache: bool
    index_seconds: dict[str, float] = field(default_factory=dict)

    def regex(self, kind: GrammarKind) -> str:
        return self.record_regex if kind == "record" else self.query_regex


def _atomic_write(path: Path, data: bytes) -> None:
    """Write via a temp file + rename so a crash never leaves half a grammar file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.chmod(tmp, 0o644)  # mkstemp makes 0600; grammars are shared, readable files
    os.replace(tmp, path)


class GrammarCache:
    """Compiles schemas into ``root`` once and reuses the files while the schema is unchanged.

    ``shipped``: grammars installed with the package (read-only, never written): a schema
    compiled there is loaded from it; everything else is compiled into ``root``, a cache under
    the user's home — nothing is written into the checkout at run time."""

    def __init__(self, root: Path, shipped: Path | None = None, read_only: bool = False) -> None:
        self.root = Path(root)
        self.read_only = read_only
        self.shipped = (
            GrammarCache(shipped, read_only=True) if shipped is not None and Path(shipped) != self.root else None
        )
        self._memo: dict[tuple[str, str, str], Any] = {}

    @property
    def manifest_path(self) -> Path:
        return self.root / "manifest.json"

    def manifest(self) -> dict[str, Any]:
        try:
            data = json.loads(self.manifest_path.read_text())
        except (OSError, json.JSONDecodeError):
            return self._empty()
        if data.get("outlines_core") != OUTLINES_CORE_VERSION or data.get("grammar_format") != GRAMMAR_FORMAT:
            if not self.read_only:
                self._prune(data)  # another outlines_core or generator wrote these: regexes may differ
            return self._empty()
        return dict(data)

    @staticmethod
    def _empty() -> dict[str, Any]:
        return {"outlines_core": OUTLINES_CORE_VERSION, "grammar_format": GRAMMAR_FORMAT, "schemas": {}}

    def _prune(self, data: dict[str, Any]) -> None:
        for entry in data.get("schemas", {}).values():
            shutil.rmtree(self.root / entry.get("directory", "-missing-"), ignore_errors=True)

    def _dir(self, schema: MemorySchema) -> Path:
        return self.root / f"{schema.slug}-{schema.schema_id}"

    def compile(self, schema: MemorySchema, force: bool = False) -> CompiledGrammar:
        """Compile (or load) the record and query grammars of ``schema``."""
        start = time.perf_counter()
        if not force and self.shipped is not None:
            found = self.shipped.cached(schema)
            if found is not None:
                return found
        found = None if force else self.cached(schema)
        if found is not None:
            return found
        return self._build(schema, force, start)

    def cached(self, schema: MemorySchema) -> CompiledGrammar | None:
        """The compiled grammars of ``schema`` in this directory, or None."""
        start = time.perf_counter()
        d = self._dir(schema)
        entry = self.manifest()["schemas"].get(schema.schema_id)
        if entry:
            try:
                return CompiledGrammar(
                    schema_id=schema.schema_id,
                    directory=d,
                    record_schema=json.loads((d / "record.schema.json").read_text()),
                    query_schema=json.loads((d / "query.schema.json").read_text()),
                    record_regex=(d / "record.regex").read_text(),
                    query_regex=(d / "query.regex").read_text(),
                    compile_seconds=time.perf_counter() - start,
                    from_cache=True,
                )
            except (OSError, json.JSONDecodeError):
                pass  # damaged cache entry: the caller rebuilds
        return None

    def _build(self, schema: MemorySchema, force: bool, start: float) -> CompiledGrammar:
        d = self._dir(schema)
        manifest = self.manifest()
        rec_schema = record_json_schema(schema)
        qry_schema = query_json_schema(schema)
        rec_regex = regex_for(rec_schema)
        qry_regex = regex_for(qry_schema)
        if force:
            shutil.rmtree(d, ignore_errors=True)
        _atomic_write(d / "schema.json", _dumps(schema.to_json_dict()))
        _atomic_write(d / "record.schema.json", _dumps(rec_schema))
        _atomic_write(d / "query.schema.json", _dumps(qry_schema))
        _atomic_write(d / "record.regex", rec_regex.encode())
        _atomic_write(d / "query.regex", qry_regex.encode())
        seconds = time.perf_counter() - start
        manifest["schemas"][schema.schema_id] = {
            "domain": schema.domain,
            "schema_version": schema.schema_version,
            "directory": d.name,
            "files": sorted(p.name for p in d.iterdir() if not p.name.startswith(".")),
            "compile_seconds": round(seconds, 4),
            "compiled_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        _atomic_write(self.manifest_path, _dumps(manifest))
        return CompiledGrammar(
            schema_id=schema.schema_id,
            directory=d,
            record_schema=rec_schema,
            query_schema=qry_schema,
            record_regex=rec_regex,
            query_regex=qry_regex,
            compile_seconds=seconds,
            from_cache=False,
        )

    def index(self, compiled: CompiledGrammar, kind: GrammarKind, vocabulary: Any, tokenizer_id: str) -> Any:
        """The outlines_core Index of ``kind`` for one tokenizer: memory, then disk, then build."""
        start = time.perf_counter()
        name = f"{kind}.{tokenizer_id}.index"
        # a shipped grammar's index is built into (and then read from) the cache, never the package
        path = compiled.directory / name
        if not path.is_relative_to(self.root):
            path = self.root / compiled.directory.name / name
        index = self._index((compiled.schema_id, kind, tokenizer_id), compiled.regex(kind), path, vocabulary, kind)
        compiled.index_seconds.setdefault(kind, time.perf_counter() - start)
        return index

    def regex_index(self, name: str, regex: str, vocabulary: Any, tokenizer_id: str) -> Any:
        """The Index of a schema-independent regex (e.g. the summary grammar), cached the same way."""
        digest = hashlib.sha256(f"{OUTLINES_CORE_VERSION}\n{regex}".encode()).hexdigest()[:12]
        path = self.root / "shared" / f"{name}.{digest}.{tokenizer_id}.index"
        return self._index((digest, name, tokenizer_id), regex, path, vocabulary, name)

    def _index(self, key: tuple[str, str, str], regex: str, path: Path, vocabulary: Any, what: str) -> Any:
        from outlines_core import Index

        if key in self._memo:
            return self._memo[key]
        index = None
        if path.exists():
            try:
                index = pickle.loads(path.read_bytes())
            except Exception:  # truncated/foreign pickle: rebuild rather than fail
                index = None
        if index is None:
            try:
                index = Index(regex, vocabulary)
            except Exception as exc:
                raise GrammarError(f"cannot build the {what} token index: {exc}") from None
            _atomic_write(path, pickle.dumps(index))
        self._memo[key] = index
        return index


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, indent=1, ensure_ascii=False).encode()
