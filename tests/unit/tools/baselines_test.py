#!/usr/bin/env python3
"""tools/bench/baselines.sh end to end (issue 9, item 4): one short run with
every baseline tool installed by README's test command (iperf3, sockperf,
ucx_perftest), checked for a complete table.

  baselines_test.py BASELINES_SH SIPHON_BENCH

Speed is not judged (a debug build on a shared machine); the test checks
that every row is there with a number on both sides and a ratio, and that
siphon-bench ran its TCP stack, which is what the baselines measure."""
import re
import subprocess
import sys

script, bench = sys.argv[1], sys.argv[2]
p = subprocess.run(["bash", script, "--bench", bench, "--seconds", "1", "--runs", "1"],
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=280)
out, err = p.stdout.decode(), p.stderr.decode()
print(out)
problems = []
if p.returncode != 0:
    problems.append(f"exit {p.returncode}: {err[-2000:]}")
if "ms_type async+posix" not in out:
    problems.append("the header does not say siphon-bench ran async+posix")
if "async+rdma" in err:
    problems.append("siphon-bench ran async+rdma: " + err[-500:])
NUM = r"[0-9]+(?:\.[0-9]+)?"
expected = [
    ("one stream, 128K writes / messages", "iperf3", "Gbit/s"),
    ("one stream, 1M writes / messages", "iperf3", "Gbit/s"),
    ("one stream, 4M messages (iperf3: 1M writes, its maximum)", "iperf3", "Gbit/s"),
    ("ping-pong 64 B, round trip p50", "sockperf", "µs"),
    ("ping-pong 64 B, round trip p99", "sockperf", "µs"),
    ("ping-pong 4096 B, round trip p50", "sockperf", "µs"),
    ("ping-pong 4096 B, round trip p99", "sockperf", "µs"),
    ("ping-pong 64 B, round trip p50", "ucx_perftest tag_lat (UCX_TLS=tcp)", "µs"),
    ("ping-pong 4096 B, round trip p50", "ucx_perftest tag_lat (UCX_TLS=tcp)", "µs"),
    ("one-way 4 KiB messages, 64 in flight", "ucx_perftest ucp_am_bw (UCX_TLS=tcp)", "msgs/s"),
]
for workload, tool, unit in expected:
    row = re.compile(rf"^\| {re.escape(workload)} \| {re.escape(tool)} \| {NUM} {unit} \| {NUM} {unit} \| {NUM} \|$",
                     re.M)
    if not row.search(out):
        problems.append(f"no complete row for {workload} / {tool}")
for p_ in problems:
    print("FAIL", p_)
print("passed" if not problems else f"{len(problems)} problem(s)")
sys.exit(1 if problems else 0)
