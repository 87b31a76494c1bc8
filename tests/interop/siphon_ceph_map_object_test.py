#!/usr/bin/env python3
"""siphon-ceph map-object against `ceph osd map` (issue 16 item 3): on a
throwaway cluster (one mon from the fixture, three memstore ceph-osd daemons
and two OSD ids without a daemon, so some CRUSH choices are down), every
field of every object's placement is equal.

  siphon_ceph_map_object_test.py SIPHON_CEPH CEPH_MON_FIXTURE

The cluster has OSDs under three hosts with different CRUSH weights, a
reweight below 1, a primary affinity below 1, pg_upmap and pg_upmap_items
entries, replicated pools with power-of-two and other pg_num (one on an
osd-level rule) and an erasure-coded pool. For each pool 1000 random object
names (and 200 in a namespace) go through siphon-ceph (names on stdin) and
through the mon command `ceph osd map` sends (one librados client); the JSON
lines must be equal. A map that changes between the two (OSD peering) makes
the round repeat, never pass. Daemons are stopped by pid at the end."""
import json
import os
import random
import shutil
import string
import subprocess
import sys
import tempfile
import time
import uuid

SIPHON, FIXTURE = sys.argv[1], sys.argv[2]
NAMES_PER_POOL = 1000
NS_NAMES = 200

# `ceph osd map` for many names without starting `ceph` (~0.3 s) per name:
# the same mon command the CLI sends ({"prefix": "osd map", ...}), through
# the system's python3-rados (Debian's Python, which may not be the first
# python3 on PATH), one JSON line per name read from stdin.
CEPH_OSD_MAP = r"""
import json, sys, rados
conf, pool, nspace = sys.argv[1], sys.argv[2], sys.argv[3]
c = rados.Rados(conffile=conf)
c.connect(timeout=10)
for line in sys.stdin:
    name = line.rstrip("\n")
    cmd = {"prefix": "osd map", "pool": pool, "object": name, "format": "json"}
    if nspace:
        cmd["nspace"] = nspace
    ret, out, err = c.mon_command(json.dumps(cmd), b"")
    if ret != 0:
        sys.exit(f"osd map {pool} {name!r}: {ret} {err}")
    print(out.decode().strip(), flush=False)
c.shutdown()
"""


