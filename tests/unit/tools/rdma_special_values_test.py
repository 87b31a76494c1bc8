#!/usr/bin/env python3
"""Every special value the documentation names for an ms_async_rdma_* option works.

  rdma_special_values_test.py SIPHON_CONF SIPHON_BENCH

The list is derived from the schema itself (siphon-conf --dump-schema-markdown,
which docs/configuration.md must equal): every ms_async_rdma_* option whose
description or note names a value with a meaning ("0 = never", "0 means a
random seed", "0 uses the port's active MTU", "7 = without limit", "empty
means the device whose name sorts first", ...). A new option documented that way is covered
without touching this file.

For each (option, value):
  1. siphon-conf --check accepts a ceph.conf that sets it (a documented value
     the schema refuses is a contradiction, and fails);
  2. a short siphon-bench loopback --verify over async+rdma (the software
     fabric when no NIC exists) with that configuration, mixing 4K messages
     (SENDs) and 128K ones (zero-copy RDMA READ at the default threshold),
     exits 0 with messages delivered and zero errors, faults, lost,
     duplicated, reordered and corrupted messages, read from --json;
  3. where the meaning is checkable from the stack's counters, it holds
     (EXPECT below), e.g. zero_copy_threshold = 0 moves no byte by READ.

Exit 0 pass, 1 fail (every failure is listed)."""
import json
import os
import re
import subprocess
import sys
import tempfile
import time

# A value named with a meaning: "0 = never", "0 means ...", "0 uses ...",
# "0 sizes ...", "(7 = without limit)"; "empty means ...", "empty = ...".
NUMERIC = re.compile(r"(?<![\w.^*])(\d+)\s*(?:=|means\b|uses\b|sizes\b|is off\b)")
EMPTY = re.compile(r"\b[Ee]mpty\s+(?:means|=|follows|keeps|uses)\b")

# Checks of the meaning itself, from the stack's counters, where one is
# visible there: (option, value) -> (description, predicate on the document).
EXPECT = {
    ("ms_async_rdma_zero_copy_threshold", "0"): (
        "0 = never: no zero-copy transfer",
        lambda d: d["results"]["stack_counters"]["zero_copy_transfers"] == 0
        and d["results"]["stack_counters"]["rdma_reads"] == 0),
    ("ms_async_rdma_inline_threshold", "0"): (
        "0 = never inline: messages still flow",
        lambda d: d["results"]["stack_counters"]["tx_sends"] > 0),
}


def special_values(markdown):
    """[(option, value)] in table order, from the schema's markdown table."""
    found = []
    for line in markdown.splitlines():
        m = re.match(r"^\| `(ms_async_rdma_\w+)` \|", line)
        if not m:
            continue
        name = m.group(1)
        # The last cell: the description, then "**Siphon vs Ceph:** note".
        text = line.rstrip().rstrip("|").rsplit(" | ", 1)[-1]
        values = []
        for v in NUMERIC.findall(text):
            if v not in values:
                values.append(v)
        if EMPTY.search(text):
            values.append("")
        found += [(name, v) for v in values]
    return found


def run(cmd, **kw):
    env = {k: v for k, v in os.environ.items() if k not in ("CEPH_CONF", "CEPH_ARGS")}
    return subprocess.run(cmd, capture_output=True, text=True, env=env, **kw)


def main():
    conf_tool, bench = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    md = run([conf_tool, "--dump-schema-markdown"])
    if md.returncode != 0:
        print(md.stderr)
        return 1
    cases = special_values(md.stdout)
    # The derivation must see the values this test was written for; if the
    # documentation's wording changes so that they are no longer found, say so
    # rather than pass on an empty list.
    for must in [("ms_async_rdma_zero_copy_threshold", "0"), ("ms_async_rdma_inline_threshold", "0"),
                 ("ms_async_rdma_device_name", "")]:
        if must not in cases:
            print(f"FAIL: {must[0]} = '{must[1]}' not found among the documented special values: {cases}")
            return 1
    failures = []
    with tempfile.TemporaryDirectory(prefix="siphon-special-") as tmp:
        for name, value in cases:
            label = f"{name} = '{value}'"
            conf = os.path.join(tmp, "ceph.conf")
            with open(conf, "w") as f:
                f.write(f"[global]\nms_type = async+rdma\n{name} = {value}\n")
            chk = run([conf_tool, "-c", conf, "--check"])
            if chk.returncode != 0:
                failures.append(f"{label}: documented as special, but siphon-conf --check refuses it:\n"
                                f"{chk.stderr.strip()}")
                print(f"FAIL {label} (refused by siphon-conf --check)", flush=True)
                continue
            out = os.path.join(tmp, "r.json")
            if os.path.exists(out):
                os.remove(out)
            start = time.monotonic()
            r = run([bench, "-c", conf, "loopback", "--duration", "1", "--warmup", "0",
                     "--size-dist", "4K:50,128K:50", "--inflight", "8", "--verify", "--quiet",
                     "--drain-timeout", "5", "--connect-timeout", "5", "--json", out], cwd=tmp, timeout=60)
            took = time.monotonic() - start
            problems = []
            if r.returncode != 0:
                problems.append(f"exit status {r.returncode}")
            doc = None
            try:
                with open(out) as f:
                    doc = json.load(f)
            except (OSError, ValueError) as e:
                problems.append(f"no JSON result ({e})")
            if doc is not None and doc.get("results") is not None:
                res = doc["results"]
                if res["messages"] <= 0:
                    problems.append("no message delivered")
                if res["errors"] != 0:
                    problems.append(f"{res['errors']} errors")
                if res["messenger"]["faults"] != 0:
                    problems.append(f"{res['messenger']['faults']} faults")
                for k in ("lost", "duplicated", "reordered", "corrupted"):
                    if res["verify"][k] != 0:
                        problems.append(f"{res['verify'][k]} {k}")
                if res["verify"]["checked"] <= 0:
                    problems.append("nothing verified")
                if not problems and (name, value) in EXPECT:
                    what, pred = EXPECT[(name, value)]
                    if not pred(doc):
                        problems.append(f"not what the documentation says ({what}): "
                                        f"{res['stack_counters']}")
            elif doc is not None:
                problems.append(f"results null: {doc.get('error')}")
            if problems:
                tail = "\n    ".join(r.stderr.strip().splitlines()[-6:])
                failures.append(f"{label}: " + "; ".join(problems) + f"\n    {tail}")
                print(f"FAIL {label} ({took:.1f} s): " + "; ".join(problems), flush=True)
            else:
                print(f"ok   {label} ({took:.1f} s, {doc['results']['messages']} messages)", flush=True)
    if failures:
        print(f"\n{len(failures)} of {len(cases)} special values failed:")
        for f in failures:
            print(" - " + f)
        return 1
    print(f"all {len(cases)} documented special values of ms_async_rdma_* work")
    return 0


if __name__ == "__main__":
    sys.exit(main())
