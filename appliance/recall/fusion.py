"""One ranking from several recall channels: weighted reciprocal-rank fusion.

Each channel (structured query, matched entities, asked attribute, time range, lexical BM25,
semantic vectors, the shape of the asked attribute's values, the replies to questions among the
best hits, the turns right after the best hits) returns memories in its own order.
A memory's fused score is the sum over the channels that found it of ``weight / (K + rank)``;
every memory appears once, with every path that found it.
RRF needs no score calibration between channels (BM25 scores and cosines do not compare). All
weights are 1. The follow channel's was 0.5 until it also took the turn after the other
speaker's interjection; then, on the five conversations' kept databases, 0.5 / 0.75 / 1 found
156 / 156 / 160 of 172 (see ``recall.service.FOLLOW_SOURCES``); the reply channel's at 0.5 found
one question fewer on the two-friends conversation; the attribute channel's was swept on the conversational set (0.5: hit@5 0.95,
MRR 0.69; 1: 0.96, 0.70; 2: 0.83, 0.58), the shape channel's on both sets (conversations /
SGD hit@5, MRR — 0.5: 0.98, 0.71 / 0.93, 0.71; 1: 0.98, 0.71 / 0.93, 0.72; 2 before the
residual rule: 0.97, 0.69 / 0.93, 0.72), the others were not swept.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

__all__ = ["Fused", "fuse", "within_reach", "CHANNEL_WEIGHTS", "K", "LEXICAL_REACH"]

K = 60
CHANNEL_WEIGHTS: dict[str, float] = {
    "structured": 1.0,
    "entity": 1.0,
    "attribute": 1.0,  # memories holding a value of the asked attribute
    "time": 1.0,
    "lexical": 1.0,
    "semantic": 1.0,
    "shape": 1.0,  # candidates stating a value of the asked attribute's type (a date for a date)
    "reply": 1.0,  # the next turn, by another speaker, after a question among the best hits
    "follow": 1.0,  # the turns after one of the three best hits (labelled transcripts)
}


# A lexical hit scoring below this share of the channel's best takes no part in fusion: rank
# fusion ignores score gaps, so in a chat where a speaker's name is in half the turns, turns
# holding the name alone (BM25 0.7) ranked next to the one holding the asked word (4.9) and,
# found again by the semantic and entity channels, outranked it. Swept on the conversational
# sets (hit@5 0 / 0.15 / 0.3 / 0.45: 0.85 / 0.87 / 0.88 / 0.88) and checked on SGD dialogues.
LEXICAL_REACH = 0.3


def within_reach(scored: Sequence[tuple[str, float]], share: float) -> list[str]:
    """The ids of ``scored`` (best first) whose score is at least ``share`` of the best's."""
    floor = share * scored[0][1] if scored else 0.0
    return [m for m, score in scored if score >= floor]


@dataclass
class Fused:
    memory_id: str
    score: float
    paths: list[str] = field(default_factory=list)
    ranks: dict[str, int] = field(default_factory=dict)


def fuse(channels: Mapping[str, Sequence[str]], weights: Mapping[str, float] = CHANNEL_WEIGHTS) -> list[Fused]:
    """Fused ranking of the memory ids each channel returned (best first)."""
    out: dict[str, Fused] = {}
    for channel, ids in channels.items():
        w = weights.get(channel, 1.0)
        for rank, mid in enumerate(dict.fromkeys(ids), 1):
            f = out.setdefault(mid, Fused(mid, 0.0))
            f.score += w / (K + rank)
            f.paths.append(channel)
            f.ranks[channel] = rank
    # equal sums are common (rank 1 in one channel, rank 1 in another): the better single rank,
    # then the channel listed first, decides — never the memory id, a random uuid that made two
    # recordings of one conversation rank differently
    order = {c: i for i, c in enumerate(channels)}

    def best(f: Fused) -> tuple[int, int]:
        return min((r, order[c]) for c, r in f.ranks.items())

    return sorted(out.values(), key=lambda f: (-f.score, *best(f), f.memory_id))