def run(args, stdin=None, timeout=120, check=True):
    p = subprocess.run(args, input=stdin.encode() if stdin is not None else None,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: exit {p.returncode}: {p.stderr.decode().strip()}")
    return p.returncode, p.stdout.decode(), p.stderr.decode()


class Cluster:
    def __init__(self, tmp):
        self.tmp = tmp
        self.conf = os.path.join(tmp, "ceph.conf")
        self.osd_pids = []

    def ceph(self, *args, stdin=None, check=True, timeout=120):
        return run(["ceph", "-c", self.conf, "--connect-timeout", "10", *args], stdin=stdin,
                   check=check, timeout=timeout)

    def epoch(self):
        return json.loads(self.ceph("osd", "dump", "-f", "json")[1])["epoch"]

    def start_osd(self, with_key=False):
        """A new OSD daemon; `with_key` (a cephx cluster): its key, made by
        the mon, is appended to the cluster's keyring (the conf's global
        `keyring`, which ceph-osd reads as well)."""
        osd_uuid = str(uuid.uuid4())
        osd_id = int(self.ceph("osd", "new", osd_uuid)[1].strip())
        if with_key:
            _, key, _ = self.ceph("auth", "get-or-create", f"osd.{osd_id}", "mon", "allow profile osd",
                                  "osd", "allow *", "mgr", "allow profile osd")
            with open(os.path.join(self.tmp, "keyring"), "a") as f:
                f.write("\n" + key)
        os.makedirs(os.path.join(self.tmp, "osd", f"ceph-{osd_id}"), exist_ok=True)
        run(["ceph-osd", "-c", self.conf, "-i", str(osd_id), "--mkfs", "--osd-uuid", osd_uuid])
        run(["ceph-osd", "-c", self.conf, "-i", str(osd_id)])  # daemonizes, writes its pid file
        pidfile = os.path.join(self.tmp, "run", f"ceph-osd.{osd_id}.pid")
        for _ in range(100):
            if os.path.exists(pidfile):
                self.osd_pids.append(int(open(pidfile).read().strip()))
                break
            time.sleep(0.1)
        return osd_id

    def wait_up(self, ids, timeout=90):
        deadline = time.time() + timeout
        while time.time() < deadline:
            osds = json.loads(self.ceph("osd", "dump", "-f", "json")[1])["osds"]
            if all(any(o["osd"] == i and o["up"] == 1 for o in osds) for i in ids):
                return
            time.sleep(0.5)
        raise RuntimeError(f"OSDs {ids} not up within {timeout}s (logs in {self.tmp}/log)")

    def wait_stable(self, quiet=3.0, timeout=60):
        """Waits until the OSDMap epoch has not moved for `quiet` seconds."""
        deadline = time.time() + timeout
        last, since = self.epoch(), time.time()
        while time.time() < deadline:
            time.sleep(0.5)
            e = self.epoch()
            if e != last:
                last, since = e, time.time()
            elif time.time() - since >= quiet:
                return e
        return last

    def osd_pid(self, osd_id):
        """The running daemon of osd.`osd_id` (its pid file), or None."""
        pidfile = os.path.join(self.tmp, "run", f"ceph-osd.{osd_id}.pid")
        try:
            pid = int(open(pidfile).read().strip())
        except (OSError, ValueError):
            return None
        return pid if pid in self.osd_pids else None

    def wait_down(self, osd_id, timeout=60):
        """Until the mon has marked osd.`osd_id` down; raises after `timeout` s."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            osds = json.loads(self.ceph("osd", "dump", "-f", "json")[1])["osds"]
            if any(o["osd"] == osd_id and o["up"] == 0 for o in osds):
                return
            time.sleep(0.5)
        raise RuntimeError(f"osd.{osd_id} not marked down within {timeout}s")

    def restart_osd(self, osd_id, old_pid):
        """Starts osd.`osd_id` again after its daemon `old_pid` died. memstore
        lost its data with the process: the store is made again with the same
        uuid, and the OSD rejoins empty (its PGs recover from the others)."""
        osd_dir = os.path.join(self.tmp, "osd", f"ceph-{osd_id}")
        fsid_file = os.path.join(osd_dir, "fsid")
        osd_uuid = open(fsid_file).read().strip() if os.path.exists(fsid_file) else None
        shutil.rmtree(osd_dir, ignore_errors=True)
        os.makedirs(osd_dir)
        run(["ceph-osd", "-c", self.conf, "-i", str(osd_id), "--mkfs"] + (["--osd-uuid", osd_uuid] if osd_uuid else []))
        run(["ceph-osd", "-c", self.conf, "-i", str(osd_id)])
        pidfile = os.path.join(self.tmp, "run", f"ceph-osd.{osd_id}.pid")
        self.osd_pids = [p for p in self.osd_pids if p != old_pid]
        for _ in range(100):
            try:
                pid = int(open(pidfile).read().strip() or 0)
            except (OSError, ValueError):
                pid = 0
            if pid and pid != old_pid:
                self.osd_pids.append(pid)
                return pid
            time.sleep(0.1)
        raise RuntimeError(f"osd.{osd_id} wrote no new pid file (logs in {self.tmp}/log)")

    def one_host_each(self, osds):
        """Puts each OSD under a host bucket of its own (host0, host1, ...)
        below root=default, so a replicated pool's copies land on different
        OSDs."""
        for i, osd in enumerate(osds):
            h = f"host{i}"
            self.ceph("osd", "crush", "add-bucket", h, "host")
            self.ceph("osd", "crush", "move", h, "root=default")
            self.ceph("osd", "crush", "add", f"osd.{osd}", "1.0", f"host={h}", "root=default")

    def stop_osds(self):
        for pid in self.osd_pids:
            try:
                with open(f"/proc/{pid}/comm") as f:
                    if f.read().strip() != "ceph-osd":
                        continue
                os.kill(pid, 15)
            except (OSError, ValueError):
                pass
        for pid in self.osd_pids:
            for _ in range(50):
                if not os.path.exists(f"/proc/{pid}"):
                    break
                time.sleep(0.1)
            else:
                try:
                    os.kill(pid, 9)
                except OSError:
                    pass


def rados_bench_op_data(index, size):
    """rados bench's contents of op `index`: "I'm the %16dth op!", NUL, 'z'."""
    head = (b"I'm the %16dth op!" % index)[:size - 1] + b"\0"
    return head + b"z" * (size - len(head))


def start_cluster(fixture, tmp, conf, cephx=False):
    """The fixture's mon in `tmp` with extra ceph.conf lines (`cephx`: the
    cluster requires cephx): a Cluster, or None after printing the fixture's
    output and a FAIL line."""
    args = [fixture, "start", tmp] + (["--cephx"] if cephx else [])
    for line in conf:
        args += ["--conf", line]
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=180)
    if p.returncode != 0:
        print(p.stdout.decode())
        print("FAIL the mon fixture did not start")
        return None
    return Cluster(tmp)


