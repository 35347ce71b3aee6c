"""The plain retrieval a user would pick instead of the appliance, tuned as well as it can be.

Over the raw turns of a conversation (no model, no schema):

* ``BM25`` — Okapi BM25 (k1 1.2, b 0.75) over the appliance's own index terms: the untuned
  alternative;
* ``TunedBM25`` — BM25+ (a floor ``delta`` per matched term), each turn indexed with its
  session's date in words ("March 2026", "2026年3月"), and neighbour smoothing: a turn's score
  gains ``neighbour`` × the better of its two adjacent turns' scores in the same session (the
  answer to a question often sits in the reply). k1, b, delta and the smoothing weight are
  fitted on a fit split (``fit_tuned``);
* ``Dense`` — cosine over sentence vectors;
* ``Fusion`` — weighted fusion of z-normalised scores of a lexical and a dense ranker (weight
  fitted: reciprocal-rank fusion loses to tuned BM25 when the dense channel is much weaker).

``bench/recall.py`` runs them beside the appliance on the same questions.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from appliance.lang.segment import index_terms

__all__ = [
    "BM25",
    "TunedBM25",
    "TunedParams",
    "Dense",
    "Fusion",
    "Turn",
    "fit_tuned",
    "fit_fusion",
    "date_words",
    "hit_at",
]

_MONTHS = "January February March April May June July August September October November December".split()


@dataclass(frozen=True)
class Turn:
    tid: str
    text: str
    session: int  # the session it was said in (neighbours never cross sessions)
    at: datetime


def date_words(at: datetime, chinese: bool) -> str:
    """The session date as people write it, so "what did she do in March?" meets its turns."""
    if chinese:
        return f"{at.year}年{at.month}月{at.day}日"
    return f"{at.day} {_MONTHS[at.month - 1]} {at.year}"


class BM25:
    """Okapi BM25 over the appliance's index terms (k1 1.2, b 0.75, the "+1" idf)."""

    def __init__(self, turns: Sequence[Turn], k1: float = 1.2, b: float = 0.75, delta: float = 0.0) -> None:
        self.ids = [t.tid for t in turns]
        self.tf = [Counter(index_terms(self._text(t))) for t in turns]
        self.len = np.array([sum(c.values()) for c in self.tf], dtype=float)
        self.avg = float(self.len.mean()) if len(self.len) else 1.0
        self.df = Counter(term for c in self.tf for term in c)
        self.n, self.k1, self.b, self.delta = len(self.ids), k1, b, delta

    def _text(self, t: Turn) -> str:
        return t.text

    def scores(self, query: str) -> np.ndarray:
        out = np.zeros(self.n)
        for term in set(index_terms(query)):
            df = self.df.get(term)
            if not df:
                continue
            idf = math.log(1 + (self.n - df + 0.5) / (df + 0.5))
            for i, c in enumerate(self.tf):
                tf = c.get(term)
                if tf:
                    norm = self.k1 * (1 - self.b + self.b * self.len[i] / self.avg)
                    out[i] += idf * (tf * (self.k1 + 1) / (tf + norm) + self.delta)
        return out

    def rank(self, query: str) -> list[str]:
        s = self.scores(query)
        return [self.ids[i] for i in np.argsort(-s, kind="stable") if s[i] > 0]


@dataclass(frozen=True)
class TunedParams:
    k1: float = 1.5
    b: float = 0.1
    delta: float = 0.5
    neighbour: float = 0.7


