#!/usr/bin/env python3
"""Per-thread CPU and context switches per message of a siphon-bench stream.

    tools/bench/thread_cost.py [--bench PATH] [--rounds N] [--size 4K] [--inflight 16,64]
                               [--stacks posix,rdma,rdma:copy+thread] [--duration S]

For each stack and window, starts `siphon-bench server` and `client
--pattern sink` in two processes, lets the stream settle for 2 s, then reads
every thread's CPU time and voluntary / involuntary context switches from
/proc/PID/task/*/{stat,status} at the start and the end of a 2 s window.
Divided by the messages the client counted in that window (its msgs/s x the
window), that gives each thread's share of a message: which thread costs
what, and how often each one sleeps and is woken (docs/performance.md,
"Where the time goes, per thread"). Threads are grouped by name per process
(`siphon-tcp-N`, `siphon-rdma-N`, `soft-engine`); threads that used less
than 0.05 µs per message are left out.

With --profile, the window is also sampled (`perf record -e cpu-clock -F
4000 -g` on both processes) and each thread's samples are sorted by what
their stack holds: going to sleep and being woken (`epoll_pwait2`), waking
another thread (`eventfd_write`), socket calls, other switches
(preemption), memcpy, other kernel time and user-space work. On a VM
without a PMU cpu-clock is the only event, and the cost of a context
switch shows up where interrupts are enabled again after it.

A stack is posix or rdma, optionally with the software fabric's same-host
link after a colon (rdma:rings, rdma:copy, rdma:tcp: SIPHON_SOFT_LINK in
both processes' environment) and `driven` or `thread` for the engine
(SIPHON_SOFT_ENGINE; driven, on the rings, is the default), joined with +
(rdma:copy+thread, rdma:rings+driven).
"""
import argparse
import collections
import os
import random
import re
import statistics
import subprocess
import sys
import time

TICK_US = 1e6 / os.sysconf("SC_CLK_TCK")