def teardown(c, fixture, tmp):
    """Stops the OSDs and the mon by pid and removes `tmp`."""
    c.stop_osds()
    subprocess.run([fixture, "stop", tmp], timeout=60)
    shutil.rmtree(tmp, ignore_errors=True)


def summary(results):
    """Prints the count line; the exit status (1 if any failed or none ran)."""
    failed = results.count(False)
    print(f"{len(results) - failed} passed, {failed} failed")
    return 1 if failed or not results else 0


def wait_writable(c, pool, names, deadline):
    """Until `rados create` then `rados stat` of every name in `pool` succeed
    (there is no mgr to report PG states), then removes them; raises at
    `deadline` (time.time())."""
    pending = sorted(names)
    while pending and time.time() < deadline:
        pending = [n for n in pending
                   if run(["rados", "-c", c.conf, "-p", pool, "--rados-osd-op-timeout", "8", "create", n],
                          check=False)[0] not in (0, 1)
                   or run(["rados", "-c", c.conf, "-p", pool, "--rados-osd-op-timeout", "8", "stat", n],
                          check=False)[0] != 0]
        if pending:
            time.sleep(1)
    if pending:
        raise RuntimeError(f"pool {pool}: {pending} not writable in time (their PGs are not active)")
    for n in names:
        run(["rados", "-c", c.conf, "-p", pool, "rm", n], check=False)


def random_names(rng, n):
    alphabet = string.ascii_letters + string.digits + "._-:/ "
    names = set()
    while len(names) < n:
        length = rng.choice([1, 2, 5, 11, 12, 13, 24, 31, 40, 64]) if rng.random() < 0.5 else rng.randint(1, 80)
        name = "".join(rng.choice(alphabet) for _ in range(length)).strip()
        if name:
            names.add(name)
    return sorted(names)


def compare(c, pool, names, nspace=None, rounds=4):
    """siphon-ceph and ceph on the same names; repeats while the epochs differ."""
    ns_args = ["-N", nspace] if nspace else []
    for attempt in range(rounds):
        rc, out, err = run([SIPHON, "-c", c.conf, "--connect-timeout", "10", "map-object", pool, "-",
                            *ns_args], stdin="\n".join(names) + "\n")
        mine = [json.loads(line) for line in out.splitlines()]
        _, out2, err2 = run(["/usr/bin/python3", "-c", CEPH_OSD_MAP, c.conf, pool, nspace or ""],
                            stdin="\n".join(names) + "\n", timeout=300)
        theirs = [json.loads(line) for line in out2.splitlines()]
        if len(theirs) != len(names):
            raise AssertionError(f"ceph answered {len(theirs)} of {len(names)} lines: {err2[-500:]}")
        if len(mine) != len(names):
            raise AssertionError(f"siphon-ceph printed {len(mine)} of {len(names)} lines: {err[-500:]}")
        epochs = {d["epoch"] for d in mine} | {d["epoch"] for d in theirs}
        if len(epochs) > 1:
            print(f"  {pool}: the map moved during the round (epochs {sorted(epochs)}); again", flush=True)
            c.wait_stable()
            continue
        for n, a, b in zip(names, mine, theirs):
            if a != b:
                raise AssertionError(f"{pool} {n!r}{' ns ' + nspace if nspace else ''}:\n"
                                     f"  ceph:        {json.dumps(b)}\n  siphon-ceph: {json.dumps(a)}")
        return theirs
    raise AssertionError(f"{pool}: the OSDMap kept changing for {rounds} rounds")


