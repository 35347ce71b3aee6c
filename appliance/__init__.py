"""Offline, schema-constrained memory for LLM agents."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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
__version__ = "0.2.0"

# Imported on first use: `appliance record` against a running server (the warm CLI) must start in
# well under a second, and the facade pulls in DuckDB, numpy and the model seam.
_WHERE = {
    "Appliance": ".api",
    "ApplianceError": ".errors",
    "MemoryRecord": ".domain.records",
    "RecallQuery": ".domain.records",
    "RecallResult": ".domain.records",
    "MemorySchema": ".domain.schema",
    "load_schema": ".domain.loading",
    "parse_schema": ".domain.loading",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(import_module(_WHERE[name], __name__), name)
    raise AttributeError(f"module 'appliance' has no attribute {name!r}")
