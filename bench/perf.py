"""Performance benchmark: grammar compile, plain llama.cpp vs constrained tokens/s, TTFT with and
without prefix reuse, mask cost, records/s, recall latency at several store sizes, peak RSS.

Run: .venv/bin/python bench/perf.py [--models smollm2,gemma3-270m] [--store-sizes 10000,100000,1000000]
     [--channel-sizes 100000 --channel-engines duckdb,postgres]
Numbers come from this machine at run time; nothing here is asserted.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from appliance.api import Appliance
from appliance.config import PROJECT_ROOT, Settings
from appliance.domain.loading import load_schema
from appliance.domain.records import Filter, MemoryRecord, RecallQuery
from appliance.edges.cli.main import DEMO_MESSAGES
from appliance.model.decode import constrained_greedy, free_greedy
from appliance.model.engine import LlamaCppEngine, resolve_model_path
from appliance.model.grammar import GrammarCache
from appliance.model.prompt import record_prompt
from appliance.store import MemoryStore


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def bench_grammar(tmp: Path, engine: LlamaCppEngine | None) -> dict[str, float]:
    out: dict[str, float] = {}
    for name in ("customer_service", "travel_assistant"):
        schema = load_schema(PROJECT_ROOT / "schemas" / f"{name}.json")
        cache = GrammarCache(tmp / "g")
        cold = cache.compile(schema)
        warm = GrammarCache(tmp / "g").compile(schema)
        out[f"{name}.regex_cold_ms"] = cold.compile_seconds * 1000
        out[f"{name}.regex_warm_ms"] = warm.compile_seconds * 1000
        if engine is not None:
            vocab = engine.vocabulary()
            t = time.perf_counter()
            cache.index(cold, "record", vocab, engine.tokenizer_id)
            out[f"{name}.index_cold_ms"] = (time.perf_counter() - t) * 1000
            t = time.perf_counter()
            GrammarCache(tmp / "g").index(warm, "record", vocab, engine.tokenizer_id)
            out[f"{name}.index_warm_ms"] = (time.perf_counter() - t) * 1000
            size = (cold.directory / f"record.{engine.tokenizer_id}.index").stat().st_size
            out[f"{name}.index_mb"] = size / 1e6
    return out


def bench_generation(engine: LlamaCppEngine, tmp: Path, runs: int = 3) -> dict[str, float]:
    schema = load_schema(PROJECT_ROOT / "schemas" / "customer_service.json")
    cache = GrammarCache(tmp / "g")
    compiled = cache.compile(schema)
    index = cache.index(compiled, "record", engine.vocabulary(), engine.tokenizer_id)
    prompt, _ = record_prompt(schema, engine).tokens(engine, DEMO_MESSAGES[0])
    res: dict[str, list[float]] = {"free_tps": [], "constrained_tps": [], "mask_ms_per_token": [], "forced_share": []}
    for _ in range(runs):
        engine.start(prompt)
        free = free_greedy(engine, 64)
        res["free_tps"].append(len(free.tokens) / free.seconds)
        engine.start(prompt)
        con = constrained_greedy(engine, index, 200)
        res["constrained_tps"].append(len(con.tokens) / con.seconds)
        res["mask_ms_per_token"].append(con.mask_seconds * 1000 / max(1, len(con.tokens)))
        res["forced_share"].append(con.forced_tokens / max(1, len(con.tokens)))
    # llguidance backend on the same prompt and schema (fast-forwards forced tokens)
    from appliance.domain.drafts import draft_model
    from appliance.model.decode import llguidance_greedy

    t = time.perf_counter()
    engine.llguidance_matcher(compiled.record_schema)
    res["llg_grammar_build_ms"] = [(time.perf_counter() - t) * 1000]  # first call includes the tokenizer
    res.update({"llg_tps": [], "llg_mask_ms_per_token": [], "llg_forced_share": [], "llg_valid": []})
    for _ in range(runs):
        matcher = engine.llguidance_matcher(compiled.record_schema)
        engine.start(prompt)
        r = llguidance_greedy(engine, matcher, 200)
        res["llg_tps"].append(len(r.tokens) / r.seconds)
        res["llg_mask_ms_per_token"].append(r.mask_seconds * 1000 / max(1, len(r.tokens)))
        res["llg_forced_share"].append(r.forced_tokens / max(1, len(r.tokens)))
        try:
            draft_model(schema).model_validate_json(r.text)
            res["llg_valid"].append(1.0)
        except ValueError:
            res["llg_valid"].append(0.0)
    # time to first token: cold (no cached prefix) vs warm (schema prefix cached)
    ttft_cold, ttft_warm = [], []
    for msg in DEMO_MESSAGES[:3]:
        p, _ = record_prompt(schema, engine).tokens(engine, msg)
        engine.reset()
        t = time.perf_counter()
        engine.start(p)
        engine.logits()
        ttft_cold.append(time.perf_counter() - t)
        p2, _ = record_prompt(schema, engine).tokens(engine, msg + " 1")
        t = time.perf_counter()
        engine.start(p2)
        engine.logits()
        ttft_warm.append(time.perf_counter() - t)
    # plain llama-cpp-python, unconstrained, same prompt text (its own sampler loop)
    text = engine.detokenize(prompt).decode("utf-8", errors="replace")
    plain = []
    for _ in range(runs):
        t = time.perf_counter()
        r = engine.llm.create_completion(text, max_tokens=64, temperature=0.0)
        dt = time.perf_counter() - t
        plain.append(r["usage"]["completion_tokens"] / dt)  # type: ignore[index]
    engine.reset()  # create_completion moved llama.cpp's state; our mirror must not trust it
    res["plain_llama_tps_incl_prompt"] = plain
    out = {k: statistics.median(v) for k, v in res.items()}
    out["prompt_tokens"] = len(prompt)
    out["ttft_cold_ms"] = statistics.median(ttft_cold) * 1000
    out["ttft_warm_ms"] = statistics.median(ttft_warm) * 1000
    out["ratio_constrained_vs_free"] = out["constrained_tps"] / out["free_tps"]
    return out


def bench_records(engine: LlamaCppEngine, tmp: Path) -> dict[str, float]:
    settings = Settings.from_env({"APPLIANCE_HOME": str(tmp), "APPLIANCE_GRAMMARS": str(tmp / "g")})
    app = Appliance(db=tmp / f"rec-{uuid.uuid4().hex[:6]}.duckdb", model=engine, settings=settings)
    t = time.perf_counter()
    app.recall("What happened with order 12345?", "bench")  # a cold process: the query prompt evaluated
    cold_recall = time.perf_counter() - t
    app.warm_up()  # what the servers, the panel and the warm CLI do before their first request
    app.record("warm up the prompt cache", "bench")
    lat = []
    msgs = DEMO_MESSAGES * 2
    t0 = time.perf_counter()
    for m in msgs:
        t = time.perf_counter()
        app.record(m, "bench")
        lat.append(time.perf_counter() - t)
    total = time.perf_counter() - t0
    rlat = []
    for q in ["我的订单尾号4567怎么样了？", "What happened with order 12345?", "orders over 1000"] * 2:
        t = time.perf_counter()
        app.recall(q, "bench")
        rlat.append(time.perf_counter() - t)
    app.close()
    return {
        "records_per_s": len(msgs) / total,
        "record_p50_s": pct(lat, 50),
        "record_p95_s": pct(lat, 95),
        "nl_recall_p50_s": pct(rlat, 50),
        "nl_recall_p95_s": pct(rlat, 95),
        "nl_recall_cold_first_s": cold_recall,
    }


def _synthetic(schema_id: str, i: int, n: int) -> MemoryRecord:
    now = datetime(2026, 12, 2, tzinfo=UTC)
    return MemoryRecord(
        memory_id=f"m{i:08d}",
        session_id=f"s{i % 10}",
        timestamp=now - timedelta(seconds=i),
        schema_id=schema_id,
        status="ok",
        confidence=0.9,
        source_text=f"order {100000 + i} update",
        event_type="user_inquiry",
        entity_type="Order",
        entity_id=str(100000 + i % max(1, n // 2)),
        state=["pending", "paid", "shipped"][i % 3],
        attributes={"amount": float(i % 2000)},
    )


def bench_store(tmp: Path, n: int) -> dict[str, float]:
    """Synthetic records through the real store code: per-record inserts for the first
    1000, set-based bulk inserts for the rest, then structured recall latencies."""
    schema = load_schema(PROJECT_ROOT / "schemas" / "customer_service.json")
    schema_id = schema.schema_id  # a hash of the schema: once, not per record
    store = MemoryStore(tmp / f"store-{n}.duckdb")
    single = min(1000, n)
    t = time.perf_counter()
    for i in range(single):
        store.add_record(_synthetic(schema_id, i, n))
    single_rate = single / (time.perf_counter() - t)
    t = time.perf_counter()
    for start in range(single, n, 50_000):
        store.write_many([_synthetic(schema_id, i, n) for i in range(start, min(n, start + 50_000))])
    bulk_rate = (n - single) / (time.perf_counter() - t) if n > single else 0.0

    def timed_queries(make: object, count: int) -> list[float]:
        lat = []
        for i in range(count):
            q, session = make(i)  # type: ignore[operator]
            t0 = time.perf_counter()
            store.run_query(schema, q, session)
            lat.append(time.perf_counter() - t0)
        return lat

    by_id = timed_queries(
        lambda i: (
            RecallQuery(
                entity_type="Order",
                filters=[Filter(field="id", op="eq", value=str(100000 + (i * 7919) % max(1, n // 2)))],
            ),
            f"s{((i * 7919) % max(1, n // 2)) % 10}",
        ),
        100,
    )
    by_contains = timed_queries(
        lambda i: (
            RecallQuery(entity_type="Order", filters=[Filter(field="id", op="contains", value=str(1000 + i))]),
            f"s{i % 10}",
        ),
        30,
    )
    by_attr = timed_queries(
        lambda i: (
            RecallQuery(entity_type="Order", filters=[Filter(field="amount", op="gt", value=1990)], limit=10),
            f"s{i % 10}",
        ),
        30,
    )
    store.close()
    out: dict[str, float] = {"n": n, "single_insert_records_per_s": single_rate, "bulk_insert_records_per_s": bulk_rate}
    for name, lat in (("id_eq", by_id), ("id_contains", by_contains), ("attr_gt", by_attr)):
        out[f"{name}_p50_ms"] = pct(lat, 50) * 1000
        out[f"{name}_p95_ms"] = pct(lat, 95) * 1000
    return out


def bench_recall_channels(tmp: Path, n: int, sessions: int = 10, server: str | None = None) -> dict[str, Any]:
    """The recall channels at scale: BM25 (lexical), vectors (semantic: IVF above 20k on DuckDB,
    HNSW on PostgreSQL), the time index and entity matching, on ``n`` synthetic memories spread
    over ``sessions`` sessions (texts drawn from a Zipf vocabulary, vectors from 200 clusters so
    neighbours exist, a memory's cluster drawn independently of its session). The semantic
    channel's recall@10 is measured against exact search over the session's vectors. ``server``:
    a PostgreSQL URL to run on instead of a DuckDB file."""
    import numpy as np

    from appliance.lang.segment import index_terms

    rng = np.random.default_rng(0)
    vocab = [f"w{i}" + "abcdefghij"[i % 10] * (1 + i % 3) for i in range(8000)]
    zipf = 1 / np.arange(1, len(vocab) + 1)
    zipf /= zipf.sum()
    centers = rng.normal(size=(200, 512)).astype(np.float32)
    store = MemoryStore(server or tmp / f"channels-{n}.duckdb", encoder="use3")
    all_vecs = np.zeros((n, 512), dtype=np.float32)
    session_of = np.arange(n) % sessions
    cluster_of = rng.integers(0, 200, size=n)
    schema_id = load_schema(PROJECT_ROOT / "schemas" / "customer_service.json").schema_id
    t = time.perf_counter()
    for start in range(0, n, 50_000):
        size = min(50_000, n - start)
        words = rng.choice(len(vocab), size=(size, 10), p=zipf)
        recs, docs, vecs = [], [], []
        for j in range(size):
            i = start + j
            text = " ".join(vocab[w] for w in words[j])
            rec = _synthetic(schema_id, i, n).model_copy(update={"source_text": text, "session_id": f"s{i % sessions}"})
            recs.append(rec)
            docs.append((rec.memory_id, rec.session_id, index_terms(text)))
            c = centers[cluster_of[i]] + 0.6 * rng.normal(size=512).astype(np.float32)
            all_vecs[i] = c / np.linalg.norm(c)
            vecs.append((rec.memory_id, rec.session_id, all_vecs[i].tolist()))
        store.write_many(recs)
        store.add_terms(docs)
        store.add_vectors(vecs)
    build = time.perf_counter() - t
    t = time.perf_counter()
    store.maintain()
    train = time.perf_counter() - t
    lex, sem, days, ents = [], [], [], []
    recalls: list[float] = []
    ids = [f"m{i:08d}" for i in range(n)]  # _synthetic's ids
    for q in range(40):
        session = f"s{q % sessions}"
        terms = [vocab[w] for w in rng.choice(len(vocab), size=4, p=zipf)]
        t0 = time.perf_counter()
        store.lexical.search(session, terms, 30)
        lex.append(time.perf_counter() - t0)
        c = centers[q % 200] + 0.6 * rng.normal(size=512).astype(np.float32)
        c /= np.linalg.norm(c)
        t0 = time.perf_counter()
        found = store.vectors.search(session, c.tolist(), 30, 0.0)
        sem.append(time.perf_counter() - t0)
        mine = np.flatnonzero(session_of == q % sessions)
        exact = {ids[i] for i in mine[np.argsort(-(all_vecs[mine] @ c))[:10]]}
        recalls.append(len(exact & {m for m, _ in found[:10]}) / 10)
        t0 = time.perf_counter()
        store.days.within(session, date(2026, 11, 1), date(2026, 11, 30), 30)
        days.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        store.entities.matching(session, [str(100000 + q * 37)])
        ents.append(time.perf_counter() - t0)
    store.close()
    out: dict[str, Any] = {
        "n": n,
        "engine": store.backend,
        "build_s": build,
        "ivf_train_s": train,
        "semantic_recall_at_10": float(np.mean(recalls)),
    }
    for name, lat in (("lexical", lex), ("semantic", sem), ("time", days), ("entity_match", ents)):
        out[f"{name}_p50_ms"] = pct(lat, 50) * 1000
        out[f"{name}_p95_ms"] = pct(lat, 95) * 1000
    both = [a + b + c + d for a, b, c, d in zip(lex, sem, days, ents)]
    out["channels_p95_ms"] = pct(both, 95) * 1000
    return out


def _server_database(engine: str, name: str) -> str | None:
    """None for a DuckDB file, else an empty database ``name`` on the named server, or on the
    dev extra's embedded one (``postgres``)."""
    if engine == "duckdb":
        return None
    sys.path.insert(0, str(PROJECT_ROOT))
    from tests.postgres_server import database_url

    return database_url(name, base=None if engine == "postgres" else engine, empty=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--models", default="smollm2,gemma3-270m")
    ap.add_argument("--store-sizes", default="10000")
    ap.add_argument("--channel-sizes", default="", help="recall channels at these sizes (e.g. 10000,100000,1000000)")
    ap.add_argument(
        "--channel-engines",
        default="duckdb",
        help="duckdb, postgres (a server the bench starts) or a postgresql:// URL; comma-separated",
    )
    args = ap.parse_args()
    report: dict[str, object] = {"when": datetime.now(UTC).isoformat(timespec="seconds")}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for name in args.models.split(","):
            try:
                engine = LlamaCppEngine(resolve_model_path(name, PROJECT_ROOT / "models"))
            except Exception as exc:  # a model not installed here is reported, not fatal
                report[name] = {"error": str(exc)}
                continue
            sub = tmp / name
            report[name] = {
                "grammar": bench_grammar(sub, engine),
                "generation": bench_generation(engine, sub),
                "end_to_end": bench_records(engine, sub),
            }
            print(name, json.dumps(report[name], indent=1), flush=True, file=sys.stderr)
        report["channels"] = []
        for n in filter(None, args.channel_sizes.split(",")):
            for engine_name in args.channel_engines.split(","):
                server = _server_database(engine_name, f"channels_{n}")
                report["channels"].append(bench_recall_channels(tmp, int(n), server=server))  # type: ignore[attr-defined]
                print(json.dumps(report["channels"][-1]), file=sys.stderr, flush=True)  # type: ignore[index]
        report["store"] = []
        for n in filter(None, args.store_sizes.split(",")):
            report["store"].append(bench_store(tmp, int(n)))  # type: ignore[attr-defined]
            print(json.dumps(report["store"][-1]), file=sys.stderr, flush=True)  # type: ignore[index]
    report["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(report, indent=1, default=lambda x: round(x, 3) if isinstance(x, float) else str(x)))


if __name__ == "__main__":
    main()
