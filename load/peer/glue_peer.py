#!/usr/bin/env python3
"""Latency peers for warm tool search on the load driver's synthetic catalog.

  glue_peer.py --export-dir DIR --model-dir MODEL [--duration S] [--warmup S] [--top-k 8]
               [--candidates 50] [--cache-dir DIR] [--out FILE]

DIR holds `tools.jsonl` and `queries.jsonl` as written by `agentsearch-load --export DIR` (the
same catalog and query pool a load run with the same seed ingests and asks). Two peers are timed
on them, one after the other, in this process, one query at a time (a single client, no network):

  glue     the page of Python a team would write instead of a service: tantivy-py BM25 (one text
           field, English stemming) for `--candidates` hits, faiss-cpu IndexFlatIP over the
           normalised embeddings for as many, reciprocal rank fusion (k = 60), top `--top-k`.
  lancedb  LanceDB hybrid search on a table of the same texts and vectors: its native full-text
           index plus an exact vector scan, fused by RRFReranker(), top `--top-k`.

Warm, as the load driver's `--query-pool` runs against agentsearch: every query's vector is
computed before timing starts (with the numpy encoder of lancedb_peer.py, same weights), so a
timed call is retrieval and fusion only. The pool is cycled for `--warmup` seconds unmeasured,
then for `--duration` seconds measured; the report gives p50/p90/p99, queries/s and the
process's peak resident memory.
"""

import argparse
import json
import os
import re
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import lancedb_peer  # noqa: E402  (the encoder, the embedding cache, the LanceDB table)

RRF_K = 60


def read_export(dir_path):
    tools = lancedb_peer.read_jsonl(Path(dir_path) / "tools.jsonl")
    queries = [row["query"] for row in lancedb_peer.read_jsonl(Path(dir_path) / "queries.jsonl")]
    if not tools or not queries:
        raise SystemExit(f"{dir_path}: tools.jsonl and queries.jsonl must both have rows")
    return tools, queries


def tool_text(tool):
    """What both peers index and embed: the name in words, the integration, the description, and
    one line per parameter (`name: description`)."""
    parts = [tool["name"].replace("_", " ").lower(), tool["integration"], tool["description"]]
    for name, schema in (tool.get("parameters") or {}).get("properties", {}).items():
        description = schema.get("description") if isinstance(schema, dict) else None
        parts.append(f"{name}: {description}" if description else name)
    return "\n".join(p for p in parts if p)


def percentiles(latencies):
    values = sorted(latencies)
    return {f"p{p}": lancedb_peer.percentile(values, p / 100) for p in (50, 90, 99)}


def timed(name, search, queries, vectors, warmup, duration):
    """Cycles the pool: `warmup` seconds unmeasured, then `duration` seconds measured."""
    i = 0
    end = time.perf_counter() + warmup
    while time.perf_counter() < end:
        search(queries[i % len(queries)], vectors[i % len(queries)])
        i += 1
    latencies = []
    started = time.perf_counter()
    end = started + duration
    while time.perf_counter() < end:
        j = i % len(queries)
        t0 = time.perf_counter()
        search(queries[j], vectors[j])
        latencies.append((time.perf_counter() - t0) * 1e3)
        i += 1
    secs = time.perf_counter() - started
    report = {"peer": name, "searches": len(latencies), "qps": len(latencies) / secs}
    report.update(percentiles(latencies))
    lancedb_peer.log(
        f"{name}: {len(latencies)} searches, p50 {report['p50']:.3f} ms, "
        f"p99 {report['p99']:.3f} ms, {report['qps']:.0f} q/s"
    )
    return report


