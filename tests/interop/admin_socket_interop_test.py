#!/usr/bin/env python3
"""The stock `ceph --admin-daemon SOCK ...` (Debian's ceph-common) against a
running siphon-objd (issue 17's acceptance for the admin socket):

  help, version, perf dump, perf schema, config get ms_type,
  config set debug_ms 5, messenger dump      valid JSON, the expected keys
  an unknown command                          the CLI prints its error, exit 22
  a silent client and a 1 MiB client          a perf dump by the CLI completes
                                              while the silent one is connected
  after `siphon-bench objd`                   the messenger counters moved by
                                              the messages the bench reports
  an unusable admin_socket directory          a clear error; objd serves on

  admin_socket_interop_test.py SIPHON_OBJD SIPHON_BENCH

Fails (never skips) when the ceph CLI is missing.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

objd, bench = sys.argv[1], sys.argv[2]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)
    return cond


def ceph(sock, *args, timeout=60):
    return subprocess.run(["ceph", "--admin-daemon", sock, *args], capture_output=True, text=True,
                          timeout=timeout)


def ceph_json(sock, *args):
    r = ceph(sock, *args)
    if not check(r.returncode == 0, f"ceph --admin-daemon {' '.join(args)}: exit {r.returncode}: {r.stderr.strip()}"):
        return None
    try:
        return json.loads(r.stdout)
    except ValueError as e:
        check(False, f"ceph --admin-daemon {' '.join(args)}: not JSON ({e}): {r.stdout[:300]!r}")
        return None


def start_objd(tmp, conf, name, *extra):
    addr = os.path.join(tmp, name + ".addr")
    env = {k: v for k, v in os.environ.items() if k not in ("CEPH_CONF", "CEPH_ARGS")}
    out = open(os.path.join(tmp, name + ".out"), "w")
    err = open(os.path.join(tmp, name + ".err"), "w")
    p = subprocess.Popen([objd, "-c", conf, "-i", "0", "--addr-file", addr, *extra], stdout=out, stderr=err, env=env)
    for _ in range(300):
        if os.path.exists(addr):
            return p, open(addr).read().strip()
        if p.poll() is not None:
            break
        time.sleep(0.1)
    raise SystemExit(f"FAIL: siphon-objd did not start: {open(err.name).read()}")


def stop(p):
    p.send_signal(signal.SIGTERM)
    try:
        return p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        return -1


def messenger_counter(perf, name):
    """Sum of `name` over the AsyncMessenger::Worker-<n> loggers, or None."""
    workers = [v for k, v in perf.items() if k.startswith("AsyncMessenger::Worker-")]
    if not workers:
        return None
    return sum(w.get(name, 0) for w in workers)


def main():
    if shutil.which("ceph") is None:
        print("FAIL: the ceph CLI is missing: apt-get install ceph-common (tools/dev/install-deps.sh)")
        return 1
    tmp = tempfile.mkdtemp(prefix="siphon-asok-")
    try:
        conf = os.path.join(tmp, "ceph.conf")
        with open(conf, "w") as f:
            f.write(f"[global]\nrun_dir = {tmp}\nms type = async+posix\nms async op threads = 2\n"
                    "[osd.0]\npublic addr = v2:127.0.0.1:0\ncluster addr = v2:127.0.0.1:0\n"
                    # a kernel-chosen port, outside the 6800-7300 of the real OSDs other tests run
                    "ms bind port min = 0\nms bind port max = 0\n")
        p, addr = start_objd(tmp, conf, "objd")
        sock = os.path.join(tmp, "ceph-osd.0.asok")
        check(os.path.exists(sock), f"no socket at $run_dir/$cluster-$name.asok = {sock}")
        check(oct(os.stat(sock).st_mode & 0o777) == "0o600", "socket mode is not 0600")

        h = ceph_json(sock, "help")
        if h is not None:
            for c in ("perf dump", "perf schema", "config get", "config set", "messenger dump", "version"):
                check(c in h, f"help lacks '{c}'")
        v = ceph_json(sock, "version")
        check(v is not None and "version" in v, f"version: {v}")
        check(ceph_json(sock, "config", "get", "ms_type") == {"ms_type": "async+posix"}, "config get ms_type")
        check(ceph_json(sock, "config", "set", "debug_ms", "5") == {"success": ""}, "config set debug_ms 5")
        check(ceph_json(sock, "config", "get", "debug_ms") == {"debug_ms": "5/5"}, "debug_ms after config set")
        r = ceph(sock, "config", "set", "ms_type", "async+rdma")
        check("ERROR: (1) Operation not permitted" in r.stdout and "restart" in r.stdout,
              f"config set ms_type is refused with the fix: {r.stdout!r}")
        md = ceph_json(sock, "messenger", "dump")
        if md is not None:
            names = [m["name"] for m in md["messengers"]]
            check(names == ["public", "cluster"], f"messenger dump names: {names}")
            check(md["messengers"][0]["addrs"].endswith(addr.split(":", 1)[1]) or addr in md["messengers"][0]["addrs"],
                  f"messenger dump public addrs {md['messengers'][0]['addrs']} vs {addr}")
        schema = ceph_json(sock, "perf", "schema")
        perf0 = ceph_json(sock, "perf", "dump")
        check(isinstance(schema, dict) and isinstance(perf0, dict), "perf schema / perf dump are JSON objects")

        # An unknown command: the CLI refuses it against get_command_descriptions.
        r = ceph(sock, "no_such_command")
        check(r.returncode == 22 and "no valid command found" in r.stderr, f"unknown command: {r.returncode} {r.stderr!r}")
        # Raw, an unknown prefix is Ceph's ERROR: reply.
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(30)
        s.connect(sock)
        s.sendall(b'{"prefix": "no_such_command"}\0')
        raw = b""
        while True:
            b = s.recv(4096)
            if not b:
                break
            raw += b
        s.close()
        check(raw[4:] == b"ERROR: (22) Invalid argument\nunknown command prefix no_such_command\n", f"raw: {raw!r}")

        # Hostile clients: a silent one, one that sends 1 MiB with no terminator.
        silent = socket.socket(socket.AF_UNIX)
        silent.connect(sock)
        flooder = socket.socket(socket.AF_UNIX)
        flooder.connect(sock)

        def flood():
            try:
                flooder.sendall(b"x" * (1 << 20))
            except OSError:
                pass  # dropped at the size bound
        t = threading.Thread(target=flood)
        t.start()
        during = ceph(sock, "perf", "dump")
        check(during.returncode == 0, f"perf dump next to stuck clients: {during.returncode} {during.stderr!r}")
        silent.setblocking(False)
        try:
            data = silent.recv(1)
            check(False, f"the silent client was closed or answered ({data!r}) before perf dump completed")
        except BlockingIOError:
            pass  # still connected, nothing sent to it: perf dump did not wait for it
        t.join(timeout=60)
        silent.close()
        flooder.close()

        # A bench run: the messenger counters move by the messages it reports.
        res = os.path.join(tmp, "bench.json")
        b = subprocess.run([bench, "objd", "-c", conf, "--target", addr, "--count", "50", "--size-dist", "4K",
                            "--conns", "1", "--json", res], capture_output=True, text=True, timeout=300,
                           env={**os.environ, "HOME": tmp})
        check(b.returncode == 0, f"siphon-bench objd: {b.returncode} {b.stderr[-500:]}")
        perf1 = ceph_json(sock, "perf", "dump")
        check(perf0 is not None and perf1 is not None, "perf dump before/after the bench gave no JSON")
        if b.returncode == 0 and perf0 is not None and perf1 is not None:
            sent = json.load(open(res))["results"]["messages"]
            before, after = messenger_counter(perf0, "msgr_recv_messages"), messenger_counter(perf1, "msgr_recv_messages")
            if before is None or after is None:
                check(False, "no AsyncMessenger::Worker-<n> loggers with msgr_recv_messages in perf dump")
            else:
                # Every message the bench sent is one objd received.
                check(after - before >= sent,
                      f"msgr_recv_messages moved {after - before}, bench reports {sent} messages")

        check(stop(p) == 0, "siphon-objd did not exit 0 on SIGTERM")
        check(not os.path.exists(sock), "the socket file is left behind")

        # An admin_socket in a directory that does not exist: said, and served on.
        p, _ = start_objd(tmp, conf, "nodir", "--admin_socket", "/nonexistent-siphon/x.asok")
        err = open(os.path.join(tmp, "nodir.err")).read()
        check("/nonexistent-siphon does not exist" in err and "continuing without an admin socket" in err,
              f"missing directory message: {err!r}")
        check(stop(p) == 0, "siphon-objd without a socket did not exit 0")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"admin_socket_interop: {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