def snapshot(pid):
    """{tid: (name, cpu ticks, voluntary, involuntary)} for one process."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                st = f.read()
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                status = f.read()
        except OSError:
            continue  # the thread ended meanwhile
        name = st[st.index("(") + 1:st.rindex(")")]
        fields = st[st.rindex(")") + 2:].split()
        vol = int(re.search(r"^voluntary_ctxt_switches:\s+(\d+)", status, re.M).group(1))
        inv = int(re.search(r"^nonvoluntary_ctxt_switches:\s+(\d+)", status, re.M).group(1))
        out[tid] = (name, int(fields[11]) + int(fields[12]), vol, inv)
    return out


CLASSES = ("sleep/wake (epoll_pwait2)", "waking a thread (eventfd_write)", "socket calls",
           "other switches (preempted)", "memcpy", "other kernel", "user space")


def classify(stack: str) -> str:
    if "eventfd_write" in stack:
        return CLASSES[1]
    if "do_epoll_wait" in stack or "epoll_pwait" in stack:
        return CLASSES[0]
    if any(x in stack for x in ("tcp_sendmsg", "tcp_recvmsg", "sock_sendmsg", "sock_recvmsg", "__sys_sendmsg",
                                "__sys_recvfrom", "sock_read_iter", "sock_write_iter")):
        return CLASSES[2]
    if "schedule" in stack:
        return CLASSES[3]
    if "memmove" in stack or "memcpy" in stack:
        return CLASSES[4]
    if "[kernel" in stack or "entry_SYSCALL" in stack:
        return CLASSES[5]
    return CLASSES[6]


def profile_window(pids, seconds, path):
    """perf record over both processes for `seconds`; {(side, thread name): Counter of classes}."""
    rec = subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-F", "4000", "-g", "-o", path, "-p",
                          ",".join(str(p) for p in pids.values()), "--", "sleep", str(seconds)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if rec.returncode != 0:
        raise RuntimeError("perf record failed (is perf installed, and perf_event_paranoid <= 1 or root?)")
    out = subprocess.run(["perf", "script", "-i", path, "-F", "pid,comm,ip,sym,dso"],
                         capture_output=True, text=True).stdout
    side_of = {p: k for k, p in pids.items()}
    counts = {}
    for sample in out.split("\n\n"):
        lines = sample.strip().splitlines()
        if not lines:
            continue
        head = lines[0].split()  # "comm pid"
        try:
            pid = int(head[-1])
        except (ValueError, IndexError):
            continue
        name = re.sub(r"-\d+$", "-N", " ".join(head[:-1]))
        key = (side_of.get(pid, "?"), name)
        counts.setdefault(key, collections.Counter())[classify(" ".join(lines))] += 1
    return counts


def one_run(bench, stack, inflight, size, duration, profile=None):
    t, _, opts = stack.partition(":")
    env = dict(os.environ)
    for o in filter(None, opts.split("+")):
        if o in ("driven", "thread"):
            env["SIPHON_SOFT_ENGINE"] = o
        else:
            env["SIPHON_SOFT_LINK"] = o
    port = random.randint(30000, 60000)
    server = subprocess.Popen([bench, "server", "--ms-type", f"async+{t}", "--bind", f"127.0.0.1:{port}",
                               "--once", "--quiet"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    time.sleep(0.5)
    client = subprocess.Popen([bench, "client", "--ms-type", f"async+{t}", "--target", f"127.0.0.1:{port}",
                               "--pattern", "sink", "--size", size, "--inflight", str(inflight),
                               "--duration", str(duration), "--warmup", "1"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        time.sleep(2)
        pids = {"server": server.pid, "client": client.pid}
        before = {k: snapshot(p) for k, p in pids.items()}
        t0 = time.monotonic()
        prof = profile_window(pids, 2, profile) if profile else None
        if not profile:
            time.sleep(2)
        after = {k: snapshot(p) for k, p in pids.items()}
        window = time.monotonic() - t0
        out, _ = client.communicate(timeout=duration + 60)
        server.wait(timeout=30)
    finally:
        for p in (client, server):
            if p.poll() is None:
                p.kill()
    m = re.search(r"msgs/s\s+(\d+)", out)
    if client.returncode != 0 or m is None:
        raise RuntimeError(f"{stack} at {inflight} in flight: the client failed (exit {client.returncode})")
    rate = float(m.group(1))
    msgs = rate * window
    rows = {}
    for side in ("client", "server"):
        for tid, (name, cpu, vol, inv) in after[side].items():
            if tid not in before[side]:
                continue
            _, cpu0, vol0, inv0 = before[side][tid]
            key = (side, re.sub(r"-\d+$", "-N", name))
            r = rows.setdefault(key, [0.0, 0.0, 0.0])
            r[0] += (cpu - cpu0) * TICK_US / msgs
            r[1] += (vol - vol0) / msgs
            r[2] += (inv - inv0) / msgs
    return rate, rows, prof


def main() -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", default=os.path.join(root, "build/release/tools/bench/siphon-bench"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--size", default="4K")
    ap.add_argument("--inflight", default="16,64")
    ap.add_argument("--stacks", default="posix,rdma,rdma:copy+thread")
    ap.add_argument("--duration", type=int, default=6, help="client run, s (>= 5: 1 warm-up + 2 settle + 2 window)")
    ap.add_argument("--profile", action="store_true", help="also sample the window with perf and sort each thread's time")
    a = ap.parse_args()
    try:
        windows = [int(x) for x in a.inflight.split(",")]
    except ValueError:
        windows = []
    if a.rounds < 1 or a.duration < 5 or not windows or min(windows) < 1:
        print("thread_cost.py: --rounds >= 1, --duration >= 5, --inflight a list of whole numbers >= 1",
              file=sys.stderr)
        return 2
    if not os.access(a.bench, os.X_OK):
        print(f"thread_cost.py: {a.bench} is not built "
              "(cmake --preset release && cmake --build build/release --target siphon-bench)", file=sys.stderr)
        return 2
    stacks = a.stacks.split(",")
    results = {}  # (stack, inflight) -> [(rate, rows)]
    for r in range(a.rounds):
        for inflight in windows:
            for stack in stacks:
                results.setdefault((stack, inflight), []).append(
                    one_run(a.bench, stack, inflight, a.size, a.duration,
                            f"/tmp/thread_cost.{os.getpid()}.data" if a.profile else None))
        print(f"round {r + 1} of {a.rounds} done", file=sys.stderr, flush=True)
    print(f"{a.size} one-way, medians of {a.rounds} rounds; per message: each thread's CPU µs, "
          "voluntary and involuntary context switches")
    print()
    print("| stack | in flight | msgs/s | side | thread | CPU µs | voluntary | involuntary |")
    print("|---|---|---|---|---|---|---|---|")
    for (stack, inflight), runs in results.items():
        rate = statistics.median(x[0] for x in runs)
        keys = sorted({k for _, rows, _ in runs for k in rows})
        total = statistics.median(sum(v[0] for v in rows.values()) for _, rows, _ in runs)
        first = True
        for key in keys:
            vals = [rows.get(key, [0.0, 0.0, 0.0]) for _, rows, _ in runs]
            cpu = statistics.median(v[0] for v in vals)
            if cpu < 0.05:
                continue
            head = f"| {stack} | {inflight} | {rate / 1000:.0f}k" if first else "| | |"
            first = False
            print(f"{head} | {key[0]} | {key[1]} | {cpu:.2f} | "
                  f"{statistics.median(v[1] for v in vals):.3f} | {statistics.median(v[2] for v in vals):.3f} |")
        print(f"| | | | both | all threads | **{total:.2f}** | | |")
    if a.profile:
        print()
        print("Where each thread's samples fall (all rounds' samples together, % of that thread's):")
        print()
        print("| stack | in flight | side | thread | " + " | ".join(CLASSES) + " |")
        print("|---|---|---|---|" + "---|" * len(CLASSES))
        for (stack, inflight), runs in results.items():
            merged = {}
            for _, _, prof in runs:
                for key, c in prof.items():
                    merged.setdefault(key, collections.Counter()).update(c)
            for key in sorted(merged):
                c = merged[key]
                n = sum(c.values())
                if n < 100:
                    continue
                print(f"| {stack} | {inflight} | {key[0]} | {key[1]} | " +
                      " | ".join(f"{100 * c[x] / n:.0f}" for x in CLASSES) + " |")
        try:
            os.unlink(f"/tmp/thread_cost.{os.getpid()}.data")
        except OSError:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
