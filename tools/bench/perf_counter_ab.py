#!/usr/bin/env python3
"""msgs/s with perf counters on, off at run time and compiled out (issue 17).

Runs `siphon-bench loopback` in interleaved rounds: each round runs every
setting once, and the order of the settings rotates from round to round so
no setting always runs first (or always right after the machine was busy
with something else). Prints every run, then per setting the median and
range, and per round the ratio of each setting to the compiled-out run of
the same round, with the median of those paired ratios: on a shared VM
whose speed drifts over minutes, a ratio within one round is steadier than
a ratio of medians.

  tools/bench/perf_counter_ab.py ON_BENCH OUT_BENCH [--rounds 12] [--seconds 4]
      [--ms-type async+posix] [--size 64] [--rt] [--cpu N] [--settings on,perf=false,out]

--settings picks which of the three settings run (out, the reference of
every ratio, always does): `--settings on,out` spends every round on the
comparison the target names, so the same minutes give more pairs.

--rt runs each benchmark under SCHED_FIFO (`chrt -f 50`, root only), so a
build running on the same machine cannot preempt it; the kernel's RT
throttling still leaves 5 % of each second to everything else. --cpu N
pins the whole benchmark (client, server and their threads) to CPU N
(`taskset -c N`): msgs/s then measures the CPU cost of a message on one
core, without the cross-core wake-ups whose timing varies most between
runs.
"""
import argparse
import json
import random
import statistics
import subprocess
import sys


def run(bench, args, extra):
    cmd = [bench, "loopback", "--ms-type", args.ms_type, "--size", str(args.size),
           "--duration", str(args.seconds), "--warmup", "1", "--quiet", "--json", "-"] + extra
    if args.cpu is not None:
        cmd = ["taskset", "-c", str(args.cpu)] + cmd
    if args.rt:
        cmd = ["chrt", "-f", "50"] + cmd
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=args.seconds * 10 + 60)
    r = json.loads(out.stdout)["results"]
    return r["msgs_per_s"], (r.get("cpu") or {}).get("us_per_msg")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("on_bench", help="siphon-bench built with counters (the release preset)")
    ap.add_argument("out_bench", help="siphon-bench built with -DSIPHON_PERF_COUNTERS=OFF")
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--seconds", type=int, default=4)
    ap.add_argument("--ms-type", default="async+posix")
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--rt", action="store_true")
    ap.add_argument("--cpu", type=int)
    ap.add_argument("--settings", default="on,perf=false,out")
    args = ap.parse_args()
    settings = [("on", args.on_bench, []), ("perf=false", args.on_bench, ["--set", "perf=false"]),
                ("out", args.out_bench, [])]
    chosen = set(args.settings.split(",")) | {"out"}
    unknown = chosen - {name for name, _, _ in settings}
    if unknown:
        ap.error(f"--settings: unknown {', '.join(sorted(unknown))} (known: on, perf=false, out)")
    settings = [s for s in settings if s[0] in chosen]
    rates = {name: [] for name, _, _ in settings}
    cpu = {name: [] for name, _, _ in settings}
    for rnd in range(args.rounds):
        k = rnd % len(settings)
        for name, bench, extra in settings[k:] + settings[:k]:
            r, c = run(bench, args, extra)
            rates[name].append(r)
            cpu[name].append(c)
            print(f"round {rnd + 1:2d} {name:10s} {r:12,.0f} msgs/s  {c if c is not None else float('nan'):6.2f} CPU us/msg",
                  flush=True)
    print()
    print("| setting | msgs/s median (min-max) | CPU us/msg median | paired ratio to compiled out: median (min-max) | rounds below out |")
    print("|---|---|---|---|---|")
    for name, _, _ in settings:
        rs = rates[name]
        ratios = [a / b for a, b in zip(rs, rates["out"])]
        below = sum(1 for x in ratios if x < 1.0)
        cs = [c for c in cpu[name] if c is not None]
        cmed = f"{statistics.median(cs):.2f}" if cs else "-"
        print(f"| {name} | {statistics.median(rs):,.0f} ({min(rs):,.0f}-{max(rs):,.0f}) | {cmed} | "
              f"{statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f}) | {below} of {len(rs)} |")
    # How sure the medians are: a 95 % bootstrap interval of the median paired
    # ratio (rounds resampled with replacement, fixed seed so a rerun of the
    # same numbers prints the same interval), for msgs/s and for CPU per
    # message (the cost itself, which scheduling noise moves less).
    print()
    print("| setting | msgs/s paired ratio: median [95 % CI] | CPU us/msg paired ratio: median [95 % CI] |")
    print("|---|---|---|")
    rng = random.Random(1)
    for name, _, _ in [s for s in settings if s[0] != "out"]:
        rr = [a / b for a, b in zip(rates[name], rates["out"])]
        cr = [a / b for a, b in zip(cpu[name], cpu["out"]) if a is not None and b]
        print(f"| {name} | {ci_text(rr, rng)} | {ci_text(cr, rng)} |")
    return 0


def ci_text(xs, rng, n=10000):
    if len(xs) < 3:
        return "-"
    meds = sorted(statistics.median(rng.choices(xs, k=len(xs))) for _ in range(n))
    return f"{statistics.median(xs):.3f} [{meds[int(0.025 * n)]:.3f}, {meds[int(0.975 * n) - 1]:.3f}]"


if __name__ == "__main__":
    sys.exit(main())
