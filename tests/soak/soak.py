#!/usr/bin/env python3
"""Soak: siphon-bench --verify under injected faults, on both stacks, checked
for loss, leaks and stalls (docs/testing.md, "Soak").

  soak.py --bench PATH [--seconds N] [--stacks posix,rdma] [--conns N]
          [--rss-growth-mib M] [--stall-seconds S] [--keep DIR]

For each stack it runs one `siphon-bench loopback --verify --json` of N
seconds (echo, 1 B..64 KiB messages, lossless sessions) with faults injected
all along:
  async+posix  ms_inject_socket_failures (a socket fails every ~N operations)
  async+rdma   the software fabric's ms_async_rdma_soft_inject_* (failed
               posts, error completions, QPs to ERR, link drops, delays)
and fails, naming the check, on:
  loss         --verify counted a lost, duplicated, reordered or corrupted
               message, or checked none; or the bench exited non-zero
  no faults    the injection never fired (the run would prove nothing)
  stall        a run of --stall-seconds seconds without one completed
               message, or the bench not finishing within N + 90 s
  fd leak      fds still open after every messenger shut down exceed those
               open in the first second of load, or the fd count in the
               second half of the run exceeds the first half's peak by more
               than 4 per connection (sockets of a reconnect in progress)
  RDMA leak    after shutdown: a connection, QP or pool buffer still held;
               during the run: more QPs than 4 per connection (two sides,
               plus a replacement being connected) or the pools' memory
               regions in the second half more than twice the first half's
               peak plus two slabs (pools grow with load, not with time)
  RSS growth   the resident set grew by more than --rss-growth-mib between
               the sample at 25% of the run and the last one

Prints one line per check and the numbers it compared. Exit status 0 when
every check passed on every stack, 1 otherwise, 2 on usage errors.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

FAULTS = {
    "async+posix": ["ms_inject_socket_failures=500"],
    "async+rdma": [
        "ms_async_rdma_soft_inject_post_failure_probability=0.0001",
        "ms_async_rdma_soft_inject_completion_error_probability=0.0002",
        "ms_async_rdma_soft_inject_qp_error_probability=0.0002",
        "ms_async_rdma_soft_inject_link_drop_probability=0.0001",
        "ms_async_rdma_soft_inject_delay_probability=0.005",
        "ms_async_rdma_soft_inject_delay_max=0.005",
    ],
}
STACKS = {"posix": "async+posix", "rdma": "async+rdma"}


class Checks:
    def __init__(self, stack):
        self.stack = stack
        self.failed = []

    def check(self, name, ok, detail):
        print(f"  [{'ok' if ok else 'FAIL'}] {self.stack}: {name}: {detail}", flush=True)
        if not ok:
            self.failed.append(name)


def run_stack(args, ms_type, workdir):
    c = Checks(ms_type)
    bench = os.path.abspath(args.bench)
    out_json = os.path.join(workdir, f"soak-{ms_type.replace('+', '-')}.json")
    log = os.path.join(workdir, f"soak-{ms_type.replace('+', '-')}.log")
    cmd = [bench, "loopback", "--ms-type", ms_type, "--duration", str(args.seconds), "--warmup", "0",
           "--conns", str(args.conns), "--threads", "1", "--size-dist", "1-64K", "--verify",
           "--drain-timeout", "30", "--json", out_json, "--set", "ms_initial_backoff=0.01",
           "--set", "ms_max_backoff=0.2"]
    for kv in FAULTS[ms_type]:
        cmd += ["--set", kv]
    print(f"soak {ms_type}: {args.seconds} s: {' '.join(cmd)}", flush=True)
    env = dict(os.environ)
    env.pop("CEPH_CONF", None)
    env.pop("CEPH_ARGS", None)
    env["HOME"] = workdir  # no ~/.ceph/ceph.conf of the user's
    start = time.monotonic()
    with open(log, "wb") as lf:
        try:
            rc = subprocess.run(cmd, stdout=lf, stderr=subprocess.STDOUT, cwd=workdir, env=env,
                                timeout=args.seconds + 90).returncode
        except subprocess.TimeoutExpired:
            c.check("stall", False, f"siphon-bench did not finish within {args.seconds + 90} s (killed); log: {log}")
            return c
    elapsed = time.monotonic() - start
    c.check("exit status", rc == 0, f"siphon-bench exited {rc} after {elapsed:.0f} s (log: {log})")
    try:
        with open(out_json) as f:
            doc = json.load(f)
        r = doc["results"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        c.check("report", False, f"no usable JSON report ({e}); log: {log}")
        return c

    v = r["verify"] or {}
    bad = {k: v.get(k, -1) for k in ("lost", "duplicated", "reordered", "corrupted")}
    c.check("loss", v.get("checked", 0) > 0 and all(x == 0 for x in bad.values()),
            f"checked {v.get('checked', 0)}, " + ", ".join(f"{k} {x}" for k, x in bad.items()))
    m = r["messenger"]
    c.check("faults injected", m["faults"] > 0, f"{m['faults']} faults, {m['reconnects']} reconnects")

    series = r["msgs_per_second"]
    longest = cur = 0
    for x in series:
        cur = cur + 1 if x == 0 else 0
        longest = max(longest, cur)
    c.check("stall", longest < args.stall_seconds and len(series) > 0,
            f"longest run without progress {longest} s (bound {args.stall_seconds} s); "
            f"{len(series)} per-second samples, slowest second {min(series) if series else 0:.0f} msgs")

    res = r.get("resources") or {}
    samples = res.get("per_second") or []
    after = res.get("after")
    if len(samples) < 4 or after is None:
        c.check("resources", False, f"{len(samples)} per-second samples, after={'yes' if after else 'no'}")
        return c
    half = len(samples) // 2
    first, second = samples[:half], samples[half:]
    fd_slack = 4 * args.conns
    c.check("fd leak", after["fds"] <= samples[0]["fds"] and
            max(s["fds"] for s in second) <= max(s["fds"] for s in first) + fd_slack,
            f"fds: first second {samples[0]['fds']}, peak first half {max(s['fds'] for s in first)}, "
            f"peak second half {max(s['fds'] for s in second)} (slack {fd_slack}), after shutdown {after['fds']}")
    if ms_type == "async+rdma":
        st = after["stack"]
        held = {k: st.get(k, -1) for k in ("connections", "qps_active", "buffers_in_use")}
        c.check("RDMA leak after shutdown", all(x == 0 for x in held.values()),
                ", ".join(f"{k} {x}" for k, x in held.items()))
        qp_peak = max(s["stack"]["qps_active"] for s in samples)
        c.check("QPs bounded", qp_peak <= 4 * args.conns, f"peak qps_active {qp_peak} (bound {4 * args.conns})")
        mr1 = max(s["stack"]["memory_regions"] for s in first)
        mr2 = max(s["stack"]["memory_regions"] for s in second + [after])
        c.check("MRs bounded", mr2 <= 2 * mr1 + 2,
                f"pool memory regions: peak first half {mr1}, second half and after {mr2} (bound {2 * mr1 + 2}); "
                f"registered {after['stack']['registered_bytes'] >> 20} MiB")
    base = samples[len(samples) // 4]["rss_kib"]
    last = samples[-1]["rss_kib"]
    growth_mib = (last - base) / 1024
    c.check("RSS growth", growth_mib <= args.rss_growth_mib,
            f"{base >> 10} MiB at {samples[len(samples) // 4]['t']:.0f} s -> {last >> 10} MiB at "
            f"{samples[-1]['t']:.0f} s: {growth_mib:+.1f} MiB (bound {args.rss_growth_mib} MiB)")
    return c


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bench", required=True, help="the siphon-bench executable")
    p.add_argument("--seconds", type=int, default=int(os.environ.get("SIPHON_SOAK_SECONDS", "60")),
                   help="seconds of load per stack (default: $SIPHON_SOAK_SECONDS or 60)")
    p.add_argument("--stacks", default="posix,rdma", help="comma-separated: posix, rdma")
    p.add_argument("--conns", type=int, default=4)
    p.add_argument("--rss-growth-mib", type=int, default=64)
    p.add_argument("--stall-seconds", type=int, default=10)
    p.add_argument("--keep", help="directory for the logs and JSON reports (default: a temporary one)")
    args = p.parse_args()
    if args.seconds < 8:
        p.error("--seconds must be at least 8 (the leak checks compare halves of the run)")
    stacks = []
    for s in args.stacks.split(","):
        if s not in STACKS:
            p.error(f"unknown stack '{s}': use posix and/or rdma")
        stacks.append(STACKS[s])
    workdir = args.keep or tempfile.mkdtemp(prefix="siphon-soak-")
    os.makedirs(workdir, exist_ok=True)
    failed = []
    for ms_type in stacks:
        c = run_stack(args, ms_type, workdir)
        failed += [f"{ms_type}: {n}" for n in c.failed]
    if failed:
        print(f"soak FAILED ({'; '.join(failed)}); logs and reports in {workdir}")
        return 1
    print(f"soak passed on {', '.join(stacks)} ({args.seconds} s each); reports in {workdir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
