#!/usr/bin/env bash
# doctor.sh — siphon-doctor on the real rxe0 inside the rxe guest
# (tests/rxe/run-in-guest; docs/doctor.md):
#
#   1. siphon-doctor reads the guest's own /sys, /proc and /dev: it names
#      rxe0, lists its RoCE v2 GIDs, and says which GID the stack would use.
#   2. siphon-bench server and client connect over async+rdma with the same
#      configuration; the GID the RDMA stack logs for its rdma_cm
#      connections ("verbs: rdma_cm connections use rxe0 port 1 GID[N] ...")
#      must be the one the doctor named.
#   3. siphon-doctor --peer to that siphon-bench server over verbs: round
#      trips and a bulk transfer with zero errors, zero error completions,
#      and the path the stack applied (the same GID).
#
# usage: doctor.sh SIPHON_DOCTOR SIPHON_BENCH
set -euo pipefail

if [ "${SIPHON_RXE_GUEST:-}" != 1 ]; then
  echo "doctor.sh runs inside the rxe guest: tests/rxe/run-in-guest -- $0 SIPHON_DOCTOR SIPHON_BENCH" >&2
  exit 2
fi
doctor=${1:?usage: doctor.sh SIPHON_DOCTOR SIPHON_BENCH}
bench=${2:?usage: doctor.sh SIPHON_DOCTOR SIPHON_BENCH}
DEV=${SIPHON_RXE_DEV:-rxe0}
ADDR=${SIPHON_RXE_ADDR:-192.0.2.1}
out=${SIPHON_RXE_OUT:-$(mktemp -d)}
work=$(mktemp -d)
server_pid=
log() { echo "rxe-doctor: $*"; }
cleanup() {
  [ -z "$server_pid" ] || kill "$server_pid" 2>/dev/null || true
  rm -rf -- "$work"
}
trap cleanup EXIT
rm -f -- "$out"/doctor-*
fail() {
  log "FAILED: $*"
  local f
  for f in "$out"/doctor-*; do
    [ -s "$f" ] || continue
    echo "---- $(basename "$f") (last 40 lines) ----"
    tail -n 40 "$f"
  done
  exit 1
}

# The device is left to the stack's choice (the first one: rxe0); the local
# address is the one the daemon binds.
printf '%s\n' "[global]" "ms_type = async+rdma" "public_addr = $ADDR" "ms_async_rdma_polling_us = 100" \
  "ms_async_op_threads = 2" "debug_ms_rdma = 1" >"$work/rdma.conf"

# 1. The report. The memlock check looks at this process: run it with the
# limit a daemon gets under systemd (LimitMEMLOCK=infinity).
status=0
prlimit --memlock=unlimited:unlimited -- "$doctor" -c "$work/rdma.conf" -v >"$out/doctor-report.txt" 2>&1 ||
  status=$?
cat "$out/doctor-report.txt"
[ "$status" -eq 0 ] || fail "siphon-doctor exited with $status on a working $DEV (expected 0)"
grep -Eq "^OK +device +$DEV will be used" "$out/doctor-report.txt" || fail "the report does not name $DEV as the device"
grep -Eq "^OK +port +$DEV port 1: state 4: ACTIVE" "$out/doctor-report.txt" || fail "the report does not show port 1 ACTIVE"
v2=$(grep -Ec "GID\[[0-9]+\] [0-9a-f:.]+ RoCE v2 dummy0" "$out/doctor-report.txt" || true)
[ "$v2" -ge 2 ] || fail "the report lists $v2 RoCE v2 GIDs of dummy0 (expected the link-local and $ADDR ones at least)"
picked=$(grep -Eo "the stack would use $DEV GID\[[0-9]+\] [^ ]+ RoCE v2" "$out/doctor-report.txt" | head -n1 || true)
[ -n "$picked" ] || fail "the report does not say which RoCE v2 GID the stack would use"
picked=${picked#the stack would use }
case "$picked" in *"::ffff:$ADDR RoCE v2") ;; *) fail "the doctor picked '$picked', not the GID of $ADDR" ;; esac
log "the doctor says: $picked"

# 2. What the stack really uses when it connects.
(cd "$work" && exec "$bench" -c "$work/rdma.conf" server --bind "$ADDR:6810" --duration 240) \
  >"$out/doctor-server.out" 2>"$out/doctor-server.err" &
server_pid=$!
for i in $(seq 1 600); do
  grep -q "server listening on" "$out/doctor-server.err" 2>/dev/null && break
  kill -0 "$server_pid" 2>/dev/null || fail "the server exited before listening"
  [ "$i" -lt 600 ] || fail "the server did not listen within 60 s"
  sleep 0.1
done
"$bench" -c "$work/rdma.conf" client --target "$ADDR:6810" --count 20 --size-dist 4K:100 --quiet \
    --connect-timeout 60 --drain-timeout 60 >"$out/doctor-client.out" 2>"$out/doctor-client.err" ||
  fail "the client exited with status $?"
for side in client server; do
  used=$(grep -Eo "rdma_cm connections use $DEV port 1 GID\[[0-9]+\] [^ ]+ RoCE v2" "$out/doctor-$side.err" |
         head -n1 || true)
  [ -n "$used" ] || fail "the $side did not log the GID of its rdma_cm connections"
  used=${used#rdma_cm connections use }
  used=${used/ port 1 / }
  [ "$used" = "$picked" ] || fail "the $side's stack used '$used', the doctor said '$picked'"
  log "the $side's stack used: $used (the same)"
done

# 3. The active check against the same server.
status=0
prlimit --memlock=unlimited:unlimited -- "$doctor" -c "$work/rdma.conf" -v --peer "$ADDR:6810" --round-trips 50 \
    --connect-timeout 60 >"$out/doctor-peer.txt" 2>&1 || status=$?
grep -A4 -E "^[A-Z']+ +peer" "$out/doctor-peer.txt" || true
[ "$status" -eq 0 ] || fail "siphon-doctor --peer exited with $status (expected 0)"
grep -Eq "^OK +peer +50 round trips to $ADDR:6810 over async\+rdma: RTT p50 .*; 0 errors, 0 faults, 0 RNR events, 0 error completions" \
  "$out/doctor-peer.txt" || fail "--peer did not report 50 round trips with zero errors"
grep -qF "path used: ${picked/ GID/ port 1 GID}" "$out/doctor-peer.txt" ||
  fail "--peer did not report the path used with ${picked}"
kill -INT "$server_pid" 2>/dev/null || true
wait "$server_pid" || true
server_pid=
log "--peer: 50 round trips and a bulk transfer over verbs, zero errors, path ${picked}"
log "passed"
