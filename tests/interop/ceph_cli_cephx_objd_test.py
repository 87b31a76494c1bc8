#!/usr/bin/env python3
"""The stock `ceph` CLI (Debian's ceph-common 16.2.15) authenticating with
cephx against a Siphon daemon (issue 15's acceptance line): siphon-objd named
mon.a, holding a standalone keyring, cephx required, no monitor anywhere.

  ceph -m v2:127.0.0.1:PORT -k KEYRING -n client.admin status

  secure mode (the CLI's default ms_mon_client_mode "secure crc")
      objd logs "authenticated client.admin ... cephx, secure mode"; the CLI
      checked objd's AUTH_SIGNATURE and sent CLIENT_IDENT (its own debug log
      says so), then times out waiting for maps objd does not serve (exit 1,
      "timed out"), and objd drops the mon messages it does not serve
  crc mode (--ms_mon_client_mode crc)
      the same, "crc mode"
  a wrong key
      objd refuses it ("failed the cephx challenge"); the CLI exits 13
      (EACCES, "permission denied") at once
  an entity the keyring lacks
      refused, "not in the keyring"; exit 13
  at the end
      `ceph --admin-daemon` reads auth_accepted (2, or more when the CLI
      reconnected: see authenticated() below) and auth_refused 2 from objd's
      perf counters, equal to objd's log; objd stops on SIGTERM with status 0
      and reports the same totals

  ceph_cli_cephx_objd_test.py SIPHON_OBJD

Fails (never skips) when the ceph CLI is missing. Prints one line per check
and "N passed, N failed"; exits 1 if any failed."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

OBJD = sys.argv[1]
ADMIN_KEY = "AQAA8VNlAAAAABAAABEiM0RVZneImaq7zN3u/w=="  # cephx.md §1.2, client.admin
OTHER_KEY = "AQAA8VNlAAAAABAAoKGio6SlpqeoqaqrrK2urw=="  # osd.0's: wrong for client.admin
CONNECT_TIMEOUT = 10  # seconds the CLI waits for the maps after authenticating


class Checks:
    def __init__(self):
        self.passed, self.failed = 0, 0

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


def clean_env(tmp):
    env = {k: v for k, v in os.environ.items() if k not in ("CEPH_CONF", "CEPH_ARGS")}
    env["HOME"] = tmp
    return env


def write_keyring(path, name, key):
    with open(path, "w") as f:
        f.write(f"[{name}]\n\tkey = {key}\n")
    os.chmod(path, 0o600)


class Objd:
    """siphon-objd as mon.a with a keyring; its stderr is the session log."""

    def __init__(self, tmp, keyring):
        self.tmp = tmp
        self.conf = os.path.join(tmp, "objd.conf")
        with open(self.conf, "w") as f:
            # Port 0 with the range at 0: the kernel picks a free port
            # outside Ceph's 6800-7300, where the real OSDs of the interop
            # tests that ctest runs beside this one listen and are redialled
            # after being killed (tests/unit/objd/objd-cephx.conf).
            f.write("[global]\nms type = async+posix\nauth cluster required = cephx\n"
                    "auth service required = cephx\nms bind port min = 0\nms bind port max = 0\n")
        self.addr_file = os.path.join(tmp, "objd.addr")
        self.asok = os.path.join(tmp, "objd.asok")
        self.out_path, self.err_path = os.path.join(tmp, "objd.out"), os.path.join(tmp, "objd.err")
        self.p = subprocess.Popen(
            [OBJD, "-c", self.conf, "-n", "mon.a", "-k", keyring, "--public_addr", "v2:127.0.0.1:0",
             "--cluster_addr", "v2:127.0.0.1:0", "--addr-file", self.addr_file, "--admin_socket", self.asok,
             "--debug_ms_session", "5", "--debug_siphon_tools", "1"],
            stdout=open(self.out_path, "w"), stderr=open(self.err_path, "w"), env=clean_env(tmp))
        for _ in range(300):
            if os.path.exists(self.addr_file) and os.path.getsize(self.addr_file) > 0:
                self.addr = open(self.addr_file).read().strip()
                return
            if self.p.poll() is not None:
                break
            time.sleep(0.1)
        raise RuntimeError(f"siphon-objd did not start: {self.err()}")

    def err(self):
        return open(self.err_path).read()

    def out(self):
        return open(self.out_path).read()

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
        try:
            return self.p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            return -1


def ceph_cli(tmp, mon, keyring, name, *extra):
    """The CLI with its own debug log (debug_ms 20 shows the handshake)."""
    conf = os.path.join(tmp, "empty.conf")
    open(conf, "a").close()
    log = os.path.join(tmp, f"cli-{time.monotonic_ns()}.log")
    args = ["ceph", "-c", conf, "-m", mon, "-k", keyring, "-n", name, "--connect-timeout", str(CONNECT_TIMEOUT),
            "--log_file", log, "--debug_ms", "20", "--debug_monc", "10", *extra, "status"]
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=CONNECT_TIMEOUT + 60,
                       env=clean_env(tmp))
    return p.returncode, p.stderr.decode(), open(log).read() if os.path.exists(log) else ""


def main():
    if shutil.which("ceph") is None:
        print("FAIL the stock ceph CLI is not installed (Debian ceph-common; tools/dev/install-deps.sh)")
        print("0 passed, 1 failed")
        return 1
    tmp = tempfile.mkdtemp(prefix="siphon-cli-cephx-")
    c = Checks()
    objd = None
    try:
        objd_keyring = os.path.join(tmp, "objd.keyring")
        write_keyring(objd_keyring, "client.admin", ADMIN_KEY)
        admin = os.path.join(tmp, "admin.keyring")
        write_keyring(admin, "client.admin", ADMIN_KEY)
        wrong = os.path.join(tmp, "wrong.keyring")
        write_keyring(wrong, "client.admin", OTHER_KEY)
        eve = os.path.join(tmp, "eve.keyring")
        write_keyring(eve, "client.eve", ADMIN_KEY)
        objd = Objd(tmp, objd_keyring)
        # A monitor's address: nonce 0, as the CLI dials it from -m.
        m = re.fullmatch(r"v2:127\.0\.0\.1:(\d+)/0", objd.addr)
        expect(m, f"objd as mon.a should listen with nonce 0, got {objd.addr}")
        expect(not 6800 <= int(m.group(1)) <= 7300,
               f"objd should listen outside Ceph's OSD port range 6800-7300, got {objd.addr}")
        mon = f"v2:127.0.0.1:{m.group(1)}"

        def authenticated(mode, *extra):
            before = objd.err().count("authenticated client.admin")
            rc, err, log = ceph_cli(tmp, mon, admin, "client.admin", *extra)
            server = objd.err()
            lines = re.findall(r"authenticated client\.admin from 127\.0\.0\.1:\d+ as global_id \d+: cephx, (\w+) mode",
                               server)
            # Usually one session. The CLI may open a second: Pacific's
            # MonClient::tick() takes `now`, sends a keepalive and then checks
            # now - last_keepalive_ack; when the KEEPALIVE2_ACK (which echoes
            # the keepalive's own, later, timestamp) is handled in between,
            # the difference is negative, wraps ("no keepalive since ...
            # (2106-02-07 ... seconds), reconnecting" in its log) and it
            # reconnects. Every new session must be in the mode asked for.
            new = lines[before:]
            expect(len(new) >= 1, f"a new 'authenticated' line expected, objd log:\n{server[-2000:]}")
            expect(all(m == mode for m in new), f"objd says modes {new}, expected {mode}")
            expect(re.search(r"accepted client\.admin from \S+ as global_id \d+: auth cephx, " + mode + " mode",
                             server), "objd did not accept the session after authenticating")
            # The CLI's side: objd's AUTH_SIGNATURE checked out, the session
            # went on to the ident exchange in the agreed mode.
            expect("pre-auth signature success" in log, "the CLI did not verify objd's AUTH_SIGNATURE")
            expect(re.search(r"conn\(\S+ \S+ " + mode + r" :-1 s=SESSION_CONNECTING", log),
                   f"the CLI's connection is not in {mode} mode")
            # It then waits for maps objd does not serve, and gives up.
            expect(rc != 0 and rc != 13, f"the CLI exited {rc}, expected a timeout: {err}")
            expect("timed out" in err, f"the CLI's stderr: {err}")
            expect(re.search(r"dropping a message of type 0x0005 \(0 bytes\) from 8\.-1", server),
                   "objd did not drop the CLI's mon_getmap")

        c.check("secure mode (the CLI's default)", lambda: authenticated("secure"))
        c.check("crc mode (ms_mon_client_mode = crc)", lambda: authenticated("crc", "--ms_mon_client_mode", "crc"))

        def refused(keyring, name, reason):
            t0 = time.monotonic()
            rc, err, _ = ceph_cli(tmp, mon, keyring, name)
            expect(rc == 13, f"the CLI exited {rc}, expected 13 (EACCES): {err}")
            expect("permission denied" in err, f"the CLI's stderr: {err}")
            expect(time.monotonic() - t0 < CONNECT_TIMEOUT + 30, "the refusal did not end the CLI")
            expect(re.search(r"refused the authentication of a peer from 127\.0\.0\.1:\d+: " + reason, objd.err()),
                   f"objd did not log the refusal ({reason}):\n{objd.err()[-2000:]}")

        c.check("a wrong key is refused", lambda: refused(
            wrong, "client.admin",
            r"client\.admin failed the cephx challenge: its key does not match the aes key in the keyring \(keyring " +
            re.escape(objd_keyring) + r"\)"))
        c.check("an entity the keyring lacks is refused", lambda: refused(
            eve, "client.eve", r"client\.eve is not in the keyring \(keyring " + re.escape(objd_keyring) + r"\)"))

        def counters():
            p = subprocess.run(["ceph", "--admin-daemon", objd.asok, "perf", "dump"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, timeout=60)
            expect(p.returncode == 0, f"perf dump: {p.stderr.decode()}")
            perf = json.loads(p.stdout)
            msgr = [v for k, v in perf.items() if k.startswith("siphon-messenger-") and not k.endswith("-cluster")]
            expect(len(msgr) == 1, f"public messenger's counters: {list(perf)}")
            accepted = objd.err().count("authenticated client.admin")  # 2, or more when the CLI reconnected
            expect(accepted >= 2, f"{accepted} 'authenticated' lines in objd's log, expected at least 2")
            expect(msgr[0]["auth_accepted"] == accepted,
                   f"auth_accepted {msgr[0]['auth_accepted']}, expected {accepted} (the log's count)")
            expect(msgr[0]["auth_refused"] == 2, f"auth_refused {msgr[0]['auth_refused']}, expected 2")

        c.check("counted (perf dump through the stock CLI)", counters)

        def clean_stop():
            st = objd.stop()
            expect(st == 0, f"siphon-objd exited {st} after SIGTERM:\n{objd.err()[-2000:]}")
            out = objd.out()
            accepted = objd.err().count("authenticated client.admin")
            expect("siphon-objd mon.a: refused 2 authentication attempt(s)" in out, out)
            expect(f"siphon-objd mon.a: authenticated {accepted} peer(s) with cephx" in out, out)
            expect("served 0 put, 0 get, 0 stat, 0 delete; 0 error replies" in out, out)

        c.check("objd stops cleanly and reports the totals", clean_stop)
    except Exception as e:
        c.failed += 1
        print(f"FAIL setup: {e}", flush=True)
    finally:
        if objd is not None:
            objd.stop()
        if c.failed == 0:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"(logs kept in {tmp})")
    print(f"{c.passed} passed, {c.failed} failed")
    return 1 if c.failed else 0


if __name__ == "__main__":
    sys.exit(main())
