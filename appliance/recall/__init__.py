"""Recall: a question → structured query (+ hops) → SQL hits → fallbacks → context."""

from __future__ import annotations

from .context import summarise
from .question import ParsedQuestion, QuestionParser
from .service import RecallService

__all__ = ["QuestionParser", "ParsedQuestion", "RecallService", "summarise"]
