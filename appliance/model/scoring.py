"""Calibrated option scoring, written once: softmax, contextual calibration, confidence.

Every enum the appliance fills (event type, entity type, schema routing, a question's field) is
a choice among complete options scored by the model's log-probability, optionally *calibrated*
— the same options scored on a content-free input are subtracted, because a small model
prefers some options whatever the input (measured: SmolLM2 otherwise picks one event type for
almost everything) — plus evidence from the schema. The probability of a choice is the softmax
of the final scores; a record's confidence is the geometric mean of its choices' probabilities.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["softmax", "best_of", "Pick", "geometric_confidence", "PriorCache", "decisive_prefixes", "common_prefix"]


def softmax(scores: Sequence[float] | np.ndarray) -> np.ndarray:
    arr = np.asarray(scores, dtype=float)
    p = np.exp(arr - arr.max())
    return p / p.sum()


@dataclass(frozen=True)
class Pick:
    index: int
    probability: float
    scores: tuple[float, ...]


def best_of(scores: Sequence[float] | np.ndarray) -> Pick:
    """The best option and its softmax probability."""
    arr = np.asarray(scores, dtype=float)
    best = int(np.argmax(arr))
    return Pick(best, float(softmax(arr)[best]), tuple(float(x) for x in arr))


def geometric_confidence(probabilities: Sequence[float]) -> float:
    """Geometric mean of the positive probabilities (1.0 when there are none)."""
    probs = [p for p in probabilities if p > 0]
    return math.exp(sum(math.log(p) for p in probs) / len(probs)) if probs else 1.0


def decisive_prefixes(options: Sequence[Sequence[int]]) -> list[list[int]]:
    """Each option's tokens up to the one that tells it from every other option.

    Choosing among options, the model's evidence is in those tokens: once an option is told
    apart, the rest of it (a shared ``_noted"``, the tail of a name the prompt lists) follows
    at a log-probability near 0 whichever option it is. Scoring only the decisive part keeps
    the choice and costs a fraction: byte-level tokenizers spell a Chinese event name in ~9
    tokens, and each option is one model call (CrossWOZ, 5 options: 45 tokens → ~15)."""
    out = []
    for i, opt in enumerate(options):
        shared = max((common_prefix(opt, other) for j, other in enumerate(options) if j != i), default=0)
        out.append(list(opt[: shared + 1]))
    return out


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens two sequences share."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


class PriorCache:
    """Content-free scores of a set of options, computed once per key (the prompt family and
    options): subtracting them is the contextual calibration described above."""

    def __init__(self) -> None:
        self._cache: dict[object, np.ndarray] = {}

    def get(self, key: object, compute: Callable[[], Sequence[float]]) -> np.ndarray:
        if key not in self._cache:
            self._cache[key] = np.asarray(compute(), dtype=float)
        return self._cache[key]
