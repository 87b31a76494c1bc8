#!/usr/bin/env python3
"""siphon-bench rados next to stock rados bench on the same cluster and pool,
interleaved (docs/performance.md "siphon-bench rados vs rados bench").

  rados_side_by_side.py SIPHON_BENCH CEPH_CONF POOL [--sizes 4096,4194304]
                        [--threads 16] [--seconds 10] [--rounds 2]
                        [--also NAME=SIPHON_BENCH ...]

Per size and round: rados bench write, siphon-bench rados write, then each
tool's seq on its own objects, then cleanup (rados bench cleanup for both);
the order of the tools alternates by round (reversed every other round).
--also adds another siphon-bench binary under NAME (a build from before a
change, say), so a change is measured against its own baseline in the same
run. Each process's CPU (user +
system, all threads) comes from the kernel's rusage of the child (wait4),
the same counters /proc/<pid>/stat shows. Prints one markdown row per run
and the load average before and after."""
import argparse
import os
import re
import subprocess
import sys
import time


def run_measured(cmd):
    """Runs cmd; returns (exit status, stdout, cpu seconds of the child)."""
    # stderr to a file, stdout read to EOF (a full pipe would block the
    # child), then the child reaped with its rusage.
    with open("/tmp/rados_side_by_side.err", "wb") as err:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err)
        out = p.stdout.read()
        _, status, ru = os.wait4(p.pid, 0)
    rc = os.waitstatus_to_exitcode(status)
    if rc != 0:
        sys.stderr.write(open("/tmp/rados_side_by_side.err").read())
    return rc, out.decode(), ru.ru_utime + ru.ru_stime


def field(out, key):
    m = re.search(rf"^{re.escape(key)}:\s+(\S+)", out, re.M)
    return float(m.group(1)) if m else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("siphon_bench")
    ap.add_argument("conf")
    ap.add_argument("pool")
    ap.add_argument("--sizes", default="4096,4194304")
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--also", action="append", default=[], metavar="NAME=SIPHON_BENCH")
    a = ap.parse_args()
    tools = {
        "rados bench": ["rados", "-c", a.conf, "bench", "-p", a.pool],
        "siphon-bench rados": [a.siphon_bench, "rados", "-c", a.conf, "-p", a.pool],
    }
    for extra in a.also:
        name, sep, path = extra.partition("=")
        if not sep or not name or not path:
            ap.error(f"--also {extra!r}: expected NAME=PATH")
        tools[name] = [path, "rados", "-c", a.conf, "-p", a.pool]
    print(f"load average before: {open('/proc/loadavg').read().split()[:3]}")
    print("| size | mode | round | tool | ops | MiB/s | IOPS | avg lat ms | CPU s | CPU us/op |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for size in [int(s) for s in a.sizes.split(",")]:
        for rnd in range(a.rounds):
            order = list(tools) if rnd % 2 == 0 else list(reversed(list(tools)))
            for name in order:
                base = tools[name]
                for mode in ("write", "seq"):
                    cmd = base + [str(int(a.seconds)), mode, "-t", str(a.threads)]
                    if mode == "write":
                        cmd += ["-b", str(size), "--no-cleanup"]
                    rc, out, cpu = run_measured(cmd)
                    ops = field(out, "Total writes made" if mode == "write" else "Total reads made")
                    bw = field(out, "Bandwidth (MB/sec)")
                    iops = field(out, "Average IOPS")
                    lat = field(out, "Average Latency(s)") * 1e3
                    per_op = cpu / ops * 1e6 if ops == ops and ops > 0 else float("nan")
                    print(f"| {size} | {mode} | {rnd + 1} | {name} | {ops:.0f} | {bw:.2f} | {iops:.0f} | "
                          f"{lat:.3f} | {cpu:.2f} | {per_op:.1f} |" + ("" if rc == 0 else f" exit {rc}"),
                          flush=True)
                subprocess.run(["rados", "-c", a.conf, "-p", a.pool, "cleanup"], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, timeout=600)
                time.sleep(1)
    print(f"load average after: {open('/proc/loadavg').read().split()[:3]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
