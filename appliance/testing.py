"""``FakeEngine``: a deterministic byte-level engine for unit tests of non-model logic.

It is *not* evidence that extraction works — the real-model tests are. Its vocabulary is
the 256 single bytes plus EOS; logits are flat except for configurable byte biases, and
``score`` adds a bonus to options containing any of ``preferences``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .model.engine import PLAIN, ChatFormat

__all__ = ["FakeEngine", "FakeEmbedder"]


class FakeEngine:
    model_id = "fake-bytes"
    tokenizer_id = "fake-bytes-v1"
    n_ctx = 100_000

    def __init__(
        self, preferences: dict[str, float] | None = None, byte_bias: dict[bytes, float] | None = None
    ) -> None:
        self.eos_id = 256
        self.n_vocab = 257
        self.preferences = preferences or {}
        self.byte_bias = {b'"': 2.0, b"}": 1.0, b"]": 1.0, b"n": 0.5} if byte_bias is None else byte_bias
        self.context: list[int] = []
        self.history: list[list[int]] = []  # every prompt passed to start(), for assertions
        self._vocabulary: Any = None

    def tokenize(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    tokenize_plain = tokenize

    def bos(self) -> list[int]:
        return []

    def token_bytes(self) -> list[bytes]:
        return [bytes([i]) for i in range(256)] + [b""]

    def detokenize(self, tokens: Sequence[int]) -> bytes:
        return bytes(t for t in tokens if t < 256)

    def vocabulary(self) -> Any:
        if self._vocabulary is None:
            from outlines_core import Vocabulary

            self._vocabulary = Vocabulary(self.eos_id, {bytes([i]): [i] for i in range(256)})
        return self._vocabulary

    def chat_format(self) -> ChatFormat:
        return PLAIN

    def start(self, prompt: Sequence[int]) -> None:
        self.context = list(prompt)
        self.history.append(list(prompt))

    def extend(self, tokens: Sequence[int]) -> None:
        self.context.extend(tokens)

    def logits(self) -> np.ndarray:
        out = np.zeros(self.n_vocab, dtype=np.float32)
        for b, bias in self.byte_bias.items():
            out[b[0]] += bias
        out[self.eos_id] = 3.0
        return out

    def score(self, options: Sequence[Sequence[int]]) -> list[float]:
        scores = []
        for opt in options:
            text = self.detokenize(opt).decode("utf-8", errors="ignore")
            bonus = sum(v for k, v in self.preferences.items() if k in text)
            scores.append(-0.1 * len(opt) + bonus)
        return scores


class FakeEmbedder:
    """Bag-of-words hashing embedder: texts sharing words get similar vectors."""

    name = "hashing"
    dim = 384

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        import re
        import zlib

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"[a-z]{3,}|[\u4e00-\u9fff]", text.lower()):
                out[row, zlib.crc32(word.encode()) % self.dim] += 1.0
            norm = float(np.linalg.norm(out[row]))
            if norm:
                out[row] /= norm
        return out

    def encode_query(self, texts: Sequence[str]) -> np.ndarray:
        return self.encode(texts)
