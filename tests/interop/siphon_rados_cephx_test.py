#!/usr/bin/env python3
"""siphon-rados on a cluster that requires cephx everywhere (issue 15: the
authorizer towards OSDs): one mon from the fixture (--cephx) and one memstore
ceph-osd whose key is in the cluster's keyring, every service requiring
cephx and the OSD requiring secure mode (ms_service_mode = secure).

  siphon_rados_cephx_test.py SIPHON_RADOS CEPH_MON_FIXTURE [SIPHON_BENCH]

siphon-rados authenticates to the mon with client.admin's key, takes the OSD
service ticket the mon hands out, and presents it to osd.0 as a cephx
authorizer; the OSD accepts only secure mode. Cases (each prints PASS/FAIL):
  * put by Siphon, `rados get` byte-identical, and the reverse (4 MiB + 5);
  * stat: the line rados prints;
  * a client that offers only crc mode is refused by the OSD, and says so
    within its op timeout instead of hanging;
  * with SIPHON_BENCH: siphon-bench rados write --no-cleanup over cephx and
    secure mode, then seq reads every object back with every byte verified
    (and stock `rados bench seq` reads them too), cleanup; a keyring with a
    wrong key for client.admin is refused: exit status 13 (rados's for an
    authentication error), a message naming client.admin, no hang."""
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import siphon_ceph_map_object_test as mo  # noqa: E402  (the cluster helpers)

SIPHON, FIXTURE = sys.argv[1], sys.argv[2]
BENCH = sys.argv[3] if len(sys.argv) > 3 else None
run = mo.run
RESULTS = []


def check(name, ok, detail=""):
    RESULTS.append(ok)
    print(f"{'PASS' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}", flush=True)


def bench_cases(c, tmp, rados):
    def bench(*a, timeout=120):
        return run([BENCH, "rados", "-c", c.conf, "--connect-timeout", "20", "--osd-op-timeout", "30", *a],
                   check=False, timeout=timeout)

    js = os.path.join(tmp, "w.json")
    rc, out, err = bench("-p", "rep", "2", "write", "-t", "4", "-b", "16K", "--max-objects", "400",
                         "--no-cleanup", "--json", js)
    w = json.load(open(js)) if rc == 0 else {}
    check("cephx + secure: siphon-bench rados write --no-cleanup",
          rc == 0 and w.get("ops", 0) > 0 and "Total writes made:" in out, f"exit {rc}; {err.strip()[-400:]}")
    js = os.path.join(tmp, "s.json")
    rc, out, err = bench("-p", "rep", "30", "seq", "-t", "4", "--verify", "--json", js)
    r = json.load(open(js)) if os.path.exists(js) else {}
    check("cephx + secure: siphon-bench rados seq reads every object back, every byte verified",
          rc == 0 and r.get("ops") == w.get("ops") and r.get("verify_failures") == 0 and "is not correct" not in err,
          f"exit {rc}; {r.get('ops')} of {w.get('ops')} read, {r.get('verify_failures')} failures; "
          f"{err.strip()[-300:]}")
    rc, out, err = rados("bench", "-p", "rep", "2", "seq", "-t", "4")
    check("cephx: stock rados bench seq reads siphon-bench's objects",
          rc == 0 and "Total reads made:" in out and "is not correct" not in err, f"exit {rc} {err.strip()[-300:]}")
    rc, out, err = bench("-p", "rep", "cleanup")
    check("cephx: siphon-bench rados cleanup", rc == 0 and f"Removed {w.get('ops')} objects" in out,
          f"exit {rc} {out.strip()[-200:]} {err.strip()[-200:]}")
    wrong = os.path.join(tmp, "wrong.keyring")
    key = run(["ceph-authtool", "--gen-print-key"])[1].strip()
    with open(wrong, "w") as f:
        f.write(f"[client.admin]\n\tkey = {key}\n")
    os.chmod(wrong, 0o600)
    t0 = time.time()
    rc, out, err = bench("-k", wrong, "-p", "rep", "1", "write", timeout=90)
    took = time.time() - t0
    check("cephx: a wrong key for client.admin is refused (exit 13, names the entity)",
          rc == 13 and "client.admin" in err and "Total writes" not in out and took < 60,
          f"exit {rc} after {took:.1f}s: {err.strip()[-400:]!r}")


