#!/usr/bin/env python3
"""Peer evaluation: the same BEIR-format tool-retrieval dataset, the same queries, the same
all-MiniLM-L6-v2 weights and the same metrics as `agentsearch eval`, served by LanceDB.

Two uses:

  lancedb_peer.py --dataset DIR [--split test] [--max-queries N] --model-dir MODEL [--out FILE]
      Loads the corpus into a LanceDB table in a temporary directory (id, text, 384-d vector),
      builds LanceDB's native full-text index on `text`, then runs every selected query once per
      mode, one at a time, and prints nDCG@10, Recall@1/5/10, MRR@10, queries/s and latency
      percentiles (and writes them as JSON with --out):
        lexical  LanceDB full-text search, top 10
        dense    exact (flat) cosine vector search, top 10
        hybrid   query_type="hybrid": full-text + vector, fused by RRFReranker() (k = 60), top 10

  lancedb_peer.py --compare A.json B.json ...
      Prints one table with the rows of several result files (this script's and
      `agentsearch eval --out`'s). Needs only the standard library.

Embeddings are computed here with a numpy forward pass of the model (no PyTorch); see Encoder.
"""

import argparse
import hashlib
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

MODES = ("lexical", "dense", "hybrid")
MAX_QUERY_CHARS = 1024  # the service's API limit: longer queries are cut
MAX_TOKENS = 256  # word pieces per text, [CLS] and [SEP] included (sentence-transformers' limit)
TOP_K = 10


# ----------------------------------------------------------------------------- dataset


def read_jsonl(path):
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                rows.append(json.loads(line))
    return rows


def read_qrels(path):
    """query id -> {doc id: grade}, only grades > 0."""
    qrels = {}
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f):
            line = line.rstrip("\n").rstrip("\r")
            if not line.strip() or (i == 0 and line.startswith("query-id")):
                continue
            fields = line.split("\t")
            if len(fields) != 3:
                raise ValueError(f"{path}:{i + 1}: expected 3 tab-separated fields, got {len(fields)}")
            query, doc, score = fields
            grade = int(score.strip())
            if grade > 0:
                qrels.setdefault(query, {})[doc] = grade
    return qrels


def document_string(doc):
    """The text indexed for a document (both the full-text column and the embedded text):
    metadata.group (when present), title, text, then one `name: description` line per top-level
    parameter (just `name` when it has no description); empty parts are left out."""
    meta = doc.get("metadata") or {}
    parts = []
    group = meta.get("group") if isinstance(meta, dict) else None
    if isinstance(group, str):
        parts.append(group)
    parts.append(doc.get("title") or "")
    parts.append(doc.get("text") or "")
    params = meta.get("parameters") if isinstance(meta, dict) else None
    props = params.get("properties") if isinstance(params, dict) else None
    if isinstance(props, dict):
        for name, spec in props.items():
            desc = spec.get("description") if isinstance(spec, dict) else None
            if isinstance(desc, str) and desc.strip():
                parts.append(f"{name}: {desc}")
            else:
                parts.append(str(name))
    return "\n".join(p for p in parts if p)


