#!/usr/bin/env python3
"""Adaptive fusion by query coverage, chosen out of sample: leave-one-dataset-out over the dumps
of load/fusion_stress.sh.

For each query and condition, each list's coverage is the largest fraction of the query's terms
(the text BM25 searched: degraded under `lexical=P`, reproduced here from the query id exactly as
`services/eval/src/degrade.rs` draws it) that one of the list's first three candidates contains
(name, description and parameter names and descriptions for tools, title and text for passages).
Terms are analyzed as the service analyzes them (identifier pieces, lowercase, the service's stop
words, Snowball English stems). The fusion mirrors `services/fusion/src/adaptive.rs` with
`coverage_gain` a and `coverage_margin` b: z-scores per list, lexical weight
`exp(a x max(0, c_lexical - c_dense - b))`, dense weight wd.

A setting is chosen on the other datasets by the largest worst margin (hybrid minus the better
single retriever) over every condition, among the settings that keep every clean figure within
0.005 of fixed fusion (lexical 1, dense 1.5); it is then scored on the held-out dataset (MetaTool's
two splits are held out together).

    pip install snowballstemmer
    python3 load/fusion_coverage.py --dumps fusion-stress --data ../shared/data/eval

Needs the stop words of services/common/src/tool.rs (read from the source).
"""

import argparse
import json
import math
import os
import re
import struct
import sys

import snowballstemmer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fusion_lodo as fl  # noqa: E402
from fusion_lab import load_qrels, ndcg10  # noqa: E402

SETS = [
    ("toollens", "toollens", "test"),
    ("bfcl", "bfcl", "test"),
    ("metatool-multi", "metatool", "multi"),
    ("metatool-test", "metatool", "test"),
    ("scifact", "scifact", "train"),
]
DEPTH = 3
TOLERANCE = 0.005
FIXED = (0.0, 0.0, 1.5)
M64 = (1 << 64) - 1


def stop_words():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    src = open(os.path.join(root, "services/common/src/tool.rs"), encoding="utf-8").read()
    block = re.search(r"pub const STOP_WORDS: &\[&str\] = &\[(.*?)\];", src, re.S).group(1)
    return set(re.findall(r'"([^"]*)"', block))


STOP = stop_words()
STEM = snowballstemmer.stemmer("english")
PIECE = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+|[^\W\d_]+")
_terms = {}


def analyze(text):
    """Distinct terms: identifier pieces (camelCase, `_`, `.`, any non-alphanumeric), lowercase,
    no stop words, stemmed."""
    got = _terms.get(text)
    if got is None:
        terms = []
        for word in re.findall(r"[^\W_]+", text):
            for piece in PIECE.findall(word):
                piece = piece.lower()
                if piece not in STOP:
                    terms.append(STEM.stemWord(piece))
        got = _terms[text] = list(dict.fromkeys(terms))
    return got


# The word replacement of `agentsearch eval --degrade lexical=P` (SplitMix64 seeded by the FNV-1a
# hash of the query id, the retriever tag and the level's bits).
def fnv1a(data):
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & M64
    return h


class SplitMix64:
    def __init__(self, seed):
        self.state = seed & M64

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & M64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        return z ^ (z >> 31)

    def unit(self):
        return (self.next() >> 11) / float(1 << 53)


def degraded_lexical_text(query_id, text, level, vocabulary):
    tag = 1 << 56  # the lexical tag, 1, rotated left by 56
    bits = struct.unpack("<Q", struct.pack("<d", level))[0]
    rng = SplitMix64(fnv1a(query_id.encode()) ^ tag ^ bits)
    words = []
    for word in text.split():
        if rng.unit() < level:
            words.append(vocabulary[rng.next() % len(vocabulary)])
        else:
            words.append(word)
    return " ".join(words)


