#!/usr/bin/env bash
# metrics.sh — the Prometheus endpoint on the real rxe0 inside the rxe guest
# (tests/rxe/run-in-guest; docs/observability.md, "Prometheus"):
#
#   1. `siphon-bench server` over async+rdma with siphon_metrics_endpoint set
#      serves /metrics, and the NIC part names rxe0 port 1 (the device the
#      stack chose: ms_async_rdma_device_name is empty) with its sysfs
#      hw_counters, port state ACTIVE.
#   2. A client transfer over rxe0; a second scrape shows rxe0's packet
#      counters (sent and received: client and server share rxe0 here) moved
#      by at least the number of messages sent -- each message is at least one
#      RoCE packet.
#
# usage: metrics.sh SIPHON_BENCH
set -euo pipefail

if [ "${SIPHON_RXE_GUEST:-}" != 1 ]; then
  echo "metrics.sh runs inside the rxe guest: tests/rxe/run-in-guest -- $0 SIPHON_BENCH" >&2
  exit 2
fi
bench=${1:?usage: metrics.sh SIPHON_BENCH}
DEV=${SIPHON_RXE_DEV:-rxe0}
ADDR=${SIPHON_RXE_ADDR:-192.0.2.1}
out=${SIPHON_RXE_OUT:-$(mktemp -d)}
work=$(mktemp -d)
server_pid=
log() { echo "rxe-metrics: $*"; }
cleanup() {
  [ -z "$server_pid" ] || kill "$server_pid" 2>/dev/null || true
  rm -rf -- "$work"
}
trap cleanup EXIT
rm -f -- "$out"/metrics-*
fail() {
  log "FAILED: $*"
  local f
  for f in "$out"/metrics-*; do
    [ -s "$f" ] || continue
    echo "---- $(basename "$f") (last 40 lines) ----"
    tail -n 40 "$f"
  done
  exit 1
}
# value FILE SERIES: the sample value of one exact series (empty when absent).
value() { awk -v s="$2" '$1 == s { print $2 }' "$1"; }
scrape() {  # FILE
  python3 - "http://$ADDR:9926/metrics" "$1" <<'PY' || fail "cannot scrape http://$ADDR:9926/metrics"
import sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=30) as r:
    assert r.status == 200, r.status
    assert r.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8", r.headers["Content-Type"]
    open(sys.argv[2], "wb").write(r.read())
PY
}

printf '%s\n' "[global]" "ms_type = async+rdma" "public_addr = $ADDR" "ms_async_rdma_polling_us = 100" \
  "ms_async_op_threads = 2" "siphon_metrics_endpoint = $ADDR:9926" >"$work/rdma.conf"

(cd "$work" && exec "$bench" -c "$work/rdma.conf" server --bind "$ADDR:6810" --duration 240) \
  >"$out/metrics-server.out" 2>"$out/metrics-server.err" &
server_pid=$!
for i in $(seq 1 600); do
  grep -q "server listening on" "$out/metrics-server.err" 2>/dev/null && break
  kill -0 "$server_pid" 2>/dev/null || fail "the server exited before listening"
  [ "$i" -lt 600 ] || fail "the server did not listen within 60 s"
  sleep 0.1
done
grep -q "Prometheus metrics at http://$ADDR:9926/metrics .*NIC counters: $DEV port 1" "$out/metrics-server.err" ||
  fail "the server did not say it serves /metrics with $DEV port 1's counters"

lbl="{ceph_daemon=\"admin\",device=\"$DEV\",port=\"1\"}"
scrape "$out/metrics-before.txt"
files=$(value "$out/metrics-before.txt" "ceph_rdma_port_sysfs_files$lbl")
[ -n "$files" ] && [ "$files" -gt 0 ] || fail "no sysfs counter files of $DEV port 1 in the scrape (got '$files')"
[ "$(value "$out/metrics-before.txt" "ceph_rdma_port_state$lbl")" = 4 ] || fail "$DEV port 1 is not ACTIVE (4) in the scrape"
sent0=$(value "$out/metrics-before.txt" "ceph_rdma_hw_sent_pkts_total$lbl")
rcvd0=$(value "$out/metrics-before.txt" "ceph_rdma_hw_rcvd_pkts_total$lbl")
[ -n "$sent0" ] && [ -n "$rcvd0" ] || fail "no sent_pkts/rcvd_pkts hw_counters of $DEV in the scrape"
log "$files counter files of $DEV port 1; before the transfer: sent_pkts $sent0, rcvd_pkts $rcvd0"

count=200
"$bench" -c "$work/rdma.conf" client --target "$ADDR:6810" --count $count --size-dist 64K:100 --quiet \
    --connect-timeout 60 --drain-timeout 60 >"$out/metrics-client.out" 2>"$out/metrics-client.err" ||
  fail "the client exited with status $?"

scrape "$out/metrics-after.txt"
sent1=$(value "$out/metrics-after.txt" "ceph_rdma_hw_sent_pkts_total$lbl")
rcvd1=$(value "$out/metrics-after.txt" "ceph_rdma_hw_rcvd_pkts_total$lbl")
log "after $count messages of 64 KiB: sent_pkts $sent1 (+$((sent1 - sent0))), rcvd_pkts $rcvd1 (+$((rcvd1 - rcvd0)))"
[ $((sent1 - sent0)) -ge $count ] || fail "sent_pkts moved by $((sent1 - sent0)), expected at least $count"
[ $((rcvd1 - rcvd0)) -ge $count ] || fail "rcvd_pkts moved by $((rcvd1 - rcvd0)), expected at least $count"
kill -INT "$server_pid" 2>/dev/null || true
wait "$server_pid" || true
server_pid=
log "passed"
