#!/usr/bin/env python3
"""A Siphon daemon inside a cephx Ceph cluster (issue 15, item 3: "validates
the authorizers of clients holding tickets from that mon").

  siphon_objd_cephx_cluster_test.py SIPHON_OBJD SIPHON_BENCH CEPH_MON_FIXTURE

A real ceph-mon 16.2.15 from the fixture (--cephx, auth_service_ticket_ttl
lowered to 20 s so that its rotating keys roll during the test). The test
creates osd.7 with `ceph auth get-or-create osd.7 mon 'allow profile osd' osd
'allow *'`; siphon-objd -n osd.7 -k osd.7.keyring joins as that entity: it
authenticates to the mon with its own key and fetches the rotating osd keys.
siphon-bench objd as client.admin gets its OSD ticket from the same mon and
presents it to the daemon as a cephx authorizer. Cases (PASS/FAIL each):
  * a daemon allowing crc only and one allowing secure only: `--verify` clean,
    the daemon logs the peer as client.admin with the mode;
  * a wrong client.admin key: the mon refuses it, the bench exits non-zero
    naming client.admin; a wrong key that skips the mon (the key-based
    exchange straight to the daemon): refused, reason logged on the daemon;
  * the mon killed (SIGKILL) under the joined daemons: a client that holds
    its ticket, connected and stopped mid-run just before the kill, finishes
    its --verify run while the mon is down; both daemons log the fault of
    their mon session and keep running;
  * the mon restarted on the same port: both daemons authenticate to it
    again and refetch the rotating keys; once the restarted mon has rolled
    them past every key the daemons held before the kill, a new client
    (whose ticket is sealed with a key only the restarted mon could give)
    is served;
  * a daemon whose key the mon does not know does not start, and says why."""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import siphon_ceph_map_object_test as mo  # noqa: E402  (run, summary)

OBJD, BENCH, FIXTURE = sys.argv[1], sys.argv[2], sys.argv[3]
run = mo.run
RESULTS = []
TTL = 20


def check(name, ok, detail=""):
    RESULTS.append(ok)
    print(f"{'PASS' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}", flush=True)


def env():
    e = dict(os.environ)
    e.pop("CEPH_CONF", None)
    e.pop("CEPH_ARGS", None)
    return e


class Objd:
    def __init__(self, tmp, tag, conf, *args):
        self.out = os.path.join(tmp, f"{tag}.out")
        self.err = os.path.join(tmp, f"{tag}.err")
        self.addr_file = os.path.join(tmp, f"{tag}.addr")
        with open(self.out, "w") as o, open(self.err, "w") as e:
            self.p = subprocess.Popen([OBJD, "-c", conf, "--addr-file", self.addr_file, "--debug_ms", "1",
                                       "--debug_ms_session", "5", *args], stdout=o, stderr=e, env=env())
        self.addr = None
        deadline = time.time() + 60
        while time.time() < deadline and self.p.poll() is None:
            if os.path.exists(self.addr_file):
                self.addr = open(self.addr_file).read().strip()
                break
            time.sleep(0.2)

    def text(self):
        return open(self.out).read() + open(self.err).read()

    def stop(self):
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(20)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        return self.p.returncode