def load_dataset(data, dataset):
    docs, vocabulary = {}, set()
    with open(f"{data}/{dataset}/corpus.jsonl", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            props = ((d.get("metadata") or {}).get("parameters") or {}).get("properties") or {}
            params = ""
            if isinstance(props, dict):
                params = " ".join(
                    f"{k} {v.get('description') or '' if isinstance(v, dict) else ''}"
                    for k, v in props.items()
                )
            docs[d["_id"]] = set(analyze(f"{d.get('title', '')} {d['text']} {params}"))
            for t in (d.get("title", ""), d["text"]):
                vocabulary.update(w.lower() for w in re.split(r"[\W_]", t) if len(w) >= 3)
    queries = {}
    with open(f"{data}/{dataset}/queries.jsonl", encoding="utf-8") as f:
        for line in f:
            q = json.loads(line)
            text = q["text"][:1024]
            queries[q["_id"]] = text if text.strip() else q["_id"]
    return docs, sorted(vocabulary), queries


class Query(fl.Prepared):
    __slots__ = ("coverage",)


def coverage(terms, doc_terms):
    return sum(t in doc_terms for t in terms) / len(terms) if terms else 0.0


def prepare(dumps, data, name, dataset, split):
    docs, vocabulary, queries = load_dataset(data, dataset)
    qrels = load_qrels(f"{data}/{dataset}/qrels/{split}.tsv")
    base = fl.load_dump(f"{dumps}/{name}.base.jsonl")
    conditions = {"clean": (base, None)}
    for file in sorted(os.listdir(dumps)):
        if not (file.startswith(name + ".") and file.endswith(".jsonl")) or ".base." in file:
            continue
        retriever, level = fl.condition_name(file)
        degraded = fl.load_dump(f"{dumps}/{file}")
        runs = {}
        for q, lists in base.items():
            lists = dict(lists)
            if retriever in degraded.get(q, {}):
                lists[retriever] = degraded[q][retriever]
            runs[q] = lists
        conditions[f"{retriever}={level}"] = (runs, (retriever, float(level)))
    out = {}
    for cond, (runs, degrade) in conditions.items():
        prepared = []
        for q, lists in runs.items():
            if not qrels.get(q):
                continue
            text = queries[q]
            if degrade and degrade[0] == "lexical":
                text = degraded_lexical_text(q, text, degrade[1], vocabulary) or q
            terms = analyze(text)
            p = Query(lists.get("lexical", []), lists.get("dense", []), qrels[q])
            p.coverage = [
                max((coverage(terms, docs.get(d, ())) for d in lst[:DEPTH]), default=0.0)
                for lst in (p.lex, p.den)
            ]
            prepared.append(p)
        out[cond] = prepared
    return out


def fuse(p, setting):
    gain, margin, wd = setting
    wl = 1.0 if p.lex else 0.0
    if p.lex and p.den and gain:
        wl *= math.exp(min(8.0, gain * max(0.0, p.coverage[0] - p.coverage[1] - margin)))
    wd = wd if p.den else 0.0
    order = sorted(
        range(len(p.keys)),
        key=lambda i: (-(wl * p.zl[i] + wd * p.zd[i]), p.best[i], p.keys[i]),
    )
    return [p.keys[i] for i in order[:10]]


def grid():
    settings = [FIXED]
    for gain in (1.0, 1.5, 2.0, 3.0, 4.0):
        for margin in (0.0, 0.1, 0.2):
            for wd in (1.5, 2.0):
                settings.append((gain, margin, wd))
    return settings


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dumps", default="fusion-stress")
    ap.add_argument("--data", default="../shared/data/eval")
    args = ap.parse_args()
    data = {}
    for name, dataset, split in SETS:
        if os.path.exists(f"{args.dumps}/{name}.base.jsonl"):
            data[name] = prepare(args.dumps, args.data, name, dataset, split)
    settings = grid()
    scores = {}
    for name, conds in data.items():
        scores[name] = {}
        for cond, prepared in conds.items():
            lex = fl.mean(ndcg10(p.lex, p.rel) for p in prepared)
            den = fl.mean(ndcg10(p.den, p.rel) for p in prepared)
            hyb = {s: fl.mean(ndcg10(fuse(p, s), p.rel) for p in prepared) for s in settings}
            scores[name][cond] = (lex, den, hyb)

    def value(s, names):
        clean = min(scores[n]["clean"][2][s] - scores[n]["clean"][2][FIXED] for n in names)
        if clean < -TOLERANCE:
            return -1.0 + clean
        return min(h[s] - max(lex, den) for n in names for lex, den, h in scores[n].values())

    label = lambda s: "fixed" if s == FIXED else f"gain={s[0]} margin={s[1]} wd={s[2]}"
    names = list(data)
    best = max(settings, key=lambda s: value(s, names))
    print(f"chosen on every dataset: {label(best)}")
    fold = lambda n: n.split("-")[0]
    for held in names:
        train = [n for n in names if fold(n) != fold(held)]
        chosen = max(settings, key=lambda s: value(s, train))
        print(f"\n{held}: chosen on the others {label(chosen)}")
        print(f"  {'condition':<14} {'lexical':>8} {'dense':>8} {'fixed':>8} {'chosen':>8} {'margin':>8}")
        for cond, (lex, den, hyb) in scores[held].items():
            print(
                f"  {cond:<14} {lex:8.4f} {den:8.4f} {hyb[FIXED]:8.4f} {hyb[chosen]:8.4f}"
                f" {hyb[chosen] - max(lex, den):+8.4f}"
            )


if __name__ == "__main__":
    main()
