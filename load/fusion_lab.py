#!/usr/bin/env python3
"""Offline fusion experiments on candidate dumps written by `agentsearch eval --dump`.

`agentsearch eval --modes lexical,dense --dump D.jsonl` records, for every query, each retriever's
top 50 with raw scores (BM25, cosine). This script re-fuses those lists with several fusion
functions and prints nDCG@10 / R@10 for each, so fusion choices can be compared in seconds
instead of re-running the service. The metrics are the same as the service's (binary or graded
gains, ideal DCG over all judged-relevant documents).

    python3 load/fusion_lab.py --qrels DATASET/qrels/test.tsv D.jsonl [--grid]

Standard library only.
"""

import argparse
import collections
import json
import math


def load_qrels(path):
    qrels = collections.defaultdict(dict)
    with open(path, encoding="utf-8") as f:
        next(f)
        for line in f:
            q, d, g = line.rstrip("\n").split("\t")
            if int(g) > 0:
                qrels[q][d] = int(g)
    return qrels


def load_dump(path):
    """query id -> {"lexical": [(doc, score)], "dense": [(doc, score)]}"""
    runs = collections.defaultdict(dict)
    with open(path, encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            mode = row["mode"]
            if mode not in ("lexical", "dense"):
                continue
            hits = []
            for h in row["hits"]:
                e = h[mode]
                if e is not None and h["doc"] is not None:
                    hits.append((h["doc"], e[1]))
            runs[row["query"]][mode] = hits
    return runs


def ndcg10(ranking, rel):
    dcg = sum(rel.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranking[:10]))
    ideal = sorted(rel.values(), reverse=True)[:10]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg


def recall10(ranking, rel):
    return sum(1 for d in ranking[:10] if d in rel) / len(rel)


def evaluate(runs, qrels, fuse):
    n = s_ndcg = s_rec = 0.0
    for q, lists in runs.items():
        rel = qrels.get(q)
        if not rel:
            continue
        ranking = fuse(lists.get("lexical", []), lists.get("dense", []))
        s_ndcg += ndcg10(ranking, rel)
        s_rec += recall10(ranking, rel)
        n += 1
    return s_ndcg / n, s_rec / n


def order(scores, first_rank):
    return [d for d, _ in sorted(scores.items(), key=lambda kv: (-kv[1], first_rank.get(kv[0], 99), kv[0]))]


def rrf(k, wl=1.0, wd=1.0, depth=50):
    def fuse(lex, den):
        scores = collections.defaultdict(float)
        best = {}
        for w, hits in ((wl, lex), (wd, den)):
            for i, (d, _) in enumerate(hits[:depth]):
                scores[d] += w / (k + i + 1)
                best[d] = min(best.get(d, 99), i + 1)
        return order(scores, best)

    return fuse


def single(which):
    def fuse(lex, den):
        return [d for d, _ in (lex if which == "lexical" else den)]

    return fuse


def normalise(hits, how):
    if not hits:
        return {}
    scores = [s for _, s in hits]
    top = max(scores)
    if how == "minmax":
        low = min(scores)
    elif how == "max":
        low = 0.0
    elif how == "z":
        mean = sum(scores) / len(scores)
        sd = math.sqrt(sum((s - mean) ** 2 for s in scores) / len(scores)) or 1.0
        return {d: (s - mean) / sd for d, s in hits}
    else:
        raise ValueError(how)
    span = (top - low) or 1.0
    return {d: (s - low) / span for d, s in hits}


def convex(alpha, how_lex="minmax", how_dense="minmax"):
    """alpha * dense + (1 - alpha) * lexical on normalised scores; a missing score counts 0 (the
    list's minimum after min-max)."""

    def fuse(lex, den):
        nl = normalise(lex, how_lex)
        nd = normalise(den, how_dense)
        floor_l = min(nl.values(), default=0.0)
        floor_d = min(nd.values(), default=0.0)
        scores = {}
        for d in set(nl) | set(nd):
            scores[d] = alpha * nd.get(d, floor_d) + (1 - alpha) * nl.get(d, floor_l)
        return order(scores, {})

    return fuse


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--qrels", required=True)
    ap.add_argument("--grid", action="store_true")
    ap.add_argument("--dense-from", help="take the dense lists from this dump instead")
    ap.add_argument("--only", help="print only rows whose name contains this")
    ap.add_argument("dump")
    args = ap.parse_args()
    qrels = load_qrels(args.qrels)
    runs = load_dump(args.dump)
    if args.dense_from:
        for q, lists in load_dump(args.dense_from).items():
            if q in runs and "dense" in lists:
                runs[q]["dense"] = lists["dense"]
    rows = [("lexical", single("lexical")), ("dense", single("dense"))]
    for k in (10, 30, 60):
        rows.append((f"rrf k={k}", rrf(k)))
    if args.grid:
        for k in (5, 10, 20, 30, 60):
            for wd in (1.0, 1.5, 2.0, 3.0):
                rows.append((f"rrf k={k} wd={wd}", rrf(k, 1.0, wd)))
        for how in ("minmax", "max", "z"):
            for alpha in (0.3, 0.4, 0.5, 0.6, 0.7, 0.8):
                rows.append((f"convex {how} a={alpha}", convex(alpha, how, how)))
    for name, fuse in rows:
        if args.only and args.only not in name and name not in ("lexical", "dense"):
            continue
        nd, r = evaluate(runs, qrels, fuse)
        print(f"{name:<28} nDCG@10 {nd:.4f}  R@10 {r:.4f}")


if __name__ == "__main__":
    main()
