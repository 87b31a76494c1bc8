#!/usr/bin/env python3
"""siphon-bench rados on the acceptance cluster of issue 16: one mon from the
fixture and three memstore ceph-osd daemons, one per CRUSH host, a
replicated pool of size 3 (min_size 2, so IO goes on with an OSD down).

  siphon_bench_rados_cluster_test.py SIPHON_BENCH CEPH_MON_FIXTURE SIPHON_CEPH

Cases (each prints PASS/FAIL):
  * siphon-bench rados write --no-cleanup of 4 MiB objects: `rados ls` lists
    exactly them, `rados stat` gives their size, `rados get` returns each
    byte-identical to rados bench's contents;
  * objects and a metadata object made with `rados put` (rados bench's
    names and contents): siphon-bench rados seq reads back identical bytes;
  * siphon-bench rados cleanup: `rados ls` no longer lists them and
    `rados stat` says ENOENT;
  * an OSD killed (SIGKILL) under a write run at -t 16 and started again
    while the run goes on: the run finishes (exit 0), its OSD client says it
    resent ops, and every op it reported done is then read back with the
    right bytes by siphon-bench rados seq and by stock `rados bench seq`.
Every wait is bounded. Daemons are stopped by pid at the end."""
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import siphon_ceph_map_object_test as mo  # noqa: E402  (the cluster helpers)

BENCH, FIXTURE, SIPHON_CEPH = sys.argv[1], sys.argv[2], sys.argv[3]
run = mo.run
RESULTS = []
POOL = "rep"
MiB = 1 << 20


def check(name, ok, detail=""):
    RESULTS.append(bool(ok))
    print(f"{'PASS' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}", flush=True)


def bench(c, *args, timeout=240):
    return run([BENCH, "rados", "-c", c.conf, "--connect-timeout", "20", *args], check=False, timeout=timeout)


def rados(c, *args, timeout=120):
    return run(["rados", "-c", c.conf, *args], check=False, timeout=timeout)


op_data = mo.rados_bench_op_data


def listing(c):
    rc, out, err = rados(c, "-p", POOL, "ls")
    if rc != 0:
        raise RuntimeError(f"rados ls: {err}")
    return set(out.split())


def wait_active(c, timeout=240):
    """Until one write to every PG of the pool succeeds (no mgr here, so no PG
    states to read): a probe object per PG, placed by siphon-ceph."""
    names = [f"probe{i}" for i in range(200)]
    _, out, _ = run([SIPHON_CEPH, "-c", c.conf, "map-object", POOL, "-"], stdin="\n".join(names) + "\n")
    per_pg = {}
    for n, line in zip(names, out.splitlines()):
        per_pg.setdefault(json.loads(line)["pgid"], n)
    mo.wait_writable(c, POOL, list(per_pg.values()), time.time() + timeout)


def data_cases(c, tmp):
    # --- Siphon writes, the stock tools look ---------------------------------
    js = os.path.join(tmp, "big.json")
    rc, out, err = bench(c, "-p", POOL, "60", "write", "-t", "16", "-b", "4M", "--max-objects", "12",
                         "--no-cleanup", "--run-name", "big", "--json", js)
    w = json.load(open(js)) if rc == 0 else {}
    m = re.search(r"^Object prefix: (\S+)$", out, re.M)
    prefix = m.group(1) if m else "?"
    check("siphon-bench rados write -b 4M --no-cleanup", rc == 0 and w.get("ops") == 12,
          f"exit {rc}, {w.get('ops')} ops; {err.strip()[-300:]}")
    names = {f"{prefix}_object{i}" for i in range(12)}
    listed = listing(c)
    check("rados ls lists the objects written and the metadata object",
          names <= listed and "big" in listed and not {x for x in listed if x.startswith(prefix)} - names,
          f"missing {sorted(names - listed)[:4]}")
    bad = []
    for i in range(12):
        oid = f"{prefix}_object{i}"
        st = rados(c, "-p", POOL, "stat", oid)
        path = os.path.join(tmp, "get")
        rc, _, err = rados(c, "-p", POOL, "get", oid, path)
        if st[0] != 0 or not st[1].strip().endswith(f"size {4 * MiB}"):
            bad.append(f"stat {oid}: {st[0]} {st[1].strip()} {st[2].strip()}")
        elif rc != 0 or open(path, "rb").read() != op_data(i, 4 * MiB):
            bad.append(f"get {oid}: {rc} {err.strip()}")
    check("rados stat and rados get: every object 4 MiB, byte-identical", not bad, "; ".join(bad[:3]))

    # --- the stock tool writes (rados put), Siphon reads -----------------------
    host = socket.gethostname()[:29]
    pid = 424242
    sizes = 1 * MiB + 3
    put_names = []
    for i in range(6):
        oid = f"benchmark_data_{host}_{pid}_object{i}"
        path = os.path.join(tmp, "put")
        with open(path, "wb") as f:
            f.write(op_data(i, sizes))
        rc, _, err = rados(c, "-p", POOL, "put", oid, path)
        if rc != 0:
            raise RuntimeError(f"rados put {oid}: {err}")
        put_names.append(oid)
    with open(os.path.join(tmp, "meta"), "wb") as f:
        f.write(struct.pack("<QiiQ", sizes, 6, pid, sizes))
    rados(c, "-p", POOL, "put", "putrun", os.path.join(tmp, "meta"))
    js = os.path.join(tmp, "putseq.json")
    rc, out, err = bench(c, "-p", POOL, "60", "seq", "-t", "4", "--run-name", "putrun", "--json", js)
    r = json.load(open(js)) if os.path.exists(js) else {}
    check("rados put, then siphon-bench rados seq reads identical bytes",
          rc == 0 and r.get("ops") == 6 and r.get("verify_failures") == 0 and r.get("op_size") == sizes,
          f"exit {rc}, {r.get('ops')} reads, {r.get('verify_failures')} failures; {err.strip()[-300:]}")

    # --- Siphon deletes, the stock tools agree ----------------------------------
    rc1, out1, err1 = bench(c, "-p", POOL, "cleanup", "--run-name", "big")
    rc2, out2, err2 = bench(c, "-p", POOL, "cleanup", "--run-name", "putrun")
    listed = listing(c)
    st = rados(c, "-p", POOL, "stat", f"{prefix}_object0")
    st2 = rados(c, "-p", POOL, "stat", put_names[0])
    left = sorted((names | set(put_names) | {"big", "putrun"}) & listed)
    check("siphon-bench rados cleanup: rados ls lists none, rados stat says ENOENT",
          rc1 == 0 and rc2 == 0 and "Removed 12 objects" in out1 and "Removed 6 objects" in out2 and not left
          and st[0] != 0 and "(2) No such file or directory" in st[2] and st2[0] != 0,
          f"exits {rc1} {rc2}; left {left[:4]}; stat {st[0]} {st[2].strip()!r}; {err1.strip()} {err2.strip()}")