def select_queries(queries, qrels, max_queries):
    """Queries of the split in file order (those with a relevant document), then, when
    max_queries < all of them, the evenly spaced sample at positions floor(i * total / N)."""
    judged = [q for q in queries if qrels.get(q["_id"])]
    total = len(judged)
    if max_queries is not None and 0 < max_queries < total:
        judged = [judged[(i * total) // max_queries] for i in range(max_queries)]
    return judged, total


def query_text(q):
    text = (q.get("text") or "")[:MAX_QUERY_CHARS]
    return text if text.strip() else q["_id"]


# ----------------------------------------------------------------------------- metrics


def distinct(ranking):
    seen = set()
    out = []
    for d in ranking:
        if d not in seen:
            seen.add(d)
            out.append(d)
    return out


def score_query(ranking, judgments):
    """nDCG@10 (linear gains = grades), Recall@1/5/10, MRR@10 of one query, or None when it has
    no relevant document. A repeated document counts at its first position only."""
    relevant = {d: g for d, g in judgments.items() if g > 0}
    if not relevant:
        return None
    ranking = distinct(ranking)
    top = ranking[:TOP_K]
    dcg = sum(relevant.get(d, 0) / math.log2(rank + 1) for rank, d in enumerate(top, 1))
    ideal = sorted(relevant.values(), reverse=True)[:TOP_K]
    idcg = sum(g / math.log2(rank + 1) for rank, g in enumerate(ideal, 1))

    def recall(k):
        return sum(1 for d in ranking[:k] if d in relevant) / len(relevant)

    mrr = 0.0
    for rank, d in enumerate(top, 1):
        if d in relevant:
            mrr = 1.0 / rank
            break
    return {
        "ndcg@10": dcg / idcg,
        "recall@1": recall(1),
        "recall@5": recall(5),
        "recall@10": recall(10),
        "mrr@10": mrr,
    }


def mean_scores(rankings, judgments_list):
    keys = ("ndcg@10", "recall@1", "recall@5", "recall@10", "mrr@10")
    sums = dict.fromkeys(keys, 0.0)
    n = 0
    for ranking, judgments in zip(rankings, judgments_list):
        s = score_query(ranking, judgments)
        if s is None:
            continue
        n += 1
        for k in keys:
            sums[k] += s[k]
    return {k: (sums[k] / n if n else 0.0) for k in keys}


def percentile(sorted_values, p):
    """The value at index round((n - 1) * p) of the sorted values (Rust's f64::round: half away
    from zero)."""
    if not sorted_values:
        return 0.0
    x = (len(sorted_values) - 1) * p
    return sorted_values[int(math.floor(x + 0.5))]


# ----------------------------------------------------------------------------- encoder


class Encoder:
    """all-MiniLM-L6-v2 as a numpy forward pass: the model's own tokenizer.json (uncased
    WordPiece; its fixed padding to 128 is turned off, truncation set to 256 word pieces
    including [CLS]/[SEP]), BERT (6 layers, hidden 384, 12 heads, GELU in its erf form,
    LayerNorm eps 1e-12, padded keys masked out), mean pooling over the attention mask, L2
    normalisation. Batches are padded to their longest text."""

    def __init__(self, model_dir, max_tokens=MAX_TOKENS):
        import numpy as np
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        self.np = np
        model_dir = Path(model_dir)
        config = json.loads((model_dir / "config.json").read_text())
        self.hidden = config["hidden_size"]
        self.heads = config["num_attention_heads"]
        self.layers_n = config["num_hidden_layers"]
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        if config.get("hidden_act", "gelu") != "gelu":
            raise ValueError(f"unsupported activation {config.get('hidden_act')}")
        self.max_tokens = min(max_tokens, config["max_position_embeddings"])

        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length=self.max_tokens)

        w = load_file(str(model_dir / "model.safetensors"))
        prefix = "bert." if "bert.embeddings.word_embeddings.weight" in w else ""

        def get(name):
            return np.ascontiguousarray(w[prefix + name], dtype=np.float32)

        def linear(name):
            # stored as (out, in); kept transposed as (in, out) for x @ W
            return np.ascontiguousarray(get(name + ".weight").T), get(name + ".bias")

        self.word = get("embeddings.word_embeddings.weight")
        self.position = get("embeddings.position_embeddings.weight")
        self.token_type = get("embeddings.token_type_embeddings.weight")
        self.emb_ln = (get("embeddings.LayerNorm.weight"), get("embeddings.LayerNorm.bias"))
        self.layers = []
        for i in range(self.layers_n):
            p = f"encoder.layer.{i}."
            wq, bq = linear(p + "attention.self.query")
            wk, bk = linear(p + "attention.self.key")
            wv, bv = linear(p + "attention.self.value")
            self.layers.append(
                {
                    # one matmul for query, key and value
                    "qkv": (np.ascontiguousarray(np.concatenate([wq, wk, wv], axis=1)), np.concatenate([bq, bk, bv])),
                    "attn_out": linear(p + "attention.output.dense"),
                    "attn_ln": (get(p + "attention.output.LayerNorm.weight"), get(p + "attention.output.LayerNorm.bias")),
                    "inter": linear(p + "intermediate.dense"),
                    "out": linear(p + "output.dense"),
                    "out_ln": (get(p + "output.LayerNorm.weight"), get(p + "output.LayerNorm.bias")),
                }
            )
        h = hashlib.sha256()
        for name in ("model.safetensors", "tokenizer.json", "config.json"):
            h.update((model_dir / name).read_bytes())
        h.update(f"max_tokens={self.max_tokens}".encode())
        self.fingerprint = h.hexdigest()

    def _layer_norm(self, x, gamma, beta):
        np = self.np
        mean = x.mean(axis=-1, keepdims=True)
        centered = x - mean
        var = (centered * centered).mean(axis=-1, keepdims=True)
        return centered / np.sqrt(var + np.float32(self.eps)) * gamma + beta

    def _gelu(self, x):
        """x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)), in place on float32. erf by Abramowitz &
        Stegun 7.1.26: erf(z) = 1 - t (a1 + t (a2 + ...)) exp(-z^2), t = 1 / (1 + p z), z >= 0,
        odd in z; |error of erf| <= 1.5e-7, within 5e-7 of the exact GELU for |x| < 8."""
        np = self.np
        f = np.float32
        z = x * f(1.0 / math.sqrt(2.0))
        a = np.abs(z)
        t = a * f(0.3275911)
        t += f(1.0)
        np.reciprocal(t, out=t)
        p = t * f(1.061405429)
        p -= f(1.453152027)
        p *= t
        p += f(1.421413741)
        p *= t
        p -= f(0.284496736)
        p *= t
        p += f(0.254829592)
        p *= t
        np.square(a, out=a)
        np.negative(a, out=a)
        np.exp(a, out=a)
        p *= a  # erfc(|z|)
        np.subtract(f(1.0), p, out=p)  # erf(|z|)
        np.copysign(p, z, out=p)  # erf(z)
        p += f(1.0)
        p *= x
        p *= f(0.5)
        return p

    def _forward(self, ids, mask):
        np = self.np
        batch, length = ids.shape
        heads, head_dim = self.heads, self.hidden // self.heads
        x = self.word[ids] + self.position[:length][None, :, :] + self.token_type[0][None, None, :]
        x = self._layer_norm(x, *self.emb_ln)
        # additive mask: padded keys get -1e9 before the softmax
        key_bias = ((1.0 - mask.astype(np.float32)) * np.float32(-1e9))[:, None, None, :]
        scale = np.float32(1.0 / math.sqrt(head_dim))
        for layer in self.layers:
            x2 = x.reshape(batch * length, self.hidden)
            w, b = layer["qkv"]
            qkv = x2 @ w + b  # (B*L, 3H)
            qkv = qkv.reshape(batch, length, 3, heads, head_dim).transpose(2, 0, 3, 1, 4)  # (3, B, h, L, d)
            q = np.ascontiguousarray(qkv[0]).reshape(batch * heads, length, head_dim)
            q *= scale
            k_t = np.ascontiguousarray(qkv[1].transpose(0, 1, 3, 2)).reshape(batch * heads, head_dim, length)
            v = np.ascontiguousarray(qkv[2]).reshape(batch * heads, length, head_dim)
            # One 2-D product per (text, head): numpy's stacked matmul hands OpenBLAS hundreds of
            # tiny products, which with more than one BLAS thread is 10-100x slower.
            scores = np.empty((batch * heads, length, length), dtype=np.float32)
            for i in range(batch * heads):
                np.matmul(q[i], k_t[i], out=scores[i])
            scores4 = scores.reshape(batch, heads, length, length)
            scores4 += key_bias
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            context = np.empty((batch * heads, length, head_dim), dtype=np.float32)
            for i in range(batch * heads):
                np.matmul(scores[i], v[i], out=context[i])
            context = context.reshape(batch, heads, length, head_dim).transpose(0, 2, 1, 3).reshape(batch * length, self.hidden)
            w, b = layer["attn_out"]
            x2 = self._layer_norm(x2 + (context @ w + b), *layer["attn_ln"])
            w, b = layer["inter"]
            inner = self._gelu(x2 @ w + b)
            w, b = layer["out"]
            x2 = self._layer_norm(x2 + (inner @ w + b), *layer["out_ln"])
            x = x2.reshape(batch, length, self.hidden)
        m = mask.astype(np.float32)[:, :, None]
        pooled = (x * m).sum(axis=1) / np.maximum(m.sum(axis=1), np.float32(1e-9))
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, np.float32(1e-12))).astype(np.float32)

    def embed(self, texts):
        """L2-normalised embeddings (float32, one row per text) of one batch."""
        np = self.np
        encodings = self.tokenizer.encode_batch(list(texts))
        length = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(encodings), length), dtype=np.int64)
        mask = np.zeros((len(encodings), length), dtype=np.int64)
        for i, e in enumerate(encodings):
            ids[i, : len(e.ids)] = e.ids
            mask[i, : len(e.ids)] = e.attention_mask
        return self._forward(ids, mask)

    def embed_many(self, texts, batch_size=32, progress=None):
        """Embeds in batches of texts of similar length (less padding); rows in input order."""
        np = self.np
        lengths = [len(e.ids) for e in self.tokenizer.encode_batch(list(texts))]
        order = sorted(range(len(texts)), key=lambda i: lengths[i])
        out = np.zeros((len(texts), self.hidden), dtype=np.float32)
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            out[chunk] = self.embed([texts[i] for i in chunk])
            if progress:
                progress(min(start + batch_size, len(order)), len(order))
        return out


