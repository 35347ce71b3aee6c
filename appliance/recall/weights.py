"""The read path's fitted numbers, shipped as a data file (``weights.json``).

Written by ``bench/fit_recall.py`` from the fit split of the conversational sets (never from the
held-out half): the weight of each channel in the fused ranking, the rank fusion's constant,
the share of the best lexical score a hit needs to take part, BM25's k1 and b, the BM25 share of
the text channel's score fusion, how bare a question turn must be to go after the statements,
and per sentence encoder the cosines that decide what the semantic channel offers (cosines of
one encoder do not compare with another's: e5's unrelated pairs score about 0.75, USE v3's about
0.1).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["RecallWeights", "SemanticCuts", "WEIGHTS_FILE", "NOT_FOUND_RULES"]

WEIGHTS_FILE = Path(__file__).with_name("weights.json")
# the rules that may say "not found" (``RecallService.reasons``), in the order they are read
NOT_FOUND_RULES = (
    "empty_range",
    "unknown_code",
    "unknown_suffixed",
    "unknown_name",
    "lost_owner",
    "unlinked_possession",
    "unlinked",
    "absent_word",
    "lacking",
    "no_amount",
    "told_of_another",
)


@dataclass(frozen=True)
class SemanticCuts:
    """Cosines of one encoder: a neighbour takes part in fusion from ``min_score``; below it, down
    to ``weak_score``, it only fills a short list; a question word no memory holds means "not
    stored" only when the closest memory is below ``not_found_below``."""

    min_score: float
    weak_score: float
    not_found_below: float


@dataclass(frozen=True)
class RecallWeights:
    # the channel weights fitted with the default encoder (e5); ``unfitted_channels`` serve
    # another encoder or none (``APPLIANCE_SEMANTIC=off``), as they were before any fit
    channels: dict[str, float]
    unfitted_channels: dict[str, float]
    fitted_encoder: str
    lexical_reach: float
    text_lexical_weight: float  # the BM25 share of the text channel's score fusion (fusion.text_scores)
    bm25_k1: float  # term-frequency saturation of the lexical channel
    bm25_b: float  # its length normalisation (0: none)
    semantic: dict[str, SemanticCuts] = field(default_factory=dict)
    # the "not found" rules kept by the fit (each earns its place on the fit split)
    not_found_rules: frozenset[str] = frozenset(NOT_FOUND_RULES)
    # reciprocal-rank fusion's constant: a memory ranked r by a channel gains weight / (k + r); a
    # small k lets a channel's first few ranks count far more than its tenth
    rank_constant: float = 60.0
    # a turn that only asks back ("Marcus: What happened?") is a pointer to its reply, not evidence:
    # a question with at most this many content words goes after the rest of the ranking (-1: off)
    bare_question_terms: int = -1

    def channels_for(self, encoder: str | None) -> dict[str, float]:
        """The fusion weights for recall with ``encoder`` (None: no encoder)."""
        return self.channels if encoder == self.fitted_encoder else self.unfitted_channels

    def cuts(self, encoder: str) -> SemanticCuts:
        """The encoder's cuts (an encoder never fitted takes USE v3's: the unit tests' hashing one)."""
        return self.semantic.get(encoder) or self.semantic["use3"]

    @classmethod
    def load(cls, path: Path = WEIGHTS_FILE) -> RecallWeights:
        data = json.loads(path.read_text(encoding="utf-8"))
        return cls(
            channels={k: float(v) for k, v in data["channels"].items()},
            unfitted_channels={k: float(v) for k, v in data["unfitted_channels"].items()},
            fitted_encoder=str(data["fitted_encoder"]),
            lexical_reach=float(data["lexical_reach"]),
            text_lexical_weight=float(data["text_lexical_weight"]),
            bm25_k1=float(data["bm25_k1"]),
            bm25_b=float(data["bm25_b"]),
            semantic={k: SemanticCuts(**v) for k, v in data["semantic"].items()},
            not_found_rules=frozenset(data.get("not_found_rules", NOT_FOUND_RULES)),
            rank_constant=float(data.get("rank_constant", cls.rank_constant)),
            bare_question_terms=int(data.get("bare_question_terms", cls.bare_question_terms)),
        )

    def to_json(self, **meta: Any) -> str:
        out = {
            **meta,
            "fitted_encoder": self.fitted_encoder,
            "channels": self.channels,
            "unfitted_channels": self.unfitted_channels,
            "lexical_reach": self.lexical_reach,
            "text_lexical_weight": self.text_lexical_weight,
            "bm25_k1": self.bm25_k1,
            "bm25_b": self.bm25_b,
            "semantic": {k: vars(v) for k, v in self.semantic.items()},
            "not_found_rules": [r for r in NOT_FOUND_RULES if r in self.not_found_rules],
            "rank_constant": self.rank_constant,
            "bare_question_terms": self.bare_question_terms,
        }
        return json.dumps(out, indent=1, ensure_ascii=False) + "\n"
