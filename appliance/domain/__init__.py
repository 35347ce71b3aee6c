"""The domain: schemas (what can be remembered), records and queries (what is), no I/O."""

from __future__ import annotations

from .loading import load_schema, parse_attribute, parse_schema, schema_problems
from .records import MemoryRecord, RecallQuery, RecallResult
from .schema import MemorySchema

__all__ = [
    "MemorySchema",
    "MemoryRecord",
    "RecallQuery",
    "RecallResult",
    "load_schema",
    "parse_schema",
    "parse_attribute",
    "schema_problems",
]
