"""Embeds passages (one JSON string per line) with PyTorch sentence-transformers and the same
all-MiniLM-L6-v2 weights as agentsearch, and prints passages/s as one JSON object.

    python st_embed.py --model-dir models/all-MiniLM-L6-v2 --passages passages.jsonl [--batch-size 32]

The passages are those `agentsearch embed-bench --out` embedded, so both embedders see the same
texts. Sentence-transformers builds mean pooling and normalisation for a plain model folder, as
agentsearch does, and truncates at 256 word pieces, as agentsearch does.
"""

import argparse
import json
import time

import torch
from sentence_transformers import SentenceTransformer


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model-dir", required=True)
    parser.add_argument("--passages", required=True)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = parser.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    with open(args.passages, encoding="utf-8") as f:
        texts = [json.loads(line) for line in f if line.strip()]
    model = SentenceTransformer(args.model_dir, device="cpu")
    model.max_seq_length = 256
    model.encode(texts[:8], batch_size=args.batch_size)  # load and warm up, not timed
    started = time.perf_counter()
    vectors = model.encode(
        texts, batch_size=args.batch_size, normalize_embeddings=True, convert_to_numpy=True
    )
    secs = time.perf_counter() - started
    assert len(vectors) == len(texts)
    print(
        json.dumps(
            {
                "embedder": f"sentence-transformers (PyTorch {torch.__version__}, {torch.get_num_threads()} threads)",
                "passages": len(texts),
                "batchSize": args.batch_size,
                "secs": secs,
                "passagesPerSec": len(texts) / secs,
            }
        )
    )


if __name__ == "__main__":
    main()
