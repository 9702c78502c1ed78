#!/usr/bin/env python3
"""The table of load/feedback_eval.sh: per dataset and condition, nDCG@10 on the held-out half of
lexical, dense, hybrid without feedback and hybrid after the other half's feedback, with the
margin over the better single retriever and the change feedback made. Standard library only.

    python3 load/feedback_table.py DIR
"""

import glob
import json
import os
import sys


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "feedback-eval"
    rows = []
    for path in sorted(glob.glob(os.path.join(out_dir, "*.json"))):
        name, condition = os.path.basename(path)[: -len(".json")].split(".", 1)
        with open(path, encoding="utf-8") as f:
            report = json.load(f)
        m = {k: v["ndcg@10"] for k, v in report["modes"].items()}
        rows.append((name, condition, report["queries"], m))
    print("| dataset | condition | held-out queries | lexical | dense | hybrid | hybrid + feedback "
          "| feedback change | margin over the better single |")
    print("|---|---|--:|--:|--:|--:|--:|--:|--:|")
    order = {"clean": 0}
    for name, condition, n, m in sorted(rows, key=lambda r: (r[0], order.get(r[1], 1), r[1])):
        best = max(m["lexical"], m["dense"])
        fb = m["hybrid+feedback"]
        print(f"| {name} | {condition} | {n} | {m['lexical']:.4f} | {m['dense']:.4f} | "
              f"{m['hybrid']:.4f} | {fb:.4f} | {fb - m['hybrid']:+.4f} | {fb - best:+.4f} |")


if __name__ == "__main__":
    main()