def kill_case(c, tmp, up):
    """An OSD SIGKILLed under a write run and started again while it runs."""
    js = os.path.join(tmp, "kill.json")
    log = open(os.path.join(tmp, "kill.out"), "w+")
    p = subprocess.Popen([BENCH, "rados", "-c", c.conf, "--connect-timeout", "20", "--osd-op-timeout", "120",
                          "-p", POOL, "25", "write", "-t", "16", "-b", "4K", "--no-cleanup", "--run-name", "killrun",
                          "--json", js], stdout=log, stderr=subprocess.PIPE)
    victim = up[1]
    time.sleep(4)
    old = c.osd_pid(victim)
    early = p.poll()
    os.kill(old, signal.SIGKILL)
    t_kill = time.time()
    c.wait_down(victim, timeout=60)
    t_down = time.time()
    c.restart_osd(victim, old)
    c.wait_up([victim], timeout=90)
    t_up = time.time()
    running_at_up = p.poll() is None
    try:
        _, err = p.communicate(timeout=25 + 120 + 60)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        p.kill()
        _, err = p.communicate()
        rc = "hung"
    err = err.decode()
    log.seek(0)
    out = log.read()
    w = json.load(open(js)) if os.path.exists(js) else {}
    client = w.get("client", {})
    print(f"  osd.{victim} killed at +4s, down after {t_down - t_kill:.1f}s, up again after {t_up - t_kill:.1f}s "
          f"(bench still running: {running_at_up}); client {client}", flush=True)
    check("OSD killed and restarted mid-run: the write run finishes, its ops resent",
          early is None and rc == 0 and w.get("ops", 0) > 0 and w.get("error") == 0
          and client.get("session_resets", 0) >= 1 and client.get("resends", 0) >= 1,
          f"exit {rc}, {w.get('ops')} ops; {err.strip()[-400:]}; {out[-300:]}")
    if rc != 0:
        return
    c.wait_stable()
    # Every op reported done: the metadata holds the count, seq reads each.
    js2 = os.path.join(tmp, "killseq.json")
    rc, out, err = bench(c, "-p", POOL, "600", "seq", "-t", "16", "--run-name", "killrun",
                         "--osd-op-timeout", "60", "--json", js2, timeout=400)
    r = json.load(open(js2)) if os.path.exists(js2) else {}
    check("every op reported done is read back with its bytes (siphon-bench rados seq)",
          rc == 0 and r.get("ops") == w["ops"] and r.get("verify_failures") == 0,
          f"exit {rc}: {r.get('ops')} of {w['ops']} read, {r.get('verify_failures')} failures; {err.strip()[-400:]}")
    rc, out, err = rados(c, "bench", "-p", POOL, "600", "seq", "-t", "16", "--run-name", "killrun", timeout=400)
    m = re.search(r"^Total reads made:\s+(\d+)$", out, re.M)
    check("... and by stock rados bench seq",
          rc == 0 and m and int(m.group(1)) == w["ops"] and "is not correct" not in err,
          f"exit {rc}, {m.group(1) if m else '?'} of {w['ops']} read; {err.strip()[-300:]}")


def main():
    tmp = tempfile.mkdtemp(prefix="siphon-bench-rados-cluster-")
    conf = ["osd objectstore = memstore", "memstore device bytes = 1073741824",
            f"osd data = {tmp}/osd/$cluster-$id", f"pid file = {tmp}/run/$cluster-$name.pid",
            "osd crush update on start = false", "osd pool default pg autoscale mode = off"]
    c = mo.start_cluster(FIXTURE, tmp, conf)
    if c is None:
        mo.teardown(mo.Cluster(tmp), FIXTURE, tmp)
        return 1
    try:
        up = [c.start_osd() for _ in range(3)]
        c.wait_up(up)
        c.one_host_each(up)
        c.ceph("osd", "pool", "create", POOL, "16", "16", "replicated")
        c.ceph("osd", "pool", "set", POOL, "size", "3")
        c.ceph("osd", "pool", "set", POOL, "min_size", "2")
        wait_active(c)
        print(f"cluster ready at epoch {c.epoch()}: OSDs {up}", flush=True)
        data_cases(c, tmp)
        kill_case(c, tmp, up)
    except Exception as e:  # a helper's bounded wait ran out, a tool hung
        check("the run itself", False, f"{type(e).__name__}: {e}")
    finally:
        mo.teardown(c, FIXTURE, tmp)
    return mo.summary(RESULTS)


if __name__ == "__main__":
    sys.exit(main())