# ----------------------------------------------------------------------------- threads


class Threads:
    """Sets the BLAS thread count of numpy at run time (threadpoolctl), when available."""

    def __init__(self):
        try:
            from threadpoolctl import threadpool_limits

            self._limits = threadpool_limits
        except ImportError:  # pragma: no cover
            self._limits = None

    def limit(self, n):
        if self._limits is None or not n:
            return _NullContext()
        return self._limits(limits=n, user_api="blas")


class _NullContext:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


# ----------------------------------------------------------------------------- run


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def corpus_embeddings(encoder, name, doc_ids, texts, cache_dir, batch_size):
    import numpy as np

    key = hashlib.sha256()
    key.update(encoder.fingerprint.encode())
    for doc_id, text in zip(doc_ids, texts):
        key.update(doc_id.encode())
        key.update(b"\0")
        key.update(text.encode())
        key.update(b"\1")
    path = None
    if cache_dir:
        path = Path(cache_dir) / f"{name}-{key.hexdigest()[:24]}.npy"
        if path.exists():
            vectors = np.load(path)
            if vectors.shape == (len(texts), encoder.hidden):
                log(f"corpus embeddings from the cache: {path}")
                return vectors, 0.0
    started = time.perf_counter()
    last = [0.0]

    def progress(done, total):
        now = time.perf_counter()
        if now - last[0] > 10 or done == total:
            last[0] = now
            log(f"  embedded {done}/{total} documents ({now - started:.0f} s)")

    vectors = encoder.embed_many(texts, batch_size=batch_size, progress=progress)
    secs = time.perf_counter() - started
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp.npy")
        np.save(tmp, vectors)
        os.replace(tmp, path)
    return vectors, secs