def main():
    tmp = tempfile.mkdtemp(prefix="siphon-rados-cephx-")
    conf = ["osd objectstore = memstore", "memstore device bytes = 134217728",
            f"osd data = {tmp}/osd/$cluster-$id", f"pid file = {tmp}/run/$cluster-$name.pid",
            "osd crush update on start = true", "osd pool default pg autoscale mode = off",
            "osd pool default size = 1", "osd pool default min size = 1",
            "mon allow pool size one = true", "ms service mode = secure"]
    c = mo.start_cluster(FIXTURE, tmp, conf, cephx=True)
    if c is None:
        return 1

    def siphon(*a, timeout=120):
        return run([SIPHON, "-c", c.conf, "--connect-timeout", "20", *a], check=False, timeout=timeout)

    def rados(*a, timeout=120):
        return run(["rados", "-c", c.conf, *a], check=False, timeout=timeout)

    try:
        osd = c.start_osd(with_key=True)
        c.wait_up([osd])
        c.ceph("osd", "pool", "create", "rep", "8", "8", "replicated")
        c.ceph("osd", "pool", "set", "rep", "size", "1", "--yes-i-really-mean-it")
        mo.wait_writable(c, "rep", ["probe"], time.time() + 180)
        print(f"cluster ready (cephx, OSD secure only) at epoch {c.epoch()}", flush=True)

        data = os.urandom(4096) * 1024 + b"12345"
        src = os.path.join(tmp, "in")
        with open(src, "wb") as f:
            f.write(data)
        rc, _, err = siphon("-p", "rep", "--osd-op-timeout", "30", "put", "s", src)
        rc2, _, err2 = rados("-p", "rep", "get", "s", os.path.join(tmp, "out"))
        got = open(os.path.join(tmp, "out"), "rb").read() if rc2 == 0 else b""
        check("cephx + secure: siphon put / rados get", rc == 0 and rc2 == 0 and got == data,
              f"siphon {rc} {err.strip()[-400:]}; rados {rc2} {err2.strip()[-300:]}")
        rc, _, err = rados("-p", "rep", "put", "r", src)
        rc2, _, err2 = siphon("-p", "rep", "--osd-op-timeout", "30", "get", "r", os.path.join(tmp, "back"))
        got = open(os.path.join(tmp, "back"), "rb").read() if rc2 == 0 else b""
        check("cephx + secure: rados put / siphon get", rc == 0 and rc2 == 0 and got == data,
              f"rados {rc} {err.strip()[-300:]}; siphon {rc2} {err2.strip()[-400:]}")
        a = siphon("-p", "rep", "stat", "s")
        b = rados("-p", "rep", "stat", "s")
        check("cephx: stat", a[0] == 0 and b[0] == 0 and a[1].strip() == b[1].strip(),
              f"siphon {a[1].strip()!r} {a[2].strip()[-200:]!r}; rados {b[1].strip()!r}")
        # crc only: the OSD (secure only) refuses the mode; the tool fails
        # within its op timeout with the OSD's refusal, not a hang.
        t0 = time.time()
        rc, _, err = siphon("--ms_client_mode", "crc", "-p", "rep", "--osd-op-timeout", "8", "stat", "s",
                            timeout=90)
        took = time.time() - t0
        check("crc-only client refused by a secure-only OSD", rc != 0 and took < 60,
              f"rc {rc} after {took:.1f}s: {err.strip()[-400:]!r}")
        if BENCH:
            bench_cases(c, tmp, rados)
    finally:
        mo.teardown(c, FIXTURE, tmp)
    return mo.summary(RESULTS)


if __name__ == "__main__":
    sys.exit(main())
