"""Offline, schema-constrained memory for LLM agents."""

from .api import Appliance
from .errors import ApplianceError
from .memory import MemoryRecord, RecallQuery, RecallResult
from .schema import MemorySchema, load_schema, parse_schema

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
