#!/usr/bin/env python3
"""siphon-bench rados against a real OSD (issue 16 item 5): one mon from the
fixture, one memstore ceph-osd, a replicated pool of size 1.

  siphon_bench_rados_test.py SIPHON_BENCH CEPH_MON_FIXTURE

Cases (each prints PASS/FAIL):
  * siphon-bench rados write --no-cleanup for a few seconds: the objects it
    reports are in `rados ls`, `rados stat` gives their size, `rados get`
    returns rados bench's contents, the metadata object holds what it wrote;
  * siphon-bench rados seq and rand read them back and every byte verifies;
    stock `rados bench seq` reads them too;
  * --format json: "hints = 1" then one JSON document with rados bench's
    keys (and stock `rados bench --format json`'s keys are all there),
    consistent with the objects in the pool and with Siphon's --json file;
    --show-time: rados bench's time stamps;
  * an object overwritten with other bytes: seq names it, exit status 3;
  * siphon-bench rados seq reads what stock `rados bench write` wrote;
  * siphon-bench rados cleanup removes them all (rados ls);
  * a missing pool: rados's message and exit status 1.
Daemons are stopped by pid at the end."""
import json
import os
import re
import socket
import struct
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import siphon_ceph_map_object_test as mo  # noqa: E402  (the cluster helpers)

BENCH, FIXTURE = sys.argv[1], sys.argv[2]
run = mo.run
RESULTS = []
POOL = "bench"


def check(name, ok, detail=""):
    RESULTS.append(ok)
    print(f"{'PASS' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}", flush=True)


def bench(c, *args, timeout=180):
    return run([BENCH, "rados", "-c", c.conf, "--connect-timeout", "20", *args], check=False, timeout=timeout)


def rados(c, *args, timeout=120):
    return run(["rados", "-c", c.conf, *args], check=False, timeout=timeout)


op_data = mo.rados_bench_op_data


def wait_active(c, timeout=180):
    """64 probe objects: all 8 PGs of the pool, almost surely."""
    mo.wait_writable(c, POOL, [f"probe{i}" for i in range(64)], time.time() + timeout)


def listing(c):
    rc, out, err = rados(c, "-p", POOL, "ls")
    if rc != 0:
        raise RuntimeError(f"rados ls: {err}")
    return set(out.split())