class TunedBM25(BM25):
    """BM25+ with the session date indexed and neighbour smoothing (see the module's doc)."""

    def __init__(self, turns: Sequence[Turn], params: TunedParams, chinese: bool) -> None:
        self.chinese = chinese
        super().__init__(turns, params.k1, params.b, params.delta)
        self.neighbour = params.neighbour
        sessions = [t.session for t in turns]
        n = len(turns)
        self.prev = np.array([i - 1 if i > 0 and sessions[i - 1] == sessions[i] else -1 for i in range(n)])
        self.next = np.array([i + 1 if i + 1 < n and sessions[i + 1] == sessions[i] else -1 for i in range(n)])

    def _text(self, t: Turn) -> str:
        return f"{t.text} {date_words(t.at, self.chinese)}"

    def scores(self, query: str) -> np.ndarray:
        s = super().scores(query)
        if not self.neighbour or not self.n:
            return s
        padded = np.append(s, 0.0)  # index -1 reads the 0 after the last turn
        return s + self.neighbour * np.maximum(padded[self.prev], padded[self.next])


class Dense:
    def __init__(self, turns: Sequence[Turn], embedder: Any) -> None:
        self.ids = [t.tid for t in turns]
        self.embedder = embedder
        self.m = embedder.encode([t.text for t in turns]) if turns else np.zeros((0, 1))

    def scores(self, query: str) -> np.ndarray:
        encode = getattr(self.embedder, "encode_query", self.embedder.encode)  # e5 marks queries
        return np.asarray(self.m @ encode([query])[0], dtype=float)

    def rank(self, query: str) -> list[str]:
        return [self.ids[i] for i in np.argsort(-self.scores(query), kind="stable")]


def _z(s: np.ndarray) -> np.ndarray:
    sd = float(s.std())
    return (s - s.mean()) / sd if sd > 0 else s * 0.0


class Fusion:
    """``weight`` × z(lexical) + (1 − ``weight``) × z(dense)."""

    def __init__(self, lexical: BM25, dense: Dense, weight: float) -> None:
        self.ids, self.lexical, self.dense, self.weight = lexical.ids, lexical, dense, weight

    def scores(self, query: str) -> np.ndarray:
        return self.weight * _z(self.lexical.scores(query)) + (1 - self.weight) * _z(self.dense.scores(query))

    def rank(self, query: str) -> list[str]:
        return [self.ids[i] for i in np.argsort(-self.scores(query), kind="stable")]


# A conversation to fit on: its turns, whether it is Chinese, and (question, gold turn ids) pairs.
Conversation = tuple[Sequence[Turn], bool, Sequence[tuple[str, set[str]]]]


def hit_at(ranker: Any, questions: Sequence[tuple[str, set[str]]], k: int = 5) -> float:
    return sum(bool(set(ranker.rank(q)[:k]) & gold) for q, gold in questions)


def _best(grid: Sequence[Any], score: Callable[[Any], float]) -> Any:
    """The grid point with the best score; ties go to the earliest (the grids list the plainest
    setting first)."""
    best, best_score = grid[0], -1.0
    for point in grid:
        s = score(point)
        if s > best_score + 1e-9:
            best, best_score = point, s
    return best


def fit_tuned(conversations: Sequence[Conversation]) -> TunedParams:
    """k1, b, delta and the smoothing weight with the most hits@5 over the fit conversations."""
    grid = [
        TunedParams(k1, b, delta, nb)
        for k1, b, delta, nb in itertools.product(
            (0.9, 1.2, 1.5, 2.0), (0.1, 0.3, 0.5, 0.75), (0.0, 0.5, 1.0), (0.0, 0.3, 0.5, 0.7, 1.0)
        )
    ]
    return _best(grid, lambda p: sum(hit_at(TunedBM25(turns, p, zh), qs) for turns, zh, qs in conversations))


def fit_fusion(conversations: Sequence[Conversation], params: TunedParams, embedder: Any) -> float:
    """The lexical weight of ``Fusion`` over tuned BM25 and the encoder with the most hits@5."""
    built = [(TunedBM25(turns, params, zh), Dense(turns, embedder), qs) for turns, zh, qs in conversations]
    grid = [round(w, 2) for w in np.arange(1.0, -0.01, -0.1)]
    return float(_best(grid, lambda w: sum(hit_at(Fusion(lx, dn, w), qs) for lx, dn, qs in built)))
