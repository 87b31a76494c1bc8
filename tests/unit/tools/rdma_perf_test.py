#!/usr/bin/env python3
"""siphon-rdma-perf end to end (issue 5, item 5), on the software fabric.

  rdma_perf_test.py SIPHON_RDMA_PERF [verbs]

Checks that every test runs and reports sane figures in --loopback mode and
across two processes (--server / --client), that the verbs provider without
a device fails with a sentence instead of a crash, and that bad arguments are
usage errors. With `verbs` (the rxe tier, inside the guest) the same runs go
over the kernel's Soft-RoCE device through rdma-core, with the server bound
to $SIPHON_RXE_ADDR, and the no-device check is left out. Figures are never compared with thresholds: this is a
behaviour test; docs/performance.md holds the measurements."""
import os
import re
import socket
import subprocess
import sys
import time

PERF = sys.argv[1]
VERBS = len(sys.argv) > 2 and sys.argv[2] == "verbs"
PROVIDER = ["--provider", "verbs"] if VERBS else []
# The guest runs under TCG (no KVM): fewer iterations keep the rxe run short.
ITERS = 100 if VERBS else 400
HOST = os.environ.get("SIPHON_RXE_ADDR", "192.0.2.1") if VERBS else "127.0.0.1"
ROW = re.compile(r"^(send_lat|send_bw|write_bw|read_bw)\s+(\d+)\s+(\d+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)$")
failures = []


def check(name, cond, detail=""):
    print(f"{'PASS' if cond else 'FAIL'} {name}" + ("" if cond else f": {detail}"), flush=True)
    if not cond:
        failures.append(name)


def run(args, timeout=120):
    p = subprocess.run([PERF, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def rows(out):
    found = {}
    for line in out.splitlines():
        m = ROW.match(line.strip())
        if m:
            found[m.group(1)] = m.groups()
    return found


def figures_ok(found, size, iters):
    """Every test present with the requested size and count; latency rows
    carry positive microseconds, bandwidth rows positive MB/s."""
    if set(found) != {"send_lat", "send_bw", "write_bw", "read_bw"}:
        return f"tests reported: {sorted(found)}"
    for test, g in found.items():
        if int(g[1]) != size or int(g[2]) != iters:
            return f"{test}: size/iters {g[1]}/{g[2]}"
        if test == "send_lat":
            avg, p50, p99 = float(g[3]), float(g[4]), float(g[5])
            if not (0 < p50 <= p99 and avg > 0):
                return f"send_lat avg/p50/p99 {avg}/{p50}/{p99}"
        elif not float(g[6]) > 0:
            return f"{test} MB/s {g[6]}"
    return ""


# 1. Loopback: both sides in one process, two software adapters.
rc, out, err = run(["all", *PROVIDER, "--loopback", "--iters", str(ITERS), "--size", "4096", "--depth", "16"])
check("loopback all: exit 0", rc == 0, err)
why = figures_ok(rows(out), 4096, ITERS)
check("loopback all: four rows with the requested size and count", why == "", why + "\n" + out)

# 2. Two processes (over the soft fabric's TCP links, or over rxe0).
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
server = subprocess.Popen([PERF, "all", *PROVIDER, "--server", "--bind", HOST, "--port", str(port)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
try:
    line = server.stdout.readline().decode()
    check("server: prints its listening address", f":{port}" in line, line)
    outs = {}
    for test in ("send_lat", "send_bw", "write_bw", "read_bw"):
        rc, out, err = run([test, *PROVIDER, "--client", HOST, "--port", str(port), "--iters", str(ITERS), "--size", "1024"])
        check(f"client {test}: exit 0", rc == 0, err)
        outs.update(rows(out))
    why = figures_ok(outs, 1024, ITERS)
    check("client/server: four rows with the requested size and count", why == "", why)
    check("server: still serving after four clients", server.poll() is None, "the server exited")
finally:
    server.kill()
    server.wait()

# 3. No device, bad arguments: one sentence and exit 1, never a signal.
if not VERBS:
    rc, out, err = run(["all", "--provider", "verbs", "--loopback", "--iters", "10"], timeout=30)
    check("verbs without a device: exit 1 with the remedy",
          rc == 1 and ("--provider soft" in err or "rdma_cm" in err), f"exit {rc}: {err}")
for args, needle in ((["all", "--loopback", "--iters", "-1"], "--iters '-1'"),
                     (["all", "--loopback", "--size", "64M"], "--size '64M'"),
                     (["all", "--loopback", "--size", "67108864", "--depth", "4096"], "MiB"),
                     (["sideways", "--loopback"], "unknown argument"),
                     (["all"], "--loopback, --server or --client"),
                     (["all", "--client", "not-an-address"], "--client")):
    rc, out, err = run(args, timeout=30)
    check(f"{' '.join(args)}: exit 1 naming the problem", rc == 1 and needle in err, f"exit {rc}: {err}")

print(f"{'FAILED' if failures else 'passed'}: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