def glue(texts, vectors, top_k, candidates):
    import faiss
    import tantivy

    builder = tantivy.SchemaBuilder()
    builder.add_unsigned_field("row", stored=True, indexed=False)
    builder.add_text_field("text", stored=False, tokenizer_name="en_stem")
    schema = builder.build()
    index = tantivy.Index(schema)
    writer = index.writer(heap_size=64 << 20, num_threads=1)
    for row, text in enumerate(texts):
        writer.add_document(tantivy.Document(row=row, text=text))
    writer.commit()
    writer.wait_merging_threads()
    index.reload()
    searcher = index.searcher()

    flat = faiss.IndexFlatIP(vectors.shape[1])
    flat.add(vectors)
    not_a_word = re.compile(r"[^\w]+")

    def search(query, vector):
        words = not_a_word.sub(" ", query).strip()
        ranked = {}
        if words:
            hits = searcher.search(index.parse_query(words, ["text"]), candidates).hits
            for rank, (_, address) in enumerate(hits):
                row = searcher.doc(address)["row"][0]
                ranked[row] = ranked.get(row, 0.0) + 1.0 / (RRF_K + rank + 1)
        _, rows = flat.search(vector.reshape(1, -1), candidates)
        for rank, row in enumerate(rows[0]):
            if row >= 0:
                ranked[int(row)] = ranked.get(int(row), 0.0) + 1.0 / (RRF_K + rank + 1)
        return sorted(ranked, key=ranked.get, reverse=True)[:top_k]

    return search


def lancedb(db_dir, names, texts, vectors, top_k):
    from lancedb.query import MatchQuery
    from lancedb.rerankers import RRFReranker

    table = lancedb_peer.build_table(db_dir, names, texts, vectors)
    reranker = RRFReranker()

    def search(query, vector):
        result = (
            table.search(query_type="hybrid", vector_column_name="vector")
            .vector(vector)
            .text(MatchQuery(query, "text"))
            .distance_type("cosine")
            .rerank(reranker)
            .select(["id"])
            .limit(top_k)
            .to_arrow()
        )
        return result.column("id").to_pylist()

    return search


def versions():
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for package in ("tantivy", "faiss-cpu", "lancedb", "numpy"):
        try:
            out[package] = version(package)
        except PackageNotFoundError:  # pragma: no cover
            out[package] = None
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--export-dir", required=True)
    parser.add_argument("--model-dir", required=True)
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--top-k", type=int, default=8)
    parser.add_argument("--candidates", type=int, default=50)
    parser.add_argument("--peers", default="glue,lancedb")
    parser.add_argument("--cache-dir", default=os.environ.get("AGENTSEARCH_PEER_CACHE", ""))
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    peers = [p for p in args.peers.split(",") if p]
    unknown = set(peers) - {"glue", "lancedb"}
    if unknown:
        parser.error(f"--peers: unknown {sorted(unknown)}; expected glue, lancedb")

    tools, queries = read_export(args.export_dir)
    names = [t["name"] for t in tools]
    texts = [tool_text(t) for t in tools]
    encoder = lancedb_peer.Encoder(args.model_dir)
    lancedb_peer.log(f"{len(tools)} tools, {len(queries)} queries; embedding the catalog")
    vectors, embed_secs = lancedb_peer.corpus_embeddings(
        encoder, "tools-export", names, texts, args.cache_dir or None, 32
    )
    vectors = vectors.astype("float32")
    query_vectors = encoder.embed(queries).astype("float32")

    report = {
        "tools": len(tools),
        "queries": len(queries),
        "topK": args.top_k,
        "candidates": args.candidates,
        "durationSecs": args.duration,
        "versions": versions(),
        "corpusEmbedSecs": embed_secs,
        "peers": [],
    }
    for peer in peers:
        if peer == "glue":
            search = glue(texts, vectors, args.top_k, args.candidates)
            report["peers"].append(
                timed("glue", search, queries, query_vectors, args.warmup, args.duration)
            )
        else:
            with tempfile.TemporaryDirectory(prefix="lancedb-peer-") as db_dir:
                search = lancedb(db_dir, names, texts, vectors, args.top_k)
                report["peers"].append(
                    timed("lancedb", search, queries, query_vectors, args.warmup, args.duration)
                )
    report["peakRssMb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
