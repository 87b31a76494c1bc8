#!/usr/bin/env python3
"""siphon-rados against the rados CLI on a real cluster (issue 16 item 4):
one mon from the fixture and three memstore ceph-osd daemons, one per CRUSH
host, a replicated pool (size 3) and an erasure-coded pool (2+1).

  siphon_rados_test.py SIPHON_RADOS CEPH_MON_FIXTURE SIPHON_CEPH

Cases (each prints PASS/FAIL):
  * put by Siphon, `rados get` byte-identical; `rados put`, get by Siphon
    identical -- sizes 0, 1, 4 KiB, 4 MiB and 4 MiB + 5 (two ops);
  * stat: the line rados prints; rm: the object leaves `rados ls` and
    `rados stat` says ENOENT; create on an existing object: EEXIST;
  * a missing pool and a missing object: rados's message and exit status;
  * the EC pool: put/get through the primary shard;
  * `ceph osd pause`: a put waits, and completes once `ceph osd unpause`
    clears the flags; with --osd-op-timeout a put and a stat fail naming
    pausewr and pauserd;
  * a full pool (`ceph osd set-full-ratio`, with the backfillfull and
    nearfull ratios, under the OSDs' use: they report full and the mon sets
    the pool's FULL flag): a put waits and completes
    once the ratio is back, a put with --osd-op-timeout fails naming the
    full pool, a stat goes through;
  * a frozen primary (SIGSTOP): the op fails after --osd-op-timeout with a
    message naming the PG, the OSD and the map epoch;
  * an OSD killed under writes in flight to it: each siphon-rados either
    reports success -- and the object is then readable with exactly its bytes
    (after the OSD is restarted) -- or reports an error; ops are resent.
Daemons are stopped by pid at the end."""
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import siphon_ceph_map_object_test as mo  # noqa: E402  (the cluster helpers)

SIPHON, FIXTURE, SIPHON_CEPH = sys.argv[1], sys.argv[2], sys.argv[3]
run = mo.run
RESULTS = []


def check(name, ok, detail=""):
    RESULTS.append(ok)
    print(f"{'PASS' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}", flush=True)


def siphon(c, *args, timeout=120):
    return run([SIPHON, "-c", c.conf, "--connect-timeout", "20", *args], check=False, timeout=timeout)


def rados(c, *args, timeout=120):
    return run(["rados", "-c", c.conf, *args], check=False, timeout=timeout)


