"""Reference embeddings of all-MiniLM-L6-v2 for agentsearch's golden-vector test (golden.rs).

Embeds a few fixed texts with the reference implementation, PyTorch sentence-transformers, on the
same weights agentsearch loads, and writes them with the texts to golden.json:

    python3 -m venv /var/cache/agentsearch/golden-venv
    /var/cache/agentsearch/golden-venv/bin/pip install -r load/peer/embed/requirements.txt
    /var/cache/agentsearch/golden-venv/bin/python services/embed/tests/golden.py \\
        --model-dir models/all-MiniLM-L6-v2 > services/embed/tests/golden.json

The model folder holds only config.json, tokenizer.json and model.safetensors, so
sentence-transformers builds mean pooling over the attention mask for it; the sequence length is
set to 256 word pieces as the published model does, and the vectors are L2-normalised: what
agentsearch's MiniLm must reproduce. Each text is embedded alone (no padding).
"""

import argparse
import json
import math
import re

import sentence_transformers
import torch
import transformers
from sentence_transformers import SentenceTransformer

REFUND = (
    "Refunds are issued to the original payment method within five business days of approval. "
    "A customer may ask for a refund of an annual plan during the first thirty days; after that, "
    "unused months are credited to the account instead of being paid back. Support agents check "
    "the invoice, the payment status and any open disputes before approving a refund, and they "
    "note the reason in the ticket so finance can reconcile the ledger at the end of the month. "
)
ASTRONOMY = (
    "Jupiter's moons were first observed through a small telescope in the winter of 1610, and the "
    "four largest still carry the names of that discovery. Io is volcanic, Europa hides an ocean "
    "under its ice, Ganymede is larger than Mercury and Callisto is the most heavily cratered "
    "surface known in the solar system. "
)

TEXTS = [
    ("short", "post a message to a slack channel"),
    # Over 256 word pieces: about 300 pieces on refunds, then astronomy that truncation must cut.
    ("long", REFUND * 4 + ASTRONOMY * 3),
    (
        "non_ascii",
        "Café crème, naïve façade: Größe über alles. Ελληνικά γράμματα, русский текст, "
        "東京で会いましょう 🚀",
    ),
    ("empty", ""),
    ("punctuation", "  ?!  "),
]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model-dir", required=True)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = SentenceTransformer(args.model_dir, device="cpu")
    model.max_seq_length = 256
    out = []
    for name, text in TEXTS:
        pieces = len(model.tokenizer(text)["input_ids"])
        vector = model.encode([text], batch_size=1, normalize_embeddings=True)[0].tolist()
        out.append(
            {
                "name": name,
                "text": text,
                "pieces": pieces,
                "norm": round(math.sqrt(sum(x * x for x in vector)), 7),
                "vector": [round(x, 7) for x in vector],
            }
        )
    text = json.dumps(
        {
            "model": "all-MiniLM-L6-v2",
            "reference": (
                f"sentence-transformers {sentence_transformers.__version__}, "
                f"transformers {transformers.__version__}, torch {torch.__version__}, CPU"
            ),
            "maxSeqLength": model.max_seq_length,
            "texts": out,
        },
        ensure_ascii=False,
        indent=1,
    )
    # One line per vector.
    print(re.sub(r"\[\s+([-0-9.e,\s]+?)\s+\]", lambda m: "[" + " ".join(m.group(1).split()) + "]", text))


if __name__ == "__main__":
    main()
