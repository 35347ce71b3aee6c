"""Decoding strategies over the ``Engine`` primitives.

* ``constrained_greedy`` walks an outlines_core ``Guide``: each step masks the logits with
  the grammar's allowed tokens. When the grammar allows exactly one token (JSON keys,
  punctuation) that token is *forced*: it is queued without a model call and evaluated
  with the next batch, so fixed structure costs one batched decode instead of one
  forward pass per token.
* ``choose`` scores complete options (e.g. every event type) by total log-probability and
  returns a softmax over them: an enum is chosen by likelihood of the whole value, not by
  the first greedy token.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .engine import Engine
from .scoring import softmax

__all__ = ["DecodeResult", "Choice", "constrained_greedy", "free_greedy", "choose"]


@dataclass
class DecodeResult:
    tokens: list[int]
    text: str
    finished: bool  # the grammar reached a final state (False: cut at max_tokens)
    chosen_logprobs: list[float] = field(default_factory=list)
    forced_tokens: int = 0
    sampled_tokens: int = 0
    mask_seconds: float = 0.0
    seconds: float = 0.0

    @property
    def confidence(self) -> float:
        """Geometric-mean probability of the model's own (non-forced) choices."""
        if not self.chosen_logprobs:
            return 1.0
        return math.exp(sum(self.chosen_logprobs) / len(self.chosen_logprobs))


def _unpack(mask: np.ndarray, n_vocab: int) -> np.ndarray:
    """A 32-bit-word token bitmask (outlines_core and llguidance layout) as booleans."""
    return np.unpackbits(mask.view(np.uint8), bitorder="little")[:n_vocab].astype(bool)


def _allowed(guide: Any, mask: np.ndarray, n_vocab: int) -> np.ndarray:
    guide.write_mask_into(mask.ctypes.data, mask.size, mask.itemsize)
    return _unpack(mask, n_vocab)


def _greedy_pick(logits: np.ndarray, allowed: np.ndarray) -> tuple[int, float]:
    """The best allowed token and its log-probability renormalised over the allowed set."""
    masked = np.where(allowed, logits, -np.inf)
    tok = int(np.argmax(masked))
    lp = masked - masked[tok]
    return tok, -float(np.log(np.sum(np.exp(lp[allowed]))))


def constrained_greedy(engine: Engine, index: Any, max_tokens: int) -> DecodeResult:
    """Greedy decoding under the grammar ``index``; the engine must be ``start``-ed."""
    from outlines_core import Guide

    t0 = time.perf_counter()
    guide = Guide(index)
    mask = np.zeros((engine.n_vocab + 31) // 32, dtype=np.int32)
    out: list[int] = []
    res = DecodeResult(tokens=out, text="", finished=False)
    while len(out) < max_tokens:
        if guide.is_finished():
            res.finished = True
            break
        tm = time.perf_counter()
        allowed = _allowed(guide, mask, engine.n_vocab)
        ids = np.flatnonzero(allowed)
        res.mask_seconds += time.perf_counter() - tm
        if ids.size == 0:
            break
        if ids.size == 1:
            tok = int(ids[0])
            res.forced_tokens += 1
        else:
            logits = engine.logits()
            tm = time.perf_counter()
            tok, logprob = _greedy_pick(logits, allowed)
            res.chosen_logprobs.append(logprob)
            res.mask_seconds += time.perf_counter() - tm
            res.sampled_tokens += 1
        if tok == engine.eos_id:
            res.finished = True
            break
        guide.advance(token_id=tok, return_tokens=False)
        out.append(tok)
        engine.extend([tok])
    else:
        res.finished = guide.is_finished()
    res.text = engine.detokenize(out).decode("utf-8", errors="replace")
    res.seconds = time.perf_counter() - t0
    return res


def free_greedy(engine: Engine, max_tokens: int, stop: Sequence[int] = ()) -> DecodeResult:
    """Unconstrained greedy decoding (benchmark baseline and free-text summaries)."""
    t0 = time.perf_counter()
    out: list[int] = []
    res = DecodeResult(tokens=out, text="", finished=False)
    while len(out) < max_tokens:
        tok = int(np.argmax(engine.logits()))
        res.sampled_tokens += 1
        if tok == engine.eos_id or tok in stop:
            res.finished = True
            break
        out.append(tok)
        engine.extend([tok])
    res.text = engine.detokenize(out).decode("utf-8", errors="replace")
    res.seconds = time.perf_counter() - t0
    return res


@dataclass
class Choice:
    index: int
    probabilities: list[float]
    logprobs: list[float]

    @property
    def probability(self) -> float:
        return self.probabilities[self.index]


def choose(engine: Engine, options: Sequence[str], commit: bool = True, per_token: bool = False) -> Choice:
    """Pick among complete ``options`` by log-probability; optionally append the winner.

    ``per_token`` compares mean log-probability per token, so a multi-token value (an id)
    is not beaten by a one-token ``null`` merely for being longer.
    """
    if not options:
        raise ValueError("choose() needs at least one option")
    token_lists = [engine.tokenize(o) for o in options]
    if len(options) == 1:
        if commit:
            engine.extend(token_lists[0])
        return Choice(0, [1.0], [0.0])
    logprobs = engine.score(token_lists)
    if per_token:
        logprobs = [lp / len(t) for lp, t in zip(logprobs, token_lists)]
    probs = softmax(logprobs)
    best = int(np.argmax(probs))
    if commit:
        engine.extend(token_lists[best])
    return Choice(best, [float(p) for p in probs], logprobs)


def llguidance_greedy(engine: Engine, matcher: Any, max_tokens: int) -> DecodeResult:
    """Greedy decoding under an llguidance ``LLMatcher`` (the alternative backend).

    llguidance can *fast-forward*: when the grammar forces a run of tokens (JSON keys,
    ``","entity":{"type":``) ``compute_ff_tokens`` returns them at once, so they cost no
    mask computation and are evaluated by the model in one batch.
    """
    t0 = time.perf_counter()
    words = (engine.n_vocab + 31) // 32
    mask = np.zeros((1, words), dtype=np.int32)
    out: list[int] = []
    res = DecodeResult(tokens=out, text="", finished=False)
    while len(out) < max_tokens:
        if matcher.is_stopped() or matcher.is_error():
            res.finished = matcher.is_stopped() and not matcher.is_error()
            break
        tm = time.perf_counter()
        ff = matcher.compute_ff_tokens()
        if ff:
            ff = ff[: max_tokens - len(out)]
            matcher.consume_tokens(ff)
            out.extend(ff)
            engine.extend(ff)
            res.forced_tokens += len(ff)
            res.mask_seconds += time.perf_counter() - tm
            continue
        matcher.unsafe_compute_mask_ptr(mask.ctypes.data, mask.size * mask.itemsize)
        allowed = _unpack(mask, engine.n_vocab)
        res.mask_seconds += time.perf_counter() - tm
        tok, logprob = _greedy_pick(engine.logits(), allowed)
        res.chosen_logprobs.append(logprob)
        res.sampled_tokens += 1
        matcher.consume_token(tok)
        if tok == engine.eos_id:
            res.finished = not matcher.is_error()
            break
        out.append(tok)
        engine.extend([tok])
    res.text = engine.detokenize(out).decode("utf-8", errors="replace")
    res.seconds = time.perf_counter() - t0
    return res
