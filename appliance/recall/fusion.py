"""One ranking from several recall channels: weighted reciprocal-rank fusion.

Each channel (structured query, matched entities, asked attribute, time range, lexical BM25,
semantic vectors, the shape of the asked attribute's values, the replies to questions among the
best hits, the turns right after the best hits) returns memories in its own order.
A memory's fused score is the sum over the channels that found it of ``weight / (K + rank)``;
every memory appears once, with every path that found it.
RRF needs no score calibration between channels (BM25 scores and cosines do not compare). The
weights are fitted (``weights.json``, ``bench/fit_recall.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .weights import RecallWeights

__all__ = ["Fused", "fuse", "within_reach", "text_scores", "CHANNEL_WEIGHTS", "K", "SHIPPED"]

K = RecallWeights.rank_constant  # the rank constant before any fit
SHIPPED = RecallWeights.load()
CHANNEL_WEIGHTS: dict[str, float] = SHIPPED.unfitted_channels  # equal weights: fuse()'s default


def within_reach(scored: Sequence[tuple[str, float]], share: float) -> list[str]:
    """The ids of ``scored`` (best first) whose score is at least ``share`` of the best's."""
    floor = share * scored[0][1] if scored else 0.0
    return [m for m, score in scored if score >= floor]


def text_scores(lexical: Sequence[tuple[str, float]], semantic: Sequence[tuple[str, float]], w: float) -> list[str]:
    """One ranking from the BM25 and cosine scores of the two text channels: each list's scores
    z-normalised over the list (a memory missing from one list takes that list's lowest), then
    ``w`` × lexical + (1 − ``w``) × semantic. Scores, not ranks: a turn far ahead in meaning stays
    ahead. Over the raw turns of the paraphrased set's held-out half (bench/convsets/paraphrase,
    e5 and tuned BM25, ``w`` chosen on the fit half), hit@5: e5 alone 0.64, rank fusion 0.64,
    z-scores over all turns 0.65, z-scores over the two top-30 lists 0.68.
    """
    z_lex, z_sem = _z(lexical), _z(semantic)
    floor_lex, floor_sem = min(z_lex.values(), default=0.0), min(z_sem.values(), default=0.0)
    ids = dict.fromkeys([m for m, _ in lexical] + [m for m, _ in semantic])
    score = {m: w * z_lex.get(m, floor_lex) + (1 - w) * z_sem.get(m, floor_sem) for m in ids}
    # ties: the order the lists gave (lexical first), never the memory id
    return sorted(ids, key=lambda m: -score[m])


def _z(scored: Sequence[tuple[str, float]]) -> dict[str, float]:
    if not scored:
        return {}
    values = [v for _, v in scored]
    mean = sum(values) / len(values)
    sd = (sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5
    return {m: (v - mean) / sd if sd > 0 else 0.0 for m, v in scored}


@dataclass
class Fused:
    memory_id: str
    score: float
    paths: list[str] = field(default_factory=list)
    ranks: dict[str, int] = field(default_factory=dict)


def fuse(
    channels: Mapping[str, Sequence[str]], weights: Mapping[str, float] = CHANNEL_WEIGHTS, k: float = K
) -> list[Fused]:
    """Fused ranking of the memory ids each channel returned (best first)."""
    out: dict[str, Fused] = {}
    for channel, ids in channels.items():
        w = weights.get(channel, 1.0)
        for rank, mid in enumerate(dict.fromkeys(ids), 1):
            f = out.setdefault(mid, Fused(mid, 0.0))
            f.score += w / (k + rank)
            f.paths.append(channel)
            f.ranks[channel] = rank
    # equal sums are common (rank 1 in one channel, rank 1 in another): the better single rank,
    # then the channel listed first, decides — never the memory id, a random uuid that made two
    # recordings of one conversation rank differently
    order = {c: i for i, c in enumerate(channels)}

    def best(f: Fused) -> tuple[int, int]:
        return min((r, order[c]) for c, r in f.ranks.items())

    return sorted(out.values(), key=lambda f: (-f.score, *best(f), f.memory_id))