def main():
    tmp = tempfile.mkdtemp(prefix="siphon-mapobj-interop-")
    if subprocess.run(["sh", "-c", "command -v ceph-osd"], stdout=subprocess.DEVNULL).returncode != 0:
        here = os.path.dirname(os.path.abspath(FIXTURE))
        subprocess.run([os.path.join(here, "..", "..", "tools", "dev", "install-deps.sh")],
                       env={**os.environ, "SIPHON_DEPS": "interop"}, check=True)
    conf = ["osd objectstore = memstore", "memstore device bytes = 134217728",
            f"osd data = {tmp}/osd/$cluster-$id", f"pid file = {tmp}/run/$cluster-$name.pid",
            "osd crush update on start = false", "osd pool default pg autoscale mode = off",
            "mon osd allow primary affinity = true"]
    args = [FIXTURE, "start", tmp]
    for line in conf:
        args += ["--conf", line]
    c = Cluster(tmp)
    failed = 0
    try:
        p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=180)
        if p.returncode != 0:
            print(p.stdout.decode())
            print("FAIL the mon fixture did not start")
            return 1
        up = [c.start_osd() for _ in range(3)]
        down = [int(c.ceph("osd", "create")[1].strip()) for _ in range(2)]  # ids without a daemon
        c.wait_up(up)
        # hostA: osd.0 (up), osd.3 (down); hostB: osd.1; hostC: osd.2, osd.4 (down)
        for h in ("hostA", "hostB", "hostC"):
            c.ceph("osd", "crush", "add-bucket", h, "host")
            c.ceph("osd", "crush", "move", h, "root=default")
        for osd, w, h in ((up[0], "1.0", "hostA"), (down[0], "2.0", "hostA"), (up[1], "1.5", "hostB"),
                          (up[2], "1.0", "hostC"), (down[1], "0.7", "hostC")):
            c.ceph("osd", "crush", "add", f"osd.{osd}", w, f"host={h}", "root=default")
        c.ceph("osd", "crush", "rule", "create-replicated", "rep_host", "default", "host")
        c.ceph("osd", "crush", "rule", "create-replicated", "rep_osd", "default", "osd")
        c.ceph("osd", "pool", "create", "rep3", "32", "32", "replicated", "rep_host")
        c.ceph("osd", "pool", "set", "rep3", "size", "3")
        c.ceph("osd", "pool", "create", "rep2", "12", "12", "replicated", "rep_host")
        c.ceph("osd", "pool", "set", "rep2", "size", "2", "--yes-i-really-mean-it")
        c.ceph("osd", "pool", "create", "osd20", "20", "20", "replicated", "rep_osd")
        c.ceph("osd", "erasure-code-profile", "set", "ec21", "k=2", "m=1", "crush-failure-domain=host")
        c.ceph("osd", "pool", "create", "ec21", "8", "8", "erasure", "ec21")
        c.ceph("osd", "reweight", str(up[1]), "0.5")
        c.ceph("osd", "primary-affinity", f"osd.{up[2]}", "0.5")
        c.ceph("osd", "set-require-min-compat-client", "luminous")
        c.ceph("osd", "pg-upmap-items", "1.0", str(up[0]), str(up[1]))
        c.ceph("osd", "pg-upmap-items", "2.3", str(up[2]), str(up[0]), str(up[1]), str(up[2]))
        c.ceph("osd", "pg-upmap", "1.4", str(up[2]), str(up[1]), str(up[0]))
        c.ceph("osd", "pg-upmap", "2.5", str(up[1]), str(up[0]))
        epoch = c.wait_stable()
        print(f"cluster ready at epoch {epoch}: OSDs up {up}, daemon-less {down}", flush=True)

        rng = random.Random(16)
        checks = []
        for pool in ("rep3", "rep2", "osd20", "ec21"):
            checks.append((pool, None, random_names(rng, NAMES_PER_POOL)))
        checks.append(("rep3", "ns1", random_names(rng, NS_NAMES)))
        for pool, ns, names in checks:
            label = f"{pool}{' ns ' + ns if ns else ''} ({len(names)} objects)"
            try:
                res = compare(c, pool, names, ns)
                nonempty = sum(1 for d in res if d["up"])
                primaries = {d["acting_primary"] for d in res}
                if nonempty == 0 or len(primaries) < 2:
                    raise AssertionError(f"degenerate placements (non-empty up {nonempty}, primaries {primaries})")
                print(f"PASS map-object {label}: all fields equal; {nonempty} with OSDs, "
                      f"primaries {sorted(primaries)}", flush=True)
            except Exception as e:  # an assertion, a timeout, a crash of the check itself
                failed += 1
                print(f"FAIL map-object {label}: {e}", flush=True)

        # A pool that does not exist: ceph's errno and message.
        rc1, _, err1 = c.ceph("osd", "map", "nope", "foo", check=False)
        rc2, _, err2 = run([SIPHON, "-c", c.conf, "map-object", "nope", "foo"], check=False)
        if rc1 == rc2 and err1.strip() == err2.strip():
            print(f"PASS missing pool: exit {rc2}, {err2.strip()!r}")
        else:
            failed += 1
            print(f"FAIL missing pool: ceph {rc1} {err1.strip()!r}, siphon-ceph {rc2} {err2.strip()!r}")
    finally:
        c.stop_osds()
        subprocess.run([FIXTURE, "stop", tmp], timeout=60)
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{5 + 1 - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