def main():
    tmp = tempfile.mkdtemp(prefix="siphon-objd-cephx-cluster-")
    mon_dir = os.path.join(tmp, "mon")
    r = subprocess.run([FIXTURE, "start", mon_dir, "--cephx", "--conf", f"auth service ticket ttl = {TTL}"],
                       capture_output=True, text=True, timeout=180)
    if r.returncode != 0:
        print(f"FAIL: the ceph-mon fixture did not start: {r.stderr.strip()[-800:]}")
        return 1
    conf = os.path.join(mon_dir, "ceph.conf")
    daemons = []
    try:
        def ceph(*a):
            return run(["ceph", "-c", conf, "--connect-timeout", "10", *a], check=False, timeout=60)

        osd_keyring = os.path.join(tmp, "osd.7.keyring")
        rc, _, err = ceph("auth", "get-or-create", "osd.7", "mon", "allow profile osd", "osd", "allow *",
                          "-o", osd_keyring)
        check("ceph auth get-or-create osd.7", rc == 0, err.strip()[-300:])
        os.chmod(osd_keyring, 0o600)

        def objd(tag, *args):
            d = Objd(tmp, tag, conf, "-n", "osd.7", "-k", osd_keyring, "--auth_service_ticket_ttl", str(TTL), *args)
            daemons.append(d)
            return d

        def bench(*a, timeout=120):
            return run([BENCH, "objd", "-c", conf, "--connect-timeout", "20", "--count", "40", "--size-dist",
                        "1K-64K", "--conns", "2", "--inflight", "4", *a], check=False, timeout=timeout)

        crc = objd("crc", "--ms_service_mode", "crc")
        secure = objd("secure", "--ms_service_mode", "secure")
        for d, mode in ((crc, "crc"), (secure, "secure")):
            t = d.text()
            check(f"siphon-objd osd.7 ({mode} only) joins the cluster and fetches the rotating osd keys",
                  d.addr is not None and "cephx tickets from the monitors at" in t and
                  re.search(r"rotating osd keys from the mon \(ids \d+,\d+,\d+\)", t) is not None, t[-600:])
        if crc.addr is None or secure.addr is None:
            return mo.summary(RESULTS)

        for d, mode in ((crc, "crc"), (secure, "secure")):
            rc, out, err = bench("--target", d.addr, "--verify")
            check(f"client.admin with the mon's ticket: siphon-bench objd --verify in {mode} mode",
                  rc == 0 and "a cephx ticket from the monitors" in err, f"exit {rc}: {err.strip()[-500:]}")
            check(f"the daemon admitted client.admin in {mode} mode with cephx",
                  re.search(rf"accepted client\.admin from \S+ as global_id \d+: auth cephx, {mode} mode",
                            d.text()) is not None, d.text()[-500:])

        wrong = os.path.join(tmp, "wrong.keyring")
        key = run(["ceph-authtool", "--gen-print-key"])[1].strip()
        with open(wrong, "w") as f:
            f.write(f"[client.admin]\n\tkey = {key}\n")
        os.chmod(wrong, 0o600)
        rc, out, err = bench("--target", secure.addr, "-k", wrong, "--count", "5")
        check("a wrong client.admin key: refused by the mon, exit non-zero naming client.admin",
              rc != 0 and "client.admin" in err, f"exit {rc}: {err.strip()[-400:]}")
        rc, out, err = bench("--target", secure.addr, "-k", wrong, "--count", "5", "--mon_host", "")
        check("a wrong key straight to the daemon (no mon): refused, exit non-zero",
              rc != 0 and "client.admin" in err, f"exit {rc}: {err.strip()[-400:]}")
        check("... and the daemon logged why",
              re.search(r"refused the authentication of a peer from \S+: client\.admin is not in the keyring",
                        secure.text()) is not None, secure.text()[-500:])

        def fetched(d):
            return [[int(x) for x in f.split(",")]
                    for f in re.findall(r"rotating osd keys from the mon \(ids ([\d,]+)\)", d.text())]

        # The mon goes away under the joined daemons (SIGKILL: no goodbye).
        # A client that holds its ticket already -- siphon-bench, connected
        # to the daemon and stopped mid-run just before the kill -- finishes
        # its run while the mon is down: the daemon needs no mon for clients
        # whose tickets it can check with the keys it has.
        accepted = len(re.findall(r"accepted client\.admin from", secure.text()))
        held = subprocess.Popen([BENCH, "objd", "-c", conf, "--connect-timeout", "20", "--target", secure.addr,
                                 "--verify", "--count", "1000", "--size-dist", "64K-256K", "--conns", "2",
                                 "--inflight", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=env())
        deadline = time.time() + 60
        while time.time() < deadline and held.poll() is None and \
                len(re.findall(r"accepted client\.admin from", secure.text())) < accepted + 2:
            time.sleep(0.05)
        held.send_signal(signal.SIGSTOP)
        mid_run = held.poll() is None and \
            len(re.findall(r"accepted client\.admin from", secure.text())) >= accepted + 2
        known = max(max(ids) for d in (crc, secure) for ids in fetched(d))
        with open(os.path.join(mon_dir, "port")) as f:
            mon_addr = rf"v2:127\.0\.0\.1:{f.read().strip()}/\d+"
        mon_re = "outgoing connection with " + mon_addr
        ready_re = rf"ready with {mon_addr} as global_id (\d+): auth cephx"
        sessions = {d: re.findall(ready_re, d.text()) for d in (crc, secure)}
        with open(os.path.join(mon_dir, "run", "ceph-mon.a.pid")) as f:
            os.kill(int(f.read().strip()), signal.SIGKILL)
        time.sleep(3)
        held.send_signal(signal.SIGCONT)
        try:
            out, err = held.communicate(timeout=180)
        except subprocess.TimeoutExpired:
            held.kill()
            out, err = held.communicate()
        alive = crc.p.poll() is None and secure.p.poll() is None
        check("the mon killed: a client that already had its ticket, connected and stopped mid-run, finishes "
              "its --verify run against the daemon while the mon is down; both daemons keep running",
              mid_run and held.returncode == 0 and alive,
              f"mid-run {mid_run}, exit {held.returncode}, daemons alive {alive}: {err.strip()[-500:]}")
        check("... and both daemons saw their mon session fault",
              all(re.search(mon_re + r" faulted in state ready", d.text()) for d in (crc, secure)),
              secure.text()[-600:])

        # The mon back on the same port, its keys still rolling every TTL
        # seconds; it seals new tickets with its current (middle) key. Once
        # a daemon has fetched a set whose middle key is newer than every
        # key it had before the kill, a new client's ticket needs keys only
        # the restarted mon could give.
        r = subprocess.run([FIXTURE, "restart", mon_dir], capture_output=True, text=True, timeout=180)
        check("ceph-mon-fixture restart (same port)", r.returncode == 0, r.stderr.strip()[-400:])
        deadline = time.time() + 4 * TTL
        while time.time() < deadline and not all(fetched(d)[-1][1] > known for d in (crc, secure)):
            time.sleep(1)
        for d, mode in ((crc, "crc"), (secure, "secure")):
            again = re.findall(ready_re, d.text())
            check(f"the daemon ({mode}) authenticated to the restarted mon again (cephx sessions with the mon, "
                  f"global_ids: {sessions[d]} before the kill, {again} in all)",
                  len(sessions[d]) >= 1 and len(again) > len(sessions[d]), d.text()[-600:])
            rc, out, err = bench("--target", d.addr, "--verify", "--count", "10")
            ids = fetched(d)
            fresh = len(ids[-1]) == 3 and ids[-1][1] > known
            check(f"after the mon restarted and rotated its keys, the daemon reconnected and refetched them "
                  f"(ids {ids[-1]}, all before the kill <= {known}), and serves a new client whose ticket "
                  f"is under a key newer than any it had before ({mode})",
                  rc == 0 and fresh, f"exit {rc}; fetched {ids}; {err.strip()[-300:]}")

        # A daemon the mon does not know: does not start, says why.
        stranger = os.path.join(tmp, "osd.8.keyring")
        with open(stranger, "w") as f:
            f.write(f"[osd.8]\n\tkey = {key}\n")
        os.chmod(stranger, 0o600)
        t0 = time.time()
        r = subprocess.run([OBJD, "-c", conf, "-n", "osd.8", "-k", stranger], capture_output=True, text=True,
                           timeout=90, env=env())
        check("a daemon with a key the mon does not know exits 1 naming itself and the mon",
              r.returncode == 1 and "osd.8 could not authenticate to the monitors" in r.stderr and
              time.time() - t0 < 60, f"exit {r.returncode}: {r.stderr.strip()[-400:]}")
        # ... unless told to stay standalone.
        d = Objd(tmp, "standalone", conf, "-n", "osd.8", "-k", stranger, "--standalone")
        daemons.append(d)
        check("--standalone keeps away from the mon", d.addr is not None and "cephx tickets" not in d.text(),
              d.text()[-400:])
    finally:
        for d in daemons:
            d.stop()
        subprocess.run([FIXTURE, "stop", mon_dir], capture_output=True, timeout=60)
        if all(RESULTS):
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"logs kept in {tmp}")
    return mo.summary(RESULTS)


if __name__ == "__main__":
    sys.exit(main())
