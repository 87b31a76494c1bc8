#!/usr/bin/env python3
"""siphon-ceph against the ceph CLI (issue 4): the same commands on the same
throwaway mon give the same answers.

  siphon_ceph_cli_test.py SIPHON_CEPH CEPH_MON_FIXTURE

Starts one mon with the fixture in a temp directory, runs each check, and
stops the mon by pid at the end (also on failure or interrupt). A mon that
cannot be started fails the test. Prints one line per check and a closing
"N passed, N failed" line; exits 1 if any check failed."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

SIPHON, FIXTURE = sys.argv[1], sys.argv[2]

# Fields of `status -f json` that change from one call to the next, excluded
# by name (path from the top of the document).
STATUS_VOLATILE = {"quorum_age"}


def run(args, timeout=60):
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def strip(doc, names):
    if not isinstance(doc, dict):
        return doc
    return {k: v for k, v in doc.items() if k not in names}


class Checks:
    def __init__(self, conf, mon_host):
        self.conf, self.mon_host = conf, mon_host
        self.passed, self.failed = 0, 0

    def ceph(self, *args):
        return run(["ceph", "-c", self.conf, "--connect-timeout", "10", *args])

    def siphon(self, *args, timeout=60):
        return run([SIPHON, "-c", self.conf, "--connect-timeout", "10", *args], timeout=timeout)

    def check(self, name, fn):
        try:
            fn()
            self.passed += 1
            print(f"PASS {name}", flush=True)
        except Exception as e:  # an assertion or a crash of the check itself
            self.failed += 1
            print(f"FAIL {name}: {e}", flush=True)


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def same_json(c, words, exclude=()):
    rc1, out1, err1 = c.ceph(*words)
    rc2, out2, err2 = c.siphon(*words)
    expect(rc1 == 0, f"ceph {' '.join(words)}: exit {rc1}: {err1}")
    expect(rc2 == 0, f"siphon-ceph {' '.join(words)}: exit {rc2}: {err2}")
    a, b = strip(json.loads(out1), exclude), strip(json.loads(out2), exclude)
    expect(a == b, f"{' '.join(words)} differs:\nceph:   {a}\nsiphon: {b}")
    return a


def main():
    tmp = tempfile.mkdtemp(prefix="siphon-cli-interop-")
    started = False
    try:
        p = subprocess.run([FIXTURE, "start", tmp], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=120)
        out = p.stdout.decode()
        if p.returncode != 0:
            print(f"FAIL the mon did not start:\n{out}")
            print("0 passed, 1 failed")
            return 1
        started = True
        port = int(out.split("port=")[1].split()[0])
        c = Checks(os.path.join(tmp, "ceph.conf"), f"v2:127.0.0.1:{port}")
        rc, _, err = c.ceph("osd", "pool", "create", "cli-interop", "8")
        expect(rc == 0, f"ceph osd pool create: {err}")

        def mon_dump_json():
            same_json(c, ["mon", "dump", "-f", "json"])
            same_json(c, ["mon", "dump", "-f", "json-pretty"])
            # The status string goes to stderr, as ceph prints it.
            expect(c.siphon("mon", "dump", "-f", "json")[2].strip() == "dumped monmap epoch 1",
                   "status string on stderr")

        def status_json():
            same_json(c, ["status", "-f", "json"], STATUS_VOLATILE)

        def status_plain():
            rc1, out1, _ = c.ceph("status")
            rc2, out2, _ = c.siphon("status")
            expect(rc1 == rc2 == 0, "exit codes")
            health = [line for line in out2.splitlines() if "health:" in line or "id:" in line]
            expect(len(health) == 2 and all(h in out1 for h in health), f"health lines:\n{out1}\n{out2}")
            # The whole text is the same but for the quorum's age ("age 0.48s"
            # / "age 3m"), which moves between the two calls.
            age = re.compile(r"\(age [^)]*\)")
            expect(age.sub("(age)", out1) == age.sub("(age)", out2), f"status text differs:\n{out1}\n{out2}")

        def other_commands():
            same_json(c, ["osd", "dump", "-f", "json"])
            same_json(c, ["osd", "pool", "get", "cli-interop", "size", "-f", "json"])
            same_json(c, ["osd", "pool", "ls", "detail", "-f", "json"])
            same_json(c, ["mgr", "dump", "-f", "json"])
            same_json(c, ["version", "-f", "json"])

        def get_versions():
            for what, words in (("monmap", ["mon", "dump"]), ("osdmap", ["osd", "dump"]),
                                ("mgrmap", ["mgr", "dump"])):
                rc, out, err = c.siphon("get-version", what, "-f", "json")
                expect(rc == 0, f"get-version {what}: {err}")
                mine = json.loads(out)["version"]
                rc, out, err = c.ceph(*words, "-f", "json")
                expect(rc == 0, f"ceph {words}: {err}")
                theirs = json.loads(out)["epoch"]
                expect(mine == theirs, f"{what}: siphon-ceph {mine}, ceph {theirs}")

        def errors_match():
            rc1, _, err1 = c.ceph("osd", "pool", "get", "no-such-pool", "size")
            rc2, _, err2 = c.siphon("osd", "pool", "get", "no-such-pool", "size")
            expect(rc1 == rc2 == 2, f"exit codes {rc1} / {rc2}")
            expect(err1.strip() == err2.strip(), f"stderr:\n{err1}\n{err2}")
            rc, _, err = c.siphon("osd", "pool", "frobnicate")
            expect(rc == 22 and "no valid command" in err, f"unknown command: {rc} {err}")

        def msgr20():
            rc1, out1, _ = c.ceph("mon", "dump", "-f", "json")
            rc2, out2, err = c.siphon("--msgr2-rev0", "--debug-ms", "5", "mon", "dump", "-f", "json")
            expect(rc2 == 0, err)
            expect("(msgr2 rev0," in err, "no msgr2.0 connection in the log")
            expect(json.loads(out1) == json.loads(out2), "mon dump over msgr2.0 differs")

        def minus_m():
            rc, out, err = run([SIPHON, "-m", c.mon_host, "--connect-timeout", "10", "fsid", "-f", "json"])
            expect(rc == 0, err)
            expect(json.loads(out) == json.loads(c.ceph("fsid", "-f", "json")[1]), "fsid")

        def v1_only_address():
            rc, _, err = run([SIPHON, "-m", "v1:127.0.0.1:6789", "status"], timeout=20)
            expect(rc == 1 and "msgr1 (v1) only" in err, f"{rc} {err}")

        c.check("mon dump -f json / json-pretty equal to ceph's", mon_dump_json)
        c.check("status -f json equal to ceph's (except quorum_age)", status_json)
        c.check("status (plain): the same text as ceph's (but the quorum age)", status_plain)
        c.check("osd dump, osd pool get, osd pool ls detail, mgr dump, version", other_commands)
        c.check("get-version monmap|osdmap|mgrmap equal to ceph's epochs", get_versions)
        c.check("errors: same exit code and message as ceph", errors_match)
        c.check("msgr2.0 (--msgr2-rev0)", msgr20)
        c.check("-m ADDR instead of a conf", minus_m)
        c.check("a v1-only address is refused with a clear message", v1_only_address)

        def stopped_mon():
            subprocess.run([FIXTURE, "stop", tmp], timeout=60, check=True)
            t0 = time.monotonic()
            rc, _, err = c.siphon("--connect-timeout", "3", "status", timeout=30)
            took = time.monotonic() - t0
            expect(rc != 0, "exit 0 with the mon stopped")
            expect("connection refused" in err and "error connecting to the cluster" in err, err)
            expect(took < 6, f"took {took:.1f} s with --connect-timeout 3")

        c.check("stopped mon: clear error and non-zero exit within --connect-timeout", stopped_mon)

        def cephx_mon():
            xdir = os.path.join(tmp, "cephx")
            p = subprocess.run([FIXTURE, "start", xdir, "--cephx"], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, timeout=120)
            try:
                expect(p.returncode == 0, f"the cephx mon did not start: {p.stdout.decode()}")
                conf = os.path.join(xdir, "ceph.conf")
                keyring = os.path.join(xdir, "keyring")
                os.chmod(keyring, 0o600)
                x = Checks(conf, None)
                # The real ceph CLI gets in with the keyring: the mon is up.
                rc, _, err = x.ceph("fsid")
                expect(rc == 0, f"ceph with cephx: exit {rc}: {err}")
                # The keyring from ceph.conf (keyring = DIR/keyring), then given
                # as ceph's tools take it. Default modes (secure crc): secure.
                same_json(x, ["status", "-f", "json"], STATUS_VOLATILE)
                rc, out, err = x.siphon("-k", keyring, "-n", "client.admin", "--debug-ms", "5",
                                        "mon", "dump", "-f", "json")
                expect(rc == 0, f"siphon-ceph -k -n: exit {rc}: {err}")
                expect("auth cephx, secure mode" in err, "no secure cephx session in the log")
                expect(json.loads(out) == json.loads(x.ceph("mon", "dump", "-f", "json")[1]), "mon dump")
                rc, out, err = x.siphon("--ms_mon_client_mode", "crc", "--keyring", keyring, "--debug-ms", "5", "fsid")
                expect(rc == 0, f"ms_mon_client_mode = crc: exit {rc}: {err}")
                expect("auth cephx, crc mode" in err, "no crc cephx session in the log")
                # A wrong key for client.admin: refused, naming entity and keyring.
                wrong = os.path.join(xdir, "wrong.keyring")
                with open(wrong, "w") as f:
                    f.write("[client.admin]\n\tkey = AQAA8VNlAAAAABAAABEiM0RVZneImaq7zN3u/w==\n")
                os.chmod(wrong, 0o600)
                rc, out, err = x.siphon("-k", wrong, "status", timeout=30)
                expect(rc == 13 and out == "", f"wrong key: exit {rc}, output {out!r}")
                expect("client.admin" in err and wrong in err and "refused" in err, err)
                # An entity the keyring does not hold.
                rc, out, err = x.siphon("-k", keyring, "-n", "client.nobody", "status", timeout=30)
                expect(rc == 13 and "has no key for client.nobody" in err and keyring in err, err)
                # No keyring at all: cephx is dropped, and the cephx-only mon refuses.
                missing = os.path.join(xdir, "no-such.keyring")
                rc, out, err = x.siphon("-k", missing, "status", timeout=30)
                expect(rc == 13 and "client.admin" in err and missing in err, f"no keyring: {rc} {err}")
                # A world-readable keyring works and draws a warning.
                os.chmod(keyring, 0o644)
                rc, out, err = x.siphon("fsid")
                expect(rc == 0 and "readable by everyone" in err and keyring in err, f"{rc} {err}")
            finally:
                subprocess.run([FIXTURE, "stop", xdir], timeout=60)

        c.check("a cephx mon: status as ceph, -k/-n, secure and crc mode; wrong/missing key refused clearly",
                cephx_mon)

        def secure_only_mon():
            sdir = os.path.join(tmp, "secure")
            p = subprocess.run([FIXTURE, "start", sdir, "--cephx", "--conf", "ms_mon_service_mode = secure",
                                "--conf", "ms_mon_cluster_mode = secure"], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, timeout=120)
            try:
                expect(p.returncode == 0, f"the secure-only mon did not start: {p.stdout.decode()}")
                conf = os.path.join(sdir, "ceph.conf")
                os.chmod(os.path.join(sdir, "keyring"), 0o600)
                x = Checks(conf, None)
                # Every byte after AUTH_DONE is AES-GCM: status, the map
                # commands and a long JSON reply all come back as ceph's.
                same_json(x, ["status", "-f", "json"], STATUS_VOLATILE)
                same_json(x, ["mon", "dump", "-f", "json"], [])
                rc, out, err = x.siphon("--debug-ms", "5", "health")
                expect(rc == 0 and "auth cephx, secure mode" in err, f"health: exit {rc}: {err}")
                # crc only: the mon allows no common mode, and Siphon says so.
                rc, out, err = x.siphon("--ms_mon_client_mode", "crc", "status", timeout=30)
                expect(rc != 0 and out == "", f"crc against a secure-only mon: exit {rc}, output {out!r}")
                expect("no common connection mode" in err and "ms_mon_client_mode" in err, err)
                # Secure mode over msgr2.0 frames (one GCM message a frame).
                rc, out, err = x.siphon("--msgr2-rev0", "--debug-ms", "5", "mon", "dump", "-f", "json")
                expect(rc == 0, f"--msgr2-rev0 in secure mode: exit {rc}: {err}")
                expect("(msgr2 rev0," in err and "auth cephx, secure mode" in err,
                       f"no msgr2.0 secure session in the log: {err}")
                expect(json.loads(out) == json.loads(x.ceph("mon", "dump", "-f", "json")[1]), "mon dump over rev0")
                rc1, out1, _ = x.ceph("status", "-f", "json")
                rc2, out2, err = x.siphon("--msgr2-rev0", "status", "-f", "json")
                expect(rc1 == rc2 == 0, f"status over rev0: exit {rc2}: {err}")
                expect(strip(json.loads(out1), STATUS_VOLATILE) == strip(json.loads(out2), STATUS_VOLATILE),
                       "status -f json over rev0 differs")
            finally:
                subprocess.run([FIXTURE, "stop", sdir], timeout=60)

        c.check("a secure-only cephx mon: status, mon dump, health in secure mode (msgr2.1 and 2.0); crc refused "
                "clearly",
                secure_only_mon)
        print(f"{c.passed} passed, {c.failed} failed")
        return 0 if c.failed == 0 else 1
    finally:
        if started:
            subprocess.run([FIXTURE, "stop", tmp], timeout=60)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