def main():
    tmp = tempfile.mkdtemp(prefix="siphon-bench-rados-")
    conf = ["osd objectstore = memstore", "memstore device bytes = 536870912",
            f"osd data = {tmp}/osd/$cluster-$id", f"pid file = {tmp}/run/$cluster-$name.pid",
            "osd pool default size = 1", "osd pool default min size = 1", "mon allow pool size one = true",
            "osd pool default pg autoscale mode = off"]
    c = mo.start_cluster(FIXTURE, tmp, conf)
    if c is None:
        mo.teardown(mo.Cluster(tmp), FIXTURE, tmp)  # whatever half started
        return 1
    try:
        up = [c.start_osd()]
        c.wait_up(up)
        c.ceph("osd", "pool", "create", POOL, "8", "8", "replicated")
        c.ceph("osd", "pool", "set", POOL, "size", "1", "--yes-i-really-mean-it", check=False)
        wait_active(c)
        print(f"cluster ready at epoch {c.epoch()}: OSD {up}", flush=True)

        # --- write, then look with the stock tools -------------------------
        js = os.path.join(tmp, "write.json")
        svg = os.path.join(tmp, "write.svg")
        rc, out, err = bench(c, "-p", POOL, "3", "write", "-t", "4", "-b", "4096", "--no-cleanup", "--json", js,
                             "--plot", svg)
        print(out, err, flush=True)
        check("siphon-bench rados write exits 0 with rados bench's summary",
              rc == 0 and "Total writes made:" in out and "Average Latency(s):" in out
              and "Latency p50/p90/p99/p99.9/p99.99(s):" in out, f"exit {rc}")
        if rc != 0:
            return 1
        w = json.load(open(js))
        plot = open(svg).read() if os.path.exists(svg) else ""
        check("--plot: an SVG with the latency CDF and ops per second",
              plot.startswith("<svg") and plot.count('<path d="M') == 2 and "ops per second" in plot
              and "rados bench, write" in plot, plot[:200])
        m = re.search(r"^Object prefix: (\S+)$", out, re.M)
        prefix = m.group(1) if m else ""
        host = socket.gethostname()[:29]
        check("the object prefix is rados bench's", re.fullmatch(rf"benchmark_data_{re.escape(host)}_\d+", prefix),
              prefix)
        n = w["ops"]
        names = listing(c)
        ours = {x for x in names if x.startswith(prefix + "_object")}
        expected = {f"{prefix}_object{i}" for i in range(n)}
        check("rados ls lists exactly the objects written, and the metadata object",
              n > 0 and ours == expected and "benchmark_last_metadata" in names,
              f"{n} written, {len(ours)} listed, missing {sorted(expected - ours)[:5]}")
        rc, out, err = rados(c, "-p", POOL, "stat", f"{prefix}_object0")
        check("rados stat: object0 has 4096 bytes", rc == 0 and out.strip().endswith("size 4096"), out + err)
        meta = os.path.join(tmp, "meta")
        rc, _, err = rados(c, "-p", POOL, "get", "benchmark_last_metadata", meta)
        got = open(meta, "rb").read() if rc == 0 else b""
        fields = struct.unpack("<QiiQ", got) if len(got) == 24 else None
        check("the metadata object: object size, ops, pid, op size",
              fields is not None and fields[0] == 4096 and fields[1] == n and fields[3] == 4096
              and prefix.endswith(f"_{fields[2]}"), f"{fields} {err}")
        bad = []
        for i in sorted({0, 1, n // 2, n - 1}):
            path = os.path.join(tmp, f"obj{i}")
            rc, _, err = rados(c, "-p", POOL, "get", f"{prefix}_object{i}", path)
            if rc != 0 or open(path, "rb").read() != op_data(i, 4096):
                bad.append((i, rc, err.strip()))
        check("rados get returns rados bench's contents", not bad, str(bad))

        # --- read back ---------------------------------------------------
        for mode in ("seq", "rand"):
            js = os.path.join(tmp, f"{mode}.json")
            rc, out, err = bench(c, "-p", POOL, "2", mode, "-t", "4", "--json", js)
            r = json.load(open(js)) if os.path.exists(js) else {}
            check(f"siphon-bench rados {mode} reads back what was written, every byte verified",
                  rc == 0 and r.get("ops", 0) > 0 and r.get("verify_failures") == 0 and r.get("error") == 0
                  and "Total reads made:" in out and "is not correct" not in out,
                  f"exit {rc}, {r.get('ops')} reads, {r.get('verify_failures')} failures; {err.strip()[-300:]}")
            if mode == "seq":
                check("seq read at most what was written", r.get("ops", 0) <= n, f"{r.get('ops')} of {n}")
        rc, out, err = rados(c, "bench", "-p", POOL, "2", "seq", "-t", "4", timeout=120)
        check("stock rados bench seq reads what siphon-bench wrote",
              rc == 0 and "Total reads made:" in out and "is not correct" not in out, f"exit {rc} {err.strip()}")

        # --- --format json and --show-time, against rados bench's own ---------
        rc, out, err = rados(c, "bench", "-p", POOL, "2", "seq", "-t", "4", "--format", "json", timeout=120)
        stock_seq = json.loads(out.split("\n", 1)[1]) if rc == 0 and out.startswith("hints = 1\n") else {}
        js = os.path.join(tmp, "fmt.json")
        rc, out, err = bench(c, "-p", POOL, "2", "seq", "-t", "4", "--format", "json", "--json", js)
        try:
            doc = json.loads(out.split("\n", 1)[1]) if out.startswith("hints = 1\n") else None
        except ValueError as e:
            doc = None
            err += f" (not JSON: {e})"
        mine = json.load(open(js)) if os.path.exists(js) else {}
        missing = sorted(set(stock_seq) - set(doc or {}))
        check("seq --format json: rados bench's document, every key stock rados bench prints",
              rc == 0 and doc is not None and stock_seq and not missing
              and all(isinstance(v, str) for k, v in doc.items() if k != "datas")
              and doc["datas"][0]["sec"] == "0",
              f"exit {rc}; missing {missing}; {out[:300]!r} {err.strip()[-300:]}")
        if doc:
            reads = int(doc["total_reads_made"])
            check("seq --format json agrees with the run: reads, sizes, verify, Siphon's --json",
                  reads == mine.get("ops") and 0 < reads <= n and doc["read_size"] == "4096"
                  and doc["object_size"] == "4096" and doc["verify_failures"] == "0"
                  and int(doc["datas"][-1]["finished"]) <= reads
                  and abs(float(doc["average_latency"]) - mine["latency_s"]["avg"]) < 1e-5
                  and float(doc["min_latency"]) <= float(doc["latency_p50"]) <= float(doc["max_latency"])
                  and float(doc["cpu_us_per_op"]) > 0,
                  f"{doc} vs {mine}")
        rc, out, err = rados(c, "bench", "-p", POOL, "1", "write", "-t", "2", "-b", "4096", "--format", "json",
                             "--no-cleanup", "--run-name", "stockjson", timeout=120)
        stock_write = json.loads(out.split("\n", 1)[1]) if rc == 0 and out.startswith("hints = 1\n") else {}
        rc, out, err = bench(c, "-p", POOL, "1", "write", "-t", "2", "-b", "4096", "--format", "json",
                             "--run-name", "jsonrun")
        try:
            doc = json.loads(out.split("\n", 1)[1]) if out.startswith("hints = 1\n") else None
        except ValueError as e:
            doc = None
            err += f" (not JSON: {e})"
        missing = sorted(set(stock_write) - set(doc or {}))
        check("write --format json: rados bench's keys; cleanup's lines on stderr, outside the document",
              rc == 0 and doc is not None and stock_write and not missing
              and doc["concurrent_ios"] == "2" and doc["op_size"] == "4096"
              and re.fullmatch(r"benchmark_data_.+_\d+", doc["object_prefix"])
              and f"Removed {doc['total_writes_made']} objects" in err,
              f"exit {rc}; missing {missing}; {out[:300]!r}; {err.strip()[-300:]}")
        rados(c, "-p", POOL, "cleanup", "--run-name", "stockjson")
        rc, out, err = bench(c, "-p", POOL, "1", "seq", "-t", "2", "--show-time")
        stamp = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}[+-]\d{4} "
        lines = out.splitlines()
        check("--show-time: rados bench's stamp before the table's lines and the summary",
              rc == 0 and lines[0] == "hints = 1" and re.match(stamp + r"  +sec Cur ops", lines[1])
              and any(re.match(stamp + r"Total time run:", x) for x in lines)
              and any(x.startswith("Total reads made:") for x in lines), out[:600] + err[-200:])

        # --- a damaged object: seq says which and exits 3 -------------------
        damaged = f"{prefix}_object1"
        zeros = os.path.join(tmp, "zeros")
        open(zeros, "wb").write(b"\0" * 4096)
        rados(c, "-p", POOL, "put", damaged, zeros)
        rc, out, err = bench(c, "-p", POOL, "2", "seq", "-t", "4")
        check("seq reports an object whose bytes differ (exit 3, rados bench's line on stderr)",
              rc == 3 and f"{damaged} is not correct!" in err and err.count("is not correct!") == 1,
              f"exit {rc}; {err.strip()[-200:]}")

        # --- the other way round -------------------------------------------
        rc, out, err = rados(c, "bench", "-p", POOL, "2", "write", "-t", "4", "-b", "8192", "--no-cleanup",
                             "--run-name", "stockrun", timeout=120)
        check("stock rados bench write", rc == 0, err.strip())
        js = os.path.join(tmp, "seq2.json")
        rc, out, err = bench(c, "-p", POOL, "2", "seq", "-t", "4", "--run-name", "stockrun", "--json", js)
        r = json.load(open(js)) if os.path.exists(js) else {}
        check("siphon-bench rados seq reads what stock rados bench wrote, every byte verified",
              rc == 0 and r.get("ops", 0) > 0 and r.get("verify_failures") == 0 and r.get("op_size") == 8192,
              f"exit {rc}, {r}; {err.strip()[-300:]}")

        # --- cleanup ---------------------------------------------------------
        rc, out, err = bench(c, "-p", POOL, "cleanup")
        left = {x for x in listing(c) if x.startswith(prefix + "_object")}
        check("siphon-bench rados cleanup removes every object and the metadata",
              rc == 0 and f"Removed {n} objects" in out and not left
              and "benchmark_last_metadata" not in listing(c), f"exit {rc}, {len(left)} left: {out} {err}")
        rc, out, err = bench(c, "-p", POOL, "cleanup", "--run-name", "stockrun")
        check("siphon-bench rados cleanup of rados bench's run",
              rc == 0 and not any(x.startswith("benchmark_data_") for x in listing(c)), f"exit {rc} {err}")

        # --- errors --------------------------------------------------------
        rc, out, err = bench(c, "-p", "nopool", "1", "write")
        check("a missing pool: rados's message, exit 1",
              rc == 1 and "error opening pool nopool: (2) No such file or directory" in err, f"exit {rc} {err}")
        rc, out, err = bench(c, "-p", POOL, "1", "seq", "--run-name", "never_written")
        check("seq without a write: rados bench's message",
              rc == 1 and "Must write data before running a read benchmark!" in err, f"exit {rc} {err}")
    finally:
        mo.teardown(c, FIXTURE, tmp)
    return mo.summary(RESULTS)


if __name__ == "__main__":
    sys.exit(main())
