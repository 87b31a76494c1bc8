#!/usr/bin/env python3
"""A real Prometheus server scrapes siphon-objd's /metrics endpoint
(docs/observability.md, "Prometheus"; issue 17's acceptance):

  prometheus_scrape_test.py SIPHON_OBJD SIPHON_BENCH OBJD_CONF INSTALL_DEPS DASHBOARD

1. siphon-objd starts with siphon_metrics_endpoint = 127.0.0.1:0 and says
   where it listens; siphon-bench objd moves its messenger counters.
2. `promtool check metrics` on the endpoint's output: no error (exit 1 is a
   failure). Its lint findings (exit 3) may only be the ones Ceph's own
   names cause, which the endpoint keeps on purpose so Ceph dashboards work:
   counters without _total, _sum/_count outside summaries, camelCase
   (AsyncMessenger, Siphon_RDMAWorker).
3. Debian's `prometheus` starts on 127.0.0.1 with a temporary config
   scraping the endpoint every second; the test reads the target's health
   and a messenger counter back through the HTTP query API, and the value
   must be the one the endpoint serves (the daemon is idle by then) and at
   least the number of messages the bench sent.
4. Every query of the Grafana dashboard (tools/grafana) is valid PromQL for
   that server, and the messenger panels' queries return this daemon's data
   (the RDMA and NIC panels are empty on this TCP daemon).

Needs Debian's prometheus (SIPHON_DEPS=interop tools/dev/install-deps.sh);
installs it when missing, as ceph-mon-fixture installs ceph-mon. Exit 0 pass,
1 fail."""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.error
import urllib.request

objd, bench, conf, install_deps, dashboard = sys.argv[1:6]
tmp = tempfile.mkdtemp(prefix="siphon-prom-test.")
procs = []
MSGR = re.compile(r'^(ceph_AsyncMessenger_Worker(?:_[0-9]+)?_msgr_recv_messages)(\{[^}]*\}) (\S+)$')
# promtool's lint messages that Ceph's names cause (reference §4.1).
CEPH_NAMING_LINTS = ('counter metrics should have "_total" suffix',
                     "metric names should be written in 'snake_case' not 'camelCase'",
                     'non-histogram and non-summary metrics should not have "_sum" suffix',
                     'non-histogram and non-summary metrics should not have "_count" suffix')


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    for name in sorted(os.listdir(tmp)):
        if name.endswith((".out", ".err", ".log")):
            with open(os.path.join(tmp, name), errors="replace") as f:
                lines = f.readlines()[-30:]
            print(f"--- {name}", file=sys.stderr)
            sys.stderr.write("".join(lines))
    sys.exit(1)


