"""Validates real HTTP answers against the response schemas of an OpenAPI 3.1 document.

Usage: validate_responses.py DOCUMENT SAMPLES

SAMPLES is a JSON list of {"method", "path" (the template, e.g. /api/cluster/providers/{id}),
"status", "body"}. Every sample's status must be documented for its operation, and its body
must validate against that answer's application/json schema (JSON Schema 2020-12, which
OpenAPI 3.1 uses; `$ref`s into the document's components resolve). Prints one line per
sample and exits 1 if any fails.
"""

import json
import sys

from jsonschema import Draft202012Validator


def resolve(doc, node):
    while isinstance(node, dict) and "$ref" in node and len(node) == 1:
        pointer = node["$ref"]
        assert pointer.startswith("#/"), pointer
        node = doc
        for part in pointer[2:].split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def main():
    with open(sys.argv[1]) as f:
        doc = json.load(f)
    with open(sys.argv[2]) as f:
        samples = json.load(f)
    failures = 0
    for s in samples:
        label = f'{s["method"].upper()} {s["path"]} {s["status"]}'
        op = doc["paths"].get(s["path"], {}).get(s["method"].lower())
        if op is None:
            print(f"FAIL {label}: operation not documented")
            failures += 1
            continue
        answer = op["responses"].get(str(s["status"]))
        if answer is None:
            print(f"FAIL {label}: status not documented")
            failures += 1
            continue
        answer = resolve(doc, answer)
        schema = answer.get("content", {}).get("application/json", {}).get("schema")
        if schema is None:
            print(f"FAIL {label}: no application/json schema")
            failures += 1
            continue
        # The document's components in the root resource, so local $refs resolve.
        root = {"allOf": [schema], "components": doc.get("components", {})}
        errors = sorted(
            Draft202012Validator(root).iter_errors(s["body"]), key=lambda e: list(e.path)
        )
        if errors:
            failures += 1
            for e in errors[:5]:
                where = "/".join(str(p) for p in e.absolute_path)
                print(f"FAIL {label}: at /{where}: {e.message}")
        else:
            print(f"ok   {label}")
    print(f"{len(samples)} samples, {failures} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