def put_in_background(c, obj, path):
    """A siphon-rados put left running (to be finished by finish())."""
    return subprocess.Popen([SIPHON, "-c", c.conf, "--connect-timeout", "20", "-p", "rep", "put", obj, path],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def finish(p, timeout):
    """Waits for a background siphon-rados (killed after `timeout` s); its stderr."""
    try:
        _, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        _, err = p.communicate()
    return err.decode().strip()


def wait_active(c, timeout=240):
    """Until one write to every PG of every pool succeeds (no mgr here, so no
    PG states to read): a probe object per PG, placed by siphon-ceph."""
    deadline = time.time() + timeout
    for pool in ("rep", "ec"):
        names = [f"probe{i}" for i in range(400)]
        _, out, _ = run([SIPHON_CEPH, "-c", c.conf, "map-object", pool, "-"], stdin="\n".join(names) + "\n")
        per_pg = {}
        for n, line in zip(names, out.splitlines()):
            per_pg.setdefault(json.loads(line)["pgid"], n)
        mo.wait_writable(c, pool, list(per_pg.values()), deadline)


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def primary_of(c, pool, obj):
    out = c.ceph("osd", "map", pool, obj, "-f", "json")[1]
    d = json.loads(out)
    return d["acting_primary"], d["pgid"]


def main():
    tmp = tempfile.mkdtemp(prefix="siphon-rados-interop-")
    conf = ["osd objectstore = memstore", "memstore device bytes = 268435456",
            f"osd data = {tmp}/osd/$cluster-$id", f"pid file = {tmp}/run/$cluster-$name.pid",
            "osd crush update on start = false", "osd pool default pg autoscale mode = off"]
    args = [FIXTURE, "start", tmp]
    for line in conf:
        args += ["--conf", line]
    c = mo.Cluster(tmp)
    uuids = {}
    try:
        p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=180)
        if p.returncode != 0:
            print(p.stdout.decode())
            print("FAIL the mon fixture did not start")
            return 1
        up = [c.start_osd() for _ in range(3)]
        c.wait_up(up)
        c.one_host_each(up)
        c.ceph("osd", "pool", "create", "rep", "16", "16", "replicated")
        c.ceph("osd", "pool", "set", "rep", "size", "3")
        c.ceph("osd", "pool", "set", "rep", "min_size", "2")
        c.ceph("osd", "erasure-code-profile", "set", "ec21", "k=2", "m=1", "crush-failure-domain=host")
        c.ceph("osd", "pool", "create", "ec", "8", "8", "erasure", "ec21")
        wait_active(c)
        print(f"cluster ready at epoch {c.epoch()}: OSDs {up}", flush=True)

        rng = random.Random(4)
        # --- data both ways, every size ---
        for size in (0, 1, 4096, 4 << 20, (4 << 20) + 5):
            data = bytes(rng.getrandbits(8) for _ in range(min(size, 4096))) * (size // 4096 + 1)
            data = data[:size]
            src = os.path.join(tmp, f"in{size}")
            write(src, data)
            rc, _, err = siphon(c, "-p", "rep", "put", f"s{size}", src)
            out = os.path.join(tmp, f"out{size}")
            rc2, _, err2 = rados(c, "-p", "rep", "get", f"s{size}", out)
            check(f"siphon put / rados get, {size} B", rc == 0 and rc2 == 0 and read(out) == data,
                  f"siphon {rc} {err.strip()[-300:]}; rados {rc2} {err2.strip()[-300:]}")
            rc, _, err = rados(c, "-p", "rep", "put", f"r{size}", src)
            out2 = os.path.join(tmp, f"back{size}")
            rc2, _, err2 = siphon(c, "-p", "rep", "get", f"r{size}", out2)
            check(f"rados put / siphon get, {size} B", rc == 0 and rc2 == 0 and read(out2) == data,
                  f"rados {rc} {err.strip()[-300:]}; siphon {rc2} {err2.strip()[-300:]}")
            # stat: the same line (size and mtime) from both tools, for both objects
            for obj in (f"s{size}", f"r{size}"):
                a = siphon(c, "-p", "rep", "stat", obj)
                b = rados(c, "-p", "rep", "stat", obj)
                check(f"stat {obj}", a[0] == 0 and b[0] == 0 and a[1].strip() == b[1].strip(),
                      f"siphon {a[1].strip()!r} {a[2].strip()[-200:]!r}; rados {b[1].strip()!r}")

        # --- rm, create, errors ---
        rc, _, err = siphon(c, "-p", "rep", "rm", "s1", "r1")
        ls = rados(c, "-p", "rep", "ls")[1].split()
        st = rados(c, "-p", "rep", "stat", "s1")
        check("rm: gone from rados ls and rados stat", rc == 0 and "s1" not in ls and "r1" not in ls
              and "s4096" in ls and st[0] != 0 and "(2) No such file or directory" in st[2],
              f"rc {rc} {err.strip()!r}; ls {sorted(ls)}")
        for what, sargs in (("missing object: get", ["-p", "rep", "get", "nosuch", os.path.join(tmp, "x")]),
                            ("missing object: stat", ["-p", "rep", "stat", "nosuch"]),
                            ("missing object: rm", ["-p", "rep", "rm", "nosuch"]),
                            ("missing pool", ["-p", "nopool", "stat", "x"]),
                            ("create of an existing object", ["-p", "rep", "create", "s4096"])):
            a = siphon(c, *sargs)
            b = rados(c, *sargs)
            check(what, a[0] == b[0] != 0 and a[2].strip() == b[2].strip(),
                  f"siphon {a[0]} {a[2].strip()!r}; rados {b[0]} {b[2].strip()!r}")
        rc, _, err = siphon(c, "-p", "rep", "create", "fresh")
        st = rados(c, "-p", "rep", "stat", "fresh")
        check("create of a new object", rc == 0 and st[0] == 0 and st[1].strip().endswith("size 0"),
              f"{rc} {err.strip()!r} {st[1].strip()!r}")

        # --- erasure-coded pool ---
        data = bytes(rng.getrandbits(8) for _ in range(10000))
        write(os.path.join(tmp, "ecin"), data)
        rc, _, err = siphon(c, "-p", "ec", "put", "ecobj", os.path.join(tmp, "ecin"))
        rc2, _, err2 = rados(c, "-p", "ec", "get", "ecobj", os.path.join(tmp, "ecout"))
        rc3, _, err3 = siphon(c, "-p", "ec", "get", "ecobj", os.path.join(tmp, "ecout2"))
        check("EC pool put/get", rc == rc2 == rc3 == 0 and read(os.path.join(tmp, "ecout")) == data
              and read(os.path.join(tmp, "ecout2")) == data, f"{err.strip()} {err2.strip()} {err3.strip()}")

        # --- `ceph osd pause` (pauserd, pausewr): a write waits while the map says so, as rados's
        # does, then goes out ---
        pin = os.path.join(tmp, "pin")
        write(pin, b"written after the pause")
        c.ceph("osd", "pause")
        p = put_in_background(c, "paused1", pin)
        time.sleep(5)
        waited = p.poll() is None
        c.ceph("osd", "unpause")
        perr = finish(p, 60)
        rc2, _, err2 = rados(c, "-p", "rep", "get", "paused1", os.path.join(tmp, "pout"))
        check("osd pause: a put waits while the flag is set and completes once it is cleared",
              waited and p.returncode == 0 and rc2 == 0 and read(os.path.join(tmp, "pout")) == b"written after the pause",
              f"waited {waited}, rc {p.returncode} {perr!r}, rados get {rc2} {err2.strip()!r}")
        c.ceph("osd", "pause")
        try:
            rc, _, err = siphon(c, "--osd-op-timeout", "3", "-p", "rep", "put", "paused2", pin, timeout=60)
            rc3, _, err3 = siphon(c, "--osd-op-timeout", "3", "-p", "rep", "stat", "paused1", timeout=60)
        finally:
            c.ceph("osd", "unpause")
        check("osd pause: the op timeout names the flag (pausewr for a write, pauserd for a read)",
              rc == 1 and "pausewr" in err and rc3 == 1 and "pauserd" in err3, f"put rc {rc} {err.strip()!r}, "
              f"stat rc {rc3} {err3.strip()!r}")

        # --- a full pool: the OSDs, measured against a full ratio lowered under their use, report
        # themselves full and the mon sets the FULL flag of the pools on them; a write waits, as
        # rados's does, a read does not, and the write goes out once the ratio is back ---
        def pool_flags(name):
            pools = json.loads(c.ceph("osd", "dump", "-f", "json")[1])["pools"]
            return next(p["flags_names"] for p in pools if p["pool_name"] == name).split(",")

        def wait_flag(name, present, timeout=90):
            deadline = time.time() + timeout
            while time.time() < deadline:
                if ("full" in pool_flags(name)) == present:
                    return True
                time.sleep(0.5)
            return False

        fin = os.path.join(tmp, "fin")
        write(fin, b"written once the pool had room again")
        # The OSDs and the mon raise a full ratio that is under the backfillfull or nearfull ratio
        # back up to it ("full ratio(s) out of order"), so all three go down, and back up after.
        ratios = (("set-nearfull-ratio", "0.0006", "0.85"), ("set-backfillfull-ratio", "0.0008", "0.90"),
                  ("set-full-ratio", "0.001", "0.95"))
        for cmd, low, _ in ratios:
            c.ceph("osd", cmd, low)
        try:
            flagged = wait_flag("rep", True)
            p = put_in_background(c, "full1", fin)
            rc, _, err = siphon(c, "--osd-op-timeout", "3", "-p", "rep", "put", "full2", fin, timeout=60)
            rc3, _, err3 = siphon(c, "--osd-op-timeout", "10", "-p", "rep", "stat", "paused1", timeout=60)
            waited = p.poll() is None
        finally:
            for cmd, _, normal in reversed(ratios):
                c.ceph("osd", cmd, normal)
        cleared = wait_flag("rep", False)
        perr = finish(p, 90)
        rc2, _, err2 = rados(c, "-p", "rep", "get", "full1", os.path.join(tmp, "fout"))
        check("full pool: the mon flags the pool full under a lowered full ratio, and clears it after",
              flagged and cleared, f"flagged {flagged}, cleared {cleared}")
        check("full pool: a write times out naming the full pool; a read goes through",
              rc == 1 and "the pool is full" in err and rc3 == 0,
              f"put rc {rc} {err.strip()!r}, stat rc {rc3} {err3.strip()!r}")
        check("full pool: a put waits while the pool is full and completes once it has room",
              waited and p.returncode == 0 and rc2 == 0
              and read(os.path.join(tmp, "fout")) == b"written once the pool had room again",
              f"waited {waited}, rc {p.returncode} {perr!r}, rados get {rc2} {err2.strip()!r}")

        # --- a frozen primary: the timeout names the PG, the OSD and the epoch ---
        victim = up[0]
        obj = next(f"frozen{i}" for i in range(1000) if primary_of(c, "rep", f"frozen{i}")[0] == victim)
        _, pgid = primary_of(c, "rep", obj)
        pid = c.osd_pids[up.index(victim)]
        os.kill(pid, signal.SIGSTOP)
        try:
            t0 = time.time()
            rc, _, err = siphon(c, "--osd-op-timeout", "3", "-p", "rep", "stat", obj, timeout=60)
            took = time.time() - t0
        finally:
            os.kill(pid, signal.SIGCONT)
        check("frozen primary: op timeout", rc == 1 and "(110) Connection timed out" in err
              and f"pg {pgid}" in err and f"osd.{victim}" in err and "osdmap epoch" in err and took < 40,
              f"rc {rc} after {took:.1f}s: {err.strip()!r}")
        c.wait_stable()
        wait_active(c)

        # --- an OSD killed under writes in flight to it ---
        victim = up[1]
        idx = up.index(victim)
        pid = c.osd_pids[idx]
        names = [f"kill{i}" for i in range(40)]
        on_victim = [n for n in names if primary_of(c, "rep", n)[0] == victim]
        payloads = {n: bytes(rng.getrandbits(8) for _ in range(8192)) for n in names}
        for n in names:
            write(os.path.join(tmp, n), payloads[n])
        os.kill(pid, signal.SIGSTOP)  # ops to it wait in its socket...
        procs = {n: subprocess.Popen([SIPHON, "-c", c.conf, "--osd-op-timeout", "120", "-p", "rep", "put", n,
                                      os.path.join(tmp, n)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                 for n in names}
        time.sleep(3)
        os.kill(pid, signal.SIGKILL)  # ...and die with it: the client must resend elsewhere
        c.osd_pids[idx] = -1
        reported = {}
        for n, p in procs.items():
            try:
                _, err = p.communicate(timeout=180)
                reported[n] = (p.returncode, err.decode().strip())
            except subprocess.TimeoutExpired:
                p.kill()
                reported[n] = (-1, "hung")
        # MOSDBackoff: with the EC pool's min_size at 3, its PGs are peered but
        # not active while an OSD is down; their primaries block the client
        # (BLOCK), and unblock it when the OSD is back. Writes started now
        # must wait (not fail, not report done), then succeed.
        c.ceph("osd", "pool", "set", "ec", "min_size", "3")
        deadline = time.time() + 90
        while time.time() < deadline:
            osds = json.loads(c.ceph("osd", "dump", "-f", "json")[1])["osds"]
            if any(o["osd"] == victim and o["up"] == 0 for o in osds):
                break
            time.sleep(1)
        ec_names = [f"blocked{i}" for i in range(4)]
        for n in ec_names:
            payloads[n] = bytes(rng.getrandbits(8) for _ in range(6000))
            write(os.path.join(tmp, n), payloads[n])
        ec_procs = {n: subprocess.Popen([SIPHON, "-c", c.conf, "--osd-op-timeout", "240", "--debug-siphon-tools", "5",
                                         "-p", "ec", "put", n, os.path.join(tmp, n)],
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE) for n in ec_names}
        time.sleep(10)
        early = {n: p.poll() for n, p in ec_procs.items() if p.poll() is not None}
        # restart the OSD (memstore lost its data: made again; it backfills)
        c.restart_osd(victim, pid)
        c.wait_up([victim])
        wait_active(c, timeout=240)
        bad = []
        done = 0
        for n in names:
            rc, err = reported[n]
            if rc != 0:
                continue  # reported as failed: allowed, never as done
            done += 1
            out = os.path.join(tmp, n + ".read")
            rc2, _, err2 = rados(c, "-p", "rep", "get", n, out)
            if rc2 != 0 or read(out) != payloads[n]:
                bad.append(f"{n}: reported done but rados get gave {rc2} {err2.strip()!r}")
        ec_out = {}
        for n, p in ec_procs.items():
            try:
                _, err = p.communicate(timeout=240)
                ec_out[n] = (p.returncode, err.decode())
            except subprocess.TimeoutExpired:
                p.kill()
                ec_out[n] = (-1, "hung")
        ec_bad = []
        for n, (rc, err) in ec_out.items():
            out = os.path.join(tmp, n + ".read")
            rc2, _, err2 = rados(c, "-p", "ec", "get", n, out)
            if rc != 0 or rc2 != 0 or read(out) != payloads[n]:
                ec_bad.append(f"{n}: siphon {rc} {err.strip()[-300:]!r}; rados get {rc2} {err2.strip()!r}")
        blocked = sum(1 for _, err in ec_out.values() if "blocks pg" in err)
        check("MOSDBackoff: EC writes held while their PGs are inactive, done after UNBLOCK",
              not early and not ec_bad and blocked > 0,
              f"finished before the OSD returned: {early}; {blocked}/{len(ec_names)} saw a BLOCK; bad {ec_bad}")
        failed_ones = {n: r for n, r in reported.items() if r[0] != 0}
        check("OSD killed mid-run: every op reported done is readable with its bytes",
              not bad and done > 0 and len(on_victim) > 0,
              f"{done}/{len(names)} done ({len(on_victim)} had osd.{victim} as primary); failed {failed_ones}; "
              f"bad {bad}")
    finally:
        c.osd_pids = [p for p in c.osd_pids if p > 0]
        c.stop_osds()
        subprocess.run([FIXTURE, "stop", tmp], timeout=60)
        shutil.rmtree(tmp, ignore_errors=True)
    failed = RESULTS.count(False)
    print(f"{len(RESULTS) - failed} passed, {failed} failed")
    return 1 if failed or not RESULTS else 0


if __name__ == "__main__":
    sys.exit(main())
