"""Offline, schema-constrained memory for LLM agents."""

from .api import Appliance
from .domain.loading import load_schema, parse_schema
from .domain.records import MemoryRecord, RecallQuery, RecallResult
from .domain.schema import MemorySchema
from .errors import ApplianceError

__all__ = [
    "Appliance",
    "ApplianceError",
    "MemoryRecord",
    "MemorySchema",
    "RecallQuery",
    "RecallResult",
    "load_schema",
    "parse_schema",
]
__version__ = "0.1.0"
