#!/usr/bin/env python3
"""Query-adaptive fusion, chosen out of sample: leave-one-dataset-out over candidate dumps.

Each dataset is given as NAME=QRELS:BASE[:DEGRADED...] (NAME may be DATASET-SPLIT: the splits
of one dataset are left out together) where BASE is a dump of
`agentsearch eval --modes lexical,dense --dump` and each DEGRADED a dump of one retriever under
`--degrade RETRIEVER=LEVEL` (its file name must contain `lexical-LEVEL` or `dense-LEVEL`); a
degraded condition takes that retriever's lists from its dump and the other's from BASE.

For every fusion setting of the grid the script scores every dataset and condition (nDCG@10),
then, for each dataset in turn, chooses the setting that is best on the other datasets and
reports its figures on the held-out one. The fusion mirrors `services/fusion/src/adaptive.rs`:
scores standardised per list, an item missing from a list gets the list's lowest z, each list's
weight is its base weight times its confidence for this query, ties broken by the best rank then
the key.

    python3 load/fusion_lodo.py toollens=Q.tsv:base.jsonl:lexical-0.5.jsonl:dense-0.5.jsonl ...

Standard library only.
"""

import argparse
import collections
import json
import math
import os
import re

from fusion_lab import load_qrels, ndcg10


def load_dump(path):
    runs = collections.defaultdict(dict)
    with open(path, encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            mode = row["mode"]
            if mode not in ("lexical", "dense"):
                continue
            hits = []
            seen = set()
            for h in row["hits"]:
                e = h.get(mode)
                if e is not None and h["doc"] is not None and h["doc"] not in seen:
                    seen.add(h["doc"])
                    hits.append((h["doc"], float(e[1])))
            runs[row["query"]][mode] = hits
    return runs


def standardise(hits):
    if not hits:
        return []
    n = len(hits)
    mean = sum(s for _, s in hits) / n
    sd = math.sqrt(sum((s - mean) ** 2 for _, s in hits) / n)
    if not (sd > 1e-12):
        sd = 1.0
    return [(d, (s - mean) / sd) for d, s in hits]


class Prepared:
    """One query's two lists, standardised once, as arrays over the union of their items."""

    __slots__ = ("keys", "zl", "zd", "best", "top", "support", "rel", "lex", "den", "raw")

    def __init__(self, lex, den, rel):
        z = (standardise(lex), standardise(den))
        self.rel = rel
        self.lex = [d for d, _ in z[0]]
        self.den = [d for d, _ in z[1]]
        floors = [min((s for _, s in zi), default=0.0) for zi in z]
        maps = [dict(zi) for zi in z]
        best = {}
        for zi in z:
            for r, (d, _) in enumerate(zi):
                best[d] = min(best.get(d, 10**9), r + 1)
        self.keys = sorted(best)
        self.best = [best[k] for k in self.keys]
        self.zl = [maps[0].get(k, floors[0]) for k in self.keys]
        self.zd = [maps[1].get(k, floors[1]) for k in self.keys]
        # Per list: how far its best candidate stands out (its z), and the other list's z of it.
        self.top = [zi[0][1] if zi else 0.0 for zi in z]
        # The best raw score of each list (BM25, cosine similarity).
        self.raw = [lex[0][1] if lex else 0.0, den[0][1] if den else 0.0]
        self.support = [
            maps[1 - i].get(zi[0][0], floors[1 - i]) if zi and z[1 - i] else 0.0
            for i, zi in enumerate(z)
        ]


def weights(p, setting):
    """The two lists' weights for this query. Lexical: 1 x exp(a x (its top z - dense's top z)).
    Dense: wd x (its best cosine / COSINE_REF) ^ g."""
    a, g, wd = setting
    if not p.lex or not p.den:
        return [1.0 if p.lex else 0.0, 1.0 if p.den else 0.0]
    x = a * (p.top[0] - p.top[1])
    wl = math.exp(max(-CLAMP, min(CLAMP, x)))
    wdense = wd * (max(p.raw[1], 1e-3) / COSINE_REF) ** g
    return [wl, wdense]


COSINE_REF = 0.5
CLAMP = 8.0


def fuse(p, setting):
    wl, wd = weights(p, setting)
    if wl + wd <= 0:
        return []
    zl, zd, best, keys = p.zl, p.zd, p.best, p.keys
    order = sorted(
        range(len(keys)), key=lambda i: (-(wl * zl[i] + wd * zd[i]), best[i], keys[i])
    )
    return [keys[i] for i in order[:10]]


def single(p, i):
    return p.lex if i == 0 else p.den


def condition_name(path):
    m = re.search(r"(lexical|dense)-([0-9.]+?)(?:\.jsonl)?$", os.path.basename(path))
    if not m:
        raise SystemExit(f"{path}: the file name must contain lexical-LEVEL or dense-LEVEL")
    return m.group(1), m.group(2)


def prepare(spec):
    name, rest = spec.split("=", 1)
    parts = rest.split(":")
    qrels = load_qrels(parts[0])
    base = load_dump(parts[1])
    conditions = {"clean": base}
    for path in parts[2:]:
        retriever, level = condition_name(path)
        degraded = load_dump(path)
        runs = {}
        for q, lists in base.items():
            lists = dict(lists)
            if q in degraded and retriever in degraded[q]:
                lists[retriever] = degraded[q][retriever]
            runs[q] = lists
        conditions[f"{retriever}={level}"] = runs
    prepared = {}
    for cond, runs in conditions.items():
        prepared[cond] = [
            Prepared(lists.get("lexical", []), lists.get("dense", []), qrels[q])
            for q, lists in runs.items()
            if qrels.get(q)
        ]
    return name, prepared


def mean(xs):
    xs = list(xs)
    return sum(xs) / len(xs) if xs else float("nan")


def grid():
    settings = []
    for a in (0.0, 0.25, 0.5):
        for g in (0.0, 1.0, 2.0, 3.0, 4.0):
            for wd in (1.0, 1.25, 1.5, 2.0):
                settings.append((a, g, wd))
    return settings


def label(setting):
    a, g, wd = setting
    return f"a={a} g={g} wd={wd}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("datasets", nargs="+", help="NAME=QRELS:BASE[:DEGRADED...]")
    ap.add_argument("--objective", default="minmargin", choices=("minmargin", "mean"))
    ap.add_argument("--show", type=int, default=8, help="settings to list, best first")
    args = ap.parse_args()
    data = dict(prepare(spec) for spec in args.datasets)
    settings = grid()
    # scores[dataset][condition] = (lexical, dense, {setting: hybrid})
    scores = {}
    for name, conds in data.items():
        scores[name] = {}
        for cond, prepared in conds.items():
            lex = mean(ndcg10(single(p, 0), p.rel) for p in prepared)
            den = mean(ndcg10(single(p, 1), p.rel) for p in prepared)
            hyb = {s: mean(ndcg10(fuse(p, s), p.rel) for p in prepared) for s in settings}
            scores[name][cond] = (lex, den, hyb)

    def value(setting, names):
        """The objective of `setting` over the datasets `names` and all their conditions."""
        margins, means = [], []
        for n in names:
            for cond, (lex, den, hyb) in scores[n].items():
                margins.append(hyb[setting] - max(lex, den))
                means.append(hyb[setting])
        return min(margins) if args.objective == "minmargin" else mean(means)

    names = list(data)
    print(f"objective: {args.objective}\n")
    print("all datasets, best settings:")
    for s in sorted(settings, key=lambda s: -value(s, names))[: args.show]:
        print(f"  {value(s, names):+.4f}  {label(s)}")
    print("\nper condition (lexical, dense, then hybrid for: fixed, best overall):")
    best_all = max(settings, key=lambda s: value(s, names))
    fixed = (0.0, 0.0, 1.5)
    for n in names:
        for cond, (lex, den, hyb) in scores[n].items():
            print(
                f"  {n:<16} {cond:<14} {lex:8.4f} {den:8.4f} {hyb[fixed]:8.4f} {hyb[best_all]:8.4f}"
                f" {hyb[best_all] - max(lex, den):+8.4f}"
            )
    print("\nleave one dataset out (chosen on the others, scored on the held-out one):")
    fold = lambda n: n.split("-")[0]
    for held in names:
        train = [n for n in names if fold(n) != fold(held)]
        chosen = max(settings, key=lambda s: value(s, train))
        print(f"\n{held}: chosen {label(chosen)} (objective on the others {value(chosen, train):+.4f})")
        print(f"  {'condition':<14} {'lexical':>8} {'dense':>8} {'fixed':>8} {'chosen':>8} {'margin':>8}")
        fixed = (0.0, 0.0, 1.5)
        for cond, (lex, den, hyb) in scores[held].items():
            print(
                f"  {cond:<14} {lex:8.4f} {den:8.4f} {hyb[fixed]:8.4f} {hyb[chosen]:8.4f} "
                f"{hyb[chosen] - max(lex, den):+8.4f}"
            )


if __name__ == "__main__":
    main()
