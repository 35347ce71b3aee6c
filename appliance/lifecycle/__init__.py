"""The memory lifecycle: which entity a record is about (resolution, corrections), compaction,
forgetting and schema migrations — each applying the record's own schema."""

from __future__ import annotations

from .forgetting import Decision
from .migrate import MigrationPlan, MigrationSpec
from .resolve import Resolver
from .service import LifecycleService

__all__ = ["Resolver", "LifecycleService", "Decision", "MigrationPlan", "MigrationSpec"]