def build_table(db_dir, doc_ids, texts, vectors):
    import lancedb
    import pyarrow as pa
    from lancedb.index import FTS

    dim = vectors.shape[1]
    schema = pa.schema(
        [
            pa.field("id", pa.string(), nullable=False),
            pa.field("text", pa.string(), nullable=False),
            pa.field("vector", pa.list_(pa.float32(), dim), nullable=False),
        ]
    )
    data = pa.table(
        {
            "id": pa.array(doc_ids, pa.string()),
            "text": pa.array(texts, pa.string()),
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1), pa.float32()), dim),
        },
        schema=schema,
    )
    db = lancedb.connect(db_dir)
    table = db.create_table("docs", data=data, schema=schema)
    # LanceDB's native (Lance) inverted index with its default tokenizer settings: "simple" base
    # tokenizer (splits on whitespace and punctuation), lower case, English stemming, English
    # stop words removed, ASCII folding, tokens over 40 characters dropped; BM25 scoring.
    table.create_index("text", config=FTS())
    # No vector index: searches scan every vector (exact, "flat") with the cosine distance.
    return table


def run_mode(mode, table, encoder, queries, hybrid_candidates):
    """Runs every query once (sequentially) and returns rankings, latencies (ms) and the
    query-embedding times (ms). One timed call = query embedding (dense, hybrid) + search."""
    from lancedb.query import MatchQuery
    from lancedb.rerankers import RRFReranker

    rankings, latencies, embed_ms = [], [], []
    started = time.perf_counter()
    for q in queries:
        text = query_text(q)
        t0 = time.perf_counter()
        # A plain match of the query's terms (OR, BM25). A bare string would go through LanceDB's
        # query parsing, which makes a query wrapped in double quotes a phrase query (an error
        # without positions in the index; 200 BFCL queries are quoted).
        match = MatchQuery(text, "text")
        if mode == "lexical":
            result = (
                table.search(match, query_type="fts")
                .select(["id", "_score"])
                .limit(TOP_K)
                .to_arrow()
            )
            t1 = t0
        else:
            vector = encoder.embed([text])[0]
            t1 = time.perf_counter()
            if mode == "dense":
                result = (
                    table.search(vector, query_type="vector", vector_column_name="vector")
                    .distance_type("cosine")
                    .select(["id", "_distance"])
                    .limit(TOP_K)
                    .to_arrow()
                )
            else:
                result = (
                    table.search(query_type="hybrid", vector_column_name="vector")
                    .vector(vector)
                    .text(match)
                    .distance_type("cosine")
                    .rerank(RRFReranker())
                    .select(["id"])
                    .limit(max(TOP_K, hybrid_candidates))
                    .to_arrow()
                )
        t2 = time.perf_counter()
        latencies.append((t2 - t0) * 1e3)
        if mode != "lexical":
            embed_ms.append((t1 - t0) * 1e3)
        rankings.append(result.column("id").to_pylist()[:TOP_K])
    secs = time.perf_counter() - started
    return rankings, latencies, embed_ms, secs


