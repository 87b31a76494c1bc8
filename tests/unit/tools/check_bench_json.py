#!/usr/bin/env python3
"""Validates siphon-bench JSON documents against tools/bench/bench-result.schema.json.

  check_bench_json.py SCHEMA FILE...      (FILE '-' reads stdin)

A FILE holds one document or a JSON array of documents (siphon-bench
compare); each must match. A document whose results are null (a stack
compare could not create) must say why in "error".

Implements the subset of JSON Schema the schema uses: type (incl. lists),
enum, required, properties, additionalProperties (bool or schema), items,
minItems, maxItems. Exits 1 listing every violation."""
import json
import sys

TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def validate(value, schema, path, errors):
    types = schema.get("type")
    if types is not None:
        types = types if isinstance(types, list) else [types]
        if not any(TYPES[t](value) for t in types):
            errors.append(f"{path}: expected {'/'.join(types)}, got {type(value).__name__}")
            return
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{path}: {value!r} not in {schema['enum']}")
    if isinstance(value, dict):
        for key in schema.get("required", []):
            if key not in value:
                errors.append(f"{path}: missing required '{key}'")
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for key, v in value.items():
            if key in props:
                validate(v, props[key], f"{path}.{key}", errors)
            elif extra is False:
                errors.append(f"{path}: unexpected property '{key}'")
            elif isinstance(extra, dict):
                validate(v, extra, f"{path}.{key}", errors)
    if isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            errors.append(f"{path}: fewer than {schema['minItems']} items")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            errors.append(f"{path}: more than {schema['maxItems']} items")
        if "items" in schema:
            for i, v in enumerate(value):
                validate(v, schema["items"], f"{path}[{i}]", errors)


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    with open(sys.argv[1]) as fh:
        schema = json.load(fh)
    failed = 0
    for name in sys.argv[2:]:
        text = sys.stdin.read() if name == "-" else open(name).read()
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            print(f"{name}: not JSON: {e}")
            failed += 1
            continue
        errors = []
        docs = doc if isinstance(doc, list) else [doc]
        if isinstance(doc, list) and not doc:
            errors.append("$: empty array")
        for i, d in enumerate(docs):
            where = f"$[{i}]" if isinstance(doc, list) else "$"
            validate(d, schema, where, errors)
            if isinstance(d, dict) and d.get("results", {}) is None and "error" not in d:
                errors.append(f"{where}: results is null without an error")
        for e in errors:
            print(f"{name}: {e}")
        failed += bool(errors)
        if not errors:
            print(f"{name}: valid siphon-bench document")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
