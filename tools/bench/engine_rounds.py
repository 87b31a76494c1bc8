#!/usr/bin/env python3
"""Runs tests/bench/tcp_engine_bench in rounds and prints one Markdown table.

    tools/bench/engine_rounds.py [--bench PATH] [--rounds N] [--msgs N] [--filter REGEX] [--cpu N]

Each round runs every case once (three sessions each, as the benchmark
registers them), so the engines alternate through the run instead of one
engine's repetitions sitting in one stretch of the machine's load. Per case
the table gives the median and range over the rounds of msgs/s, CPU µs per
message (both threads) and system calls per message, and the median of the
per-round ratio of CPU per message to the case `epoll` of the same workload
in the same round (docs/performance.md, "io_uring or epoll"). With --cpu N
both threads run on CPU N (taskset): each hand-over is then a context switch
on one CPU instead of a wake-up across vCPUs, whose cost (tens of µs on a
VM) otherwise hides what the engines themselves cost.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys


def main() -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", default=os.path.join(root, "build/release/tests/bench/tcp_engine_bench"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--msgs", type=int, default=20000, help="round trips per ping-pong session (the stream: 10x)")
    ap.add_argument("--filter", default=".", help="--benchmark_filter")
    ap.add_argument("--cpu", type=int, help="run both threads on this CPU (taskset -c)")
    a = ap.parse_args()
    if a.rounds < 1 or a.msgs < 1:
        print("engine_rounds.py: --rounds and --msgs take whole numbers >= 1", file=sys.stderr)
        return 2
    if not os.access(a.bench, os.X_OK):
        print(f"engine_rounds.py: {a.bench} is not built "
              "(cmake --preset release && cmake --build build/release --target tcp_engine_bench)", file=sys.stderr)
        return 1
    env = dict(os.environ, SIPHON_TCP_ENGINE_BENCH_MSGS=str(a.msgs))
    rows = {}  # name -> list of (msgs_per_s, cpu_us, syscalls) per round
    ratios = {}  # name -> list of cpu ratio to epoll of the same round
    for r in range(a.rounds):
        pin = ["taskset", "-c", str(a.cpu)] if a.cpu is not None else []
        out = subprocess.run(pin + [a.bench, f"--benchmark_filter={a.filter}", "--benchmark_format=json"],
                             env=env, capture_output=True, text=True, check=False)
        if out.returncode != 0:
            print(f"engine_rounds.py: round {r + 1}: the benchmark exited {out.returncode}:\n{out.stderr}",
                  file=sys.stderr)
            return 1
        data = json.loads(out.stdout)
        this = {}
        for b in data["benchmarks"]:
            name = b["name"].split("/iterations")[0]
            if b.get("error_occurred"):
                print(f"engine_rounds.py: {name}: {b.get('error_message')}", file=sys.stderr)
                return 1
            if "cpu_us_per_msg" not in b:  # io_uring refused: a label, no figures
                print(f"{name}: {b.get('label', 'no figures')}", file=sys.stderr)
                continue
            this[name] = (b["msgs_per_s"], b["cpu_us_per_msg"], b["syscalls_per_msg"])
            rows.setdefault(name, []).append(this[name])
        for name, v in this.items():
            workload = name.split("/")[0]
            base = next((x for n, x in this.items() if n.split("/")[:2] == [workload, "epoll"]), None)
            if base:
                ratios.setdefault(name, []).append(v[1] / base[1])
        print(f"round {r + 1}/{a.rounds} done", file=sys.stderr)

    def cell(vals, fmt):
        return f"{fmt.format(statistics.median(vals))} ({fmt.format(min(vals))}–{fmt.format(max(vals))})"

    where = f", CPU {a.cpu}" if a.cpu is not None else ""
    print(f"| case ({a.rounds} rounds{where}) | msgs/s median (min–max) | CPU µs/msg | system calls/msg | "
          "CPU/msg ÷ epoll, same round (median) |")
    print("|---|---|---|---|---|")
    for name, vals in rows.items():
        print(f"| {name} | {cell([v[0] for v in vals], '{:,.0f}')} | {cell([v[1] for v in vals], '{:.2f}')} | "
              f"{statistics.median(v[2] for v in vals):.2f} | {statistics.median(ratios.get(name, [1.0])):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