def lancedb_version():
    try:
        from importlib.metadata import version

        return version("lancedb")
    except Exception:  # pragma: no cover
        import lancedb

        return getattr(lancedb, "__version__", "?")


def run(args):
    threads = Threads()
    dataset = Path(args.dataset)
    name = dataset.resolve().name
    corpus = read_jsonl(dataset / "corpus.jsonl")
    queries_all = [{**q, "_id": str(q["_id"])} for q in read_jsonl(dataset / "queries.jsonl")]
    qrels = read_qrels(dataset / "qrels" / f"{args.split}.tsv")
    queries, total = select_queries(queries_all, qrels, args.max_queries)
    if not queries:
        raise SystemExit(f"the split `{args.split}` has no judged queries")
    log(
        f"{name}: {len(corpus)} documents, {len(queries)} queries ({args.split} split)"
        + (f" of {total}" if len(queries) < total else "")
    )

    doc_ids = [str(d["_id"]) for d in corpus]
    if len(set(doc_ids)) != len(doc_ids):
        raise SystemExit("corpus.jsonl has repeated _id values")
    texts = [document_string(d) for d in corpus]

    with threads.limit(args.corpus_threads):
        encoder = Encoder(args.model_dir)
        if any(m != "lexical" for m in args.modes):
            vectors, embed_secs = corpus_embeddings(encoder, name, doc_ids, texts, args.cache_dir, args.batch_size)
        else:  # full-text only: the vector column is not searched
            import numpy as np

            vectors, embed_secs = np.zeros((len(texts), encoder.hidden), dtype=np.float32), 0.0
    if embed_secs:
        log(f"corpus embedded in {embed_secs:.1f} s ({len(texts) / embed_secs:.1f} docs/s)")

    modes = {}
    with tempfile.TemporaryDirectory(prefix="lancedb-peer-") as db_dir:
        started = time.perf_counter()
        table = build_table(db_dir, doc_ids, texts, vectors)
        log(f"LanceDB table and full-text index built in {time.perf_counter() - started:.2f} s")
        judgments = [qrels[q["_id"]] for q in queries]
        with threads.limit(args.query_threads):
            for mode in args.modes:
                rankings, latencies, embed_ms, secs = run_mode(mode, table, encoder, queries, args.hybrid_candidates)
                lat = sorted(latencies)
                emb = sorted(embed_ms)
                scores = mean_scores(rankings, judgments)
                modes[mode] = {
                    **scores,
                    "qps": len(queries) / secs,
                    "p50_ms": percentile(lat, 0.50),
                    "p99_ms": percentile(lat, 0.99),
                    "embed_p50_ms": percentile(emb, 0.50) if emb else None,
                }
                log(f"  {mode}: {len(queries)} queries in {secs:.1f} s")

    report = {
        "system": f"lancedb {lancedb_version()}",
        "dataset": name,
        "split": args.split,
        "queries": len(queries),
        "modes": modes,
        "settings": {
            "documents": len(corpus),
            "fts": "native Lance inverted index, FTS() defaults (simple tokenizer, lower case, English stemming and stop words, ASCII folding)",
            "vector": "flat (no index), cosine",
            "hybrid": f"query_type=hybrid, RRFReranker(K=60), {max(TOP_K, args.hybrid_candidates)} candidates per leg",
            "encoder": "all-MiniLM-L6-v2, numpy forward pass",
            "query_blas_threads": args.query_threads,
        },
    }
    print(table_text([(report["system"], report)], title=f"{name} ({args.split} split, {len(queries)} queries)"), flush=True)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
        log(f"wrote {args.out}")


