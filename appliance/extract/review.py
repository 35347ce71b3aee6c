"""When a record needs a person: a fitted model of how likely the record is wrong.

A record is flagged ``needs_review`` so that a person looks at what is likely wrong, and only
that: a flag on four records of five tells a user nothing. The decision reads the evidence the
extractor already has (``REVIEW_FEATURES``): how sure the event and entity choices were, the
least sure value, how closely another attribute rivals a value, how much of the entity the
message filled, whether the entity's key was found. A logistic model over them, fitted on the fit
sets (``bench/fit_weights.py --review``: each record of the fit dialogues and notes labelled right
or wrong), gives the probability that the record is wrong; above the fitted threshold it is
flagged, with the feature that weighed most as the reason a person reads. The threshold is the
highest that still flags ``TARGET_RECALL`` of the wrong records of the fit sets.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..domain.schema import EntityType

__all__ = ["REVIEW_FEATURES", "REVIEW_FILE", "ReviewModel", "review_features", "review_model", "TARGET_RECALL"]

REVIEW_FEATURES = (
    "bias",
    "event_unsure",  # 1 − the chosen event's probability
    "entity_unsure",  # 1 − the chosen entity type's probability (0 with one entity type)
    "value_unsure",  # 1 − the least sure filled value's probability (0 when none is filled)
    "rival_close",  # how near another attribute's score comes to a filled value's (0: none within 3)
    "unfilled",  # the share of the entity's attributes the record leaves empty
    "nothing_filled",  # no value and no id at all
    "key_missing",  # the entity is known by a key attribute and the record has no value for it
    "offered_unused",  # the message offered candidate values, none was taken
)
REVIEW_FILE = Path(__file__).with_name("review.json")
TARGET_RECALL = 0.95  # of the wrong records of the fit sets, the share the flag must catch

# what a person reads for the feature that weighed most
_REASONS = {
    "event_unsure": "the event choice was close",
    "entity_unsure": "the entity type was a close call",
    "value_unsure": "a value was a close call",
    "rival_close": "the same words fit another attribute almost as well",
    "unfilled": "most of the entity's attributes are empty",
    "nothing_filled": "no value was recognised",
    "key_missing": "what the record is about (its key) was not found",
    "offered_unused": "the message seems to state values, but none was taken",
}


@dataclass
class ReviewModel:
    """Logistic weights over ``REVIEW_FEATURES`` and the flagging threshold on P(wrong)."""

    weights: np.ndarray
    mu: np.ndarray
    sd: np.ndarray
    threshold: float

    @classmethod
    def load(cls, path: Path = REVIEW_FILE) -> ReviewModel:
        data = json.loads(path.read_text(encoding="utf-8"))
        if list(data["features"]) != list(REVIEW_FEATURES):
            raise ValueError(f"{path.name} was fitted on other features; refit with bench/fit_weights.py --review")
        return cls(np.array(data["weights"]), np.array(data["mu"]), np.array(data["sd"]), float(data["threshold"]))

    def probability_wrong(self, features: dict[str, float]) -> float:
        return _logistic(float(self._parts(features).sum()))

    def reason(self, features: dict[str, float]) -> str:
        """Why a person should look ("" when the record is likely right)."""
        parts = self._parts(features)
        p = _logistic(float(parts.sum()))
        if p < self.threshold:
            return ""
        named = [(parts[i], f) for i, f in enumerate(REVIEW_FEATURES) if f in _REASONS and features.get(f, 0.0) > 0]
        top = max(named)[1] if named else "event_unsure"
        return f"{_REASONS[top]} (p wrong {p:.2f})"

    def _parts(self, features: dict[str, float]) -> np.ndarray:
        """Each feature's share of the log-odds that the record is wrong."""
        x = np.array([1.0 if f == "bias" else float(features.get(f, 0.0)) for f in REVIEW_FEATURES])
        return np.asarray((x - self.mu) / self.sd * self.weights)


def _logistic(z: float) -> float:
    return float(1 / (1 + np.exp(-np.clip(z, -30, 30))))


_MODEL: ReviewModel | None = None


def review_model() -> ReviewModel:
    global _MODEL
    if _MODEL is None:
        _MODEL = ReviewModel.load()
    return _MODEL


def review_features(
    conf: Mapping[str, float],
    ent: EntityType,
    attributes: Mapping[str, Any],
    entity_id: str | None,
    rivals: Mapping[str, tuple[str, float]],
    offered: bool,
) -> dict[str, float]:
    """The record's ``REVIEW_FEATURES`` (``conf``: the probabilities of the extractor's choices;
    ``rivals``: per filled attribute, the next best attribute for its words and the score gap;
    ``offered``: the message held candidate values of the entity)."""
    filled = [a.name for a in ent.value_attributes if attributes.get(a.name) is not None]
    sure = [conf[a] for a in filled if a in conf]
    gaps = [gap for _, gap in rivals.values()]
    key = ent.key[0] if ent.key else None
    total = len(ent.value_attributes)
    return {
        "event_unsure": 1.0 - conf.get("event_type", 1.0),
        "entity_unsure": 1.0 - conf.get("entity_type", 1.0),
        "value_unsure": 1.0 - min(sure) if sure else 0.0,
        "rival_close": max(0.0, 3.0 - min(gaps)) / 3.0 if gaps else 0.0,
        "unfilled": 1.0 - len(filled) / total if total else 0.0,
        "nothing_filled": float(not filled and entity_id is None),
        "key_missing": float(key is not None and attributes.get(key) is None),
        "offered_unused": float(not filled and entity_id is None and offered),
    }
