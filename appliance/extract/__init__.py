"""Extraction: a message → a grounded, schema-valid record draft (and which schema it is for)."""

from __future__ import annotations

from .extractor import Extraction, ExtractMode, Extractor
from .routing import SchemaChoice, choose_schema

__all__ = ["Extraction", "ExtractMode", "Extractor", "SchemaChoice", "choose_schema"]