def cleanup():
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    shutil.rmtree(tmp, ignore_errors=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read().decode()


def wait_for(what, fn, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        v = fn()
        if v:
            return v
        time.sleep(0.2)
    fail(f"{what} within {seconds} s")


def msgr_total(text):
    return sum(float(m.group(3)) for m in map(MSGR.match, text.splitlines()) if m)


def main():
    if not shutil.which("prometheus") or not shutil.which("promtool"):
        subprocess.run([install_deps], env=dict(os.environ, SIPHON_DEPS="interop"), check=False,
                       stdout=sys.stderr)
        if not shutil.which("prometheus"):
            fail("Debian's prometheus is not installed: SIPHON_DEPS=interop tools/dev/install-deps.sh (as root)")
    env = {k: v for k, v in os.environ.items() if k not in ("CEPH_CONF", "CEPH_ARGS")}
    env["HOME"] = tmp

    # 1. The daemon and some traffic.
    addr_file = os.path.join(tmp, "addr")
    with open(os.path.join(tmp, "objd.out"), "w") as out, open(os.path.join(tmp, "objd.err"), "w") as err:
        procs.append(subprocess.Popen([objd, "-c", conf, "-i", "0", "--addr-file", addr_file,
                                       "--siphon_metrics_endpoint", "127.0.0.1:0"], stdout=out, stderr=err, env=env))

    def listening():
        if procs[0].poll() is not None:
            fail(f"siphon-objd exited with status {procs[0].returncode}")
        if not os.path.exists(addr_file) or os.path.getsize(addr_file) == 0:
            return None
        m = re.search(r"Prometheus metrics at http://127\.0\.0\.1:([0-9]+)/metrics",
                      open(os.path.join(tmp, "objd.out")).read())
        return m and int(m.group(1))
    port = wait_for("siphon-objd did not listen and report its /metrics address", listening, 60)
    target = open(addr_file).read().strip()
    result = os.path.join(tmp, "result.json")
    with open(os.path.join(tmp, "bench.out"), "w") as out, open(os.path.join(tmp, "bench.err"), "w") as err:
        st = subprocess.run([bench, "objd", "-c", conf, "--target", target, "--count", "100", "--size-dist", "4K",
                             "--conns", "2", "--json", result], stdout=out, stderr=err, env=env, timeout=120)
    if st.returncode != 0:
        fail(f"siphon-bench objd exited with status {st.returncode}")
    messages = json.load(open(result))["results"]["messages"]

    status, text = get(f"http://127.0.0.1:{port}/metrics")
    with open(os.path.join(tmp, "metrics.log"), "w") as f:
        f.write(text)
    served = msgr_total(text)
    if not any(map(MSGR.match, text.splitlines())):
        fail("the endpoint serves no ceph_AsyncMessenger_Worker*_msgr_recv_messages series "
             "(are the messenger's loggers registered?)")
    if served < messages:
        fail(f"msgr_recv_messages over the workers is {served}, but the bench sent {messages} messages")
    print(f"endpoint: msgr_recv_messages {served:.0f} after {messages} bench messages")

    # 2. promtool.
    p = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    findings = [l for l in (p.stdout + p.stderr).splitlines() if l.strip()]
    if p.returncode not in (0, 3):
        fail(f"promtool check metrics exit {p.returncode}: " + "\n".join(findings[:20]))
    other = [l for l in findings if not any(k in l for k in CEPH_NAMING_LINTS)]
    if other:
        fail("promtool findings other than Ceph's naming: " + "\n".join(other[:20]))
    print(f"promtool check metrics: exit {p.returncode}, {len(findings)} lint notes, all from Ceph's names")

    # 3. A real Prometheus server.
    web = free_port()
    cfg = os.path.join(tmp, "prometheus.yml")
    with open(cfg, "w") as f:
        f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                "scrape_configs:\n  - job_name: siphon\n    static_configs:\n"
                f"      - targets: ['127.0.0.1:{port}']\n")
    with open(os.path.join(tmp, "prometheus.log"), "w") as log:
        procs.append(subprocess.Popen(["prometheus", f"--config.file={cfg}",
                                       f"--storage.tsdb.path={os.path.join(tmp, 'data')}",
                                       f"--web.listen-address=127.0.0.1:{web}"],
                                      stdout=log, stderr=subprocess.STDOUT, cwd=tmp))

    def query(q):
        if procs[1].poll() is not None:
            fail(f"prometheus exited with status {procs[1].returncode}")
        try:
            _, body = get(f"http://127.0.0.1:{web}/api/v1/query?" + urllib.parse.urlencode({"query": q}))
        except OSError:
            return None
        d = json.loads(body)
        return d["data"]["result"] if d.get("status") == "success" and d["data"]["result"] else None

    up = wait_for("Prometheus did not report the target up", lambda: query('up{job="siphon"} == 1'), 90)
    print(f"prometheus: target up: {up[0]['metric']}")
    q = 'sum({__name__=~"ceph_AsyncMessenger_Worker(_[0-9]+)?_msgr_recv_messages",ceph_daemon="osd.0",job="siphon"})'
    res = wait_for("Prometheus had no messenger counter", lambda: query(q), 60)
    stored = float(res[0]["value"][1])
    if stored != served:
        fail(f"Prometheus holds msgr_recv_messages {stored}, the endpoint served {served}")
    print(f"prometheus: {q} = {stored:.0f} (the endpoint's value)")

    # 4. The dashboard's queries against this server.
    d = json.load(open(dashboard))
    exprs = [(p["title"], t["expr"]) for p in d["panels"] for t in p.get("targets", [])]
    with_data = 0
    for title, e in exprs:
        e = e.replace("$__rate_interval", "1m").replace("$step", "1s").replace("$daemon", ".*")
        e = e.replace("$device", ".*")
        try:
            _, body = get(f"http://127.0.0.1:{web}/api/v1/query?" + urllib.parse.urlencode({"query": e}))
        except urllib.error.HTTPError as err:
            fail(f"dashboard panel '{title}': Prometheus refused {e}: {err.read().decode()[:300]}")
        r = json.loads(body)
        if r.get("status") != "success":
            fail(f"dashboard panel '{title}': {e}: {r}")
        if title.startswith(("Messages/s", "Bytes/s")) and not r["data"]["result"]:
            # rate() needs two samples in its window: wait for the next scrapes.
            r["data"]["result"] = wait_for(f"dashboard panel '{title}' showed no data for this daemon: {e}",
                                           lambda: query(e), 30)
        with_data += bool(r["data"]["result"])
    print(f"dashboard: {len(exprs)} queries valid, {with_data} with data on this TCP daemon")
    print("passed")


try:
    main()
finally:
    cleanup()