# ----------------------------------------------------------------------------- table


def fmt(value, spec):
    return format(value, spec) if isinstance(value, (int, float)) else "-"


def table_text(reports, title=None):
    """One row per (system, mode). reports = [(system label, report dict)]."""
    width = max([len("system")] + [len(label) for label, _ in reports])
    head = f"{'system':<{width}} {'mode':<8} {'nDCG@10':>8} {'R@1':>8} {'R@5':>8} {'R@10':>8} {'MRR@10':>8} {'q/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'emb p50':>8}"
    lines = []
    if title:
        lines.append(title)
    lines.append(head)
    for label, report in reports:
        for mode in MODES + tuple(m for m in report.get("modes", {}) if m not in MODES):
            m = report.get("modes", {}).get(mode)
            if m is None:
                continue
            lines.append(
                f"{label:<{width}} {mode:<8} {fmt(m.get('ndcg@10'), '8.4f')} {fmt(m.get('recall@1'), '8.4f')} "
                f"{fmt(m.get('recall@5'), '8.4f')} {fmt(m.get('recall@10'), '8.4f')} {fmt(m.get('mrr@10'), '8.4f')} "
                f"{fmt(m.get('qps'), '8.1f')} {fmt(m.get('p50_ms'), '8.2f')} {fmt(m.get('p99_ms'), '8.2f')} "
                f"{fmt(m.get('embed_p50_ms'), '8.2f')}"
            )
    return "\n".join(lines)


def compare(paths):
    reports = []
    for p in paths:
        report = json.loads(Path(p).read_text())
        label = report.get("system") or Path(p).stem
        reports.append((label, report))
    keys = {(r.get("dataset"), r.get("split"), r.get("queries")) for _, r in reports}
    if len(keys) == 1:
        dataset, split, queries = next(iter(keys))
        title = f"{dataset} ({split} split, {queries} queries)"
    else:
        title = "WARNING: the files are not for the same dataset/split/queries: " + ", ".join(
            f"{label}: {r.get('dataset')}/{r.get('split')}/{r.get('queries')}" for label, r in reports
        )
    print(table_text(reports, title=title))
    print("emb p50 = median time to embed the query inside the timed call ('-' = not reported)")


# ----------------------------------------------------------------------------- main


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--compare", nargs="+", metavar="JSON", help="print the rows of these result files side by side and exit")
    ap.add_argument("--dataset", help="folder in the BEIR layout (corpus.jsonl, queries.jsonl, qrels/<split>.tsv)")
    ap.add_argument("--split", default="test")
    ap.add_argument("--max-queries", type=int, default=None, help="score an evenly spaced sample of this many queries")
    ap.add_argument("--model-dir", default=os.environ.get("AGENTSEARCH_EMBED__MODEL_DIR", "models/all-MiniLM-L6-v2"))
    ap.add_argument("--out", help="write the figures as JSON to this file")
    ap.add_argument("--modes", default=",".join(MODES), help="comma separated: lexical, dense, hybrid")
    ap.add_argument("--cache-dir", help="keep corpus embeddings here between runs (npy, keyed by dataset and content hash)")
    ap.add_argument("--batch-size", type=int, default=32, help="documents per forward pass when embedding the corpus")
    ap.add_argument(
        "--corpus-threads",
        type=int,
        default=1,
        help="BLAS threads while embedding the corpus (more than 1 is much slower when the cores are busy)",
    )
    ap.add_argument("--query-threads", type=int, default=1, help="BLAS threads while running queries (single client)")
    ap.add_argument(
        "--hybrid-candidates",
        type=int,
        default=TOP_K,
        help="limit of the hybrid query = candidates each leg contributes (LanceDB passes its limit to both legs); "
        "results are cut to the top 10 (default 10: LanceDB's behaviour for a top-10 query)",
    )
    args = ap.parse_args(argv)
    if args.compare:
        compare(args.compare)
        return
    if not args.dataset:
        ap.error("--dataset is required (or --compare)")
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    for m in args.modes:
        if m not in MODES:
            ap.error(f"--modes: unknown mode `{m}` (lexical, dense, hybrid)")
    if args.max_queries is not None and args.max_queries <= 0:
        ap.error("--max-queries must be positive")
    run(args)


if __name__ == "__main__":
    # Lance logs a deprecation warning per hybrid leg otherwise; errors still show.
    os.environ.setdefault("LANCEDB_LOG", "error")
    main()
