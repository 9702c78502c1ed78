#!/usr/bin/env python3
"""Gives the query JSON documents of the agreement test (services/query/tests/agreement.rs) to
Python's draft 2020-12 validator: its verdict on every document must equal the Rust validator's,
which the parser was checked against. Usage: check-query-schema.py DIR (the test's
AGENTSEARCH_QUERY_CORPUS)."""
import json
import pathlib
import sys

from jsonschema import Draft202012Validator


def main() -> int:
    corpus = pathlib.Path(sys.argv[1])
    schemas = sorted(corpus.glob("*.schema.json"))
    if not schemas:
        print(f"no schemas in {corpus}: run the agreement test first", file=sys.stderr)
        return 1
    failures = 0
    for schema_path in schemas:
        name = schema_path.name.removesuffix(".schema.json")
        schema = json.loads(schema_path.read_text())
        Draft202012Validator.check_schema(schema)
        validator = Draft202012Validator(schema)
        counts = {True: 0, False: 0}
        for line in (corpus / f"{name}.documents.jsonl").read_text().splitlines():
            entry = json.loads(line)
            verdict = validator.is_valid(entry["document"])
            counts[verdict] += 1
            if verdict != entry["valid"]:
                failures += 1
                if failures <= 10:
                    print(f"{name}: Python says {verdict}, Rust says {entry['valid']}: "
                          f"{json.dumps(entry['document'])[:400]}", file=sys.stderr)
        print(f"{name}: {counts[True]} valid and {counts[False]} invalid documents, "
              f"verdicts {'agree' if not failures else 'DISAGREE'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
