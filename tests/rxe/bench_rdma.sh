#!/usr/bin/env bash
# bench_rdma.sh — two siphon-bench processes over async+rdma on the kernel's
# Soft-RoCE device, inside the rxe guest (tests/rxe/run-in-guest):
#
#   1. verify: `siphon-bench server` and `siphon-bench client --verify` on
#      rxe0 (192.0.2.1), echo with sizes on both sides of the zero-copy
#      threshold (64 KiB): zero lost, duplicated, reordered or corrupted; both
#      processes used SENDs and RDMA READs (stack_counters in --json), no RNR,
#      no completion in error.
#   2. fault: the same, and the server process is frozen (SIGSTOP) mid-run
#      for longer than the client's ms_connection_idle_timeout: the client's
#      connection faults, its lossless session reconnects (SESSION_RECONNECT)
#      when the server runs again, and replays; --verify must still find
#      nothing lost. (Why a frozen peer and not `ip link set dummy0 down`:
#      docs/testing-rxe.md, "Link faults on rxe".) Both processes also set
#      the per-connection path options (ms_async_rdma_local_gid, _sl, _dscp,
#      _path_mtu): each must log that its rdma_cm connections use them.
#
# usage: bench_rdma.sh SIPHON_BENCH [verify|fault|all]
set -euo pipefail

if [ "${SIPHON_RXE_GUEST:-}" != 1 ]; then
  echo "bench_rdma.sh runs inside the rxe guest: tests/rxe/run-in-guest -- $0 SIPHON_BENCH" >&2
  exit 2
fi
bench=${1:?usage: bench_rdma.sh SIPHON_BENCH [verify|fault|all]}
what=${2:-all}
DEV=${SIPHON_RXE_DEV:-rxe0}
ADDR=${SIPHON_RXE_ADDR:-192.0.2.1}
out=${SIPHON_RXE_OUT:-$(mktemp -d)}
work=$(mktemp -d)
pids=()
log() { echo "rxe-bench: $*"; }
now_ms() { local t=${EPOCHREALTIME/./}; echo $((t / 1000)); }
cleanup() {
  local p
  for p in "${pids[@]}"; do kill -CONT "$p" 2>/dev/null || true; kill "$p" 2>/dev/null || true; done
  rm -rf -- "$work"
}
trap cleanup EXIT
# The results dir outlives runs: drop what an earlier run left there.
rm -f -- "$out"/verify-* "$out"/fault-*
fail() {
  log "FAILED: $*"
  local f
  for f in "$out"/*.err; do
    [ -s "$f" ] || continue
    echo "---- $(basename "$f") (last 30 lines) ----"
    tail -n 30 "$f"
  done
  exit 1
}

# Guest-sized: TCG makes everything 10-100x slower, so small buffer counts
# and short busy-polling (two processes share 2 vCPUs).
cat >"$work/rdma.conf" <<EOF
[global]
ms_type = async+rdma
ms_async_rdma_device_name = $DEV
ms_async_rdma_polling_us = 100
ms_async_op_threads = 2
ms_initial_backoff = 0.05
ms_max_backoff = 0.5
EOF

# JSON checks in bash: python3 takes tens of seconds to start in the guest
# (TCG, every module read over 9p). siphon-bench writes one compact document
# per file, and every key checked here occurs once in it.
# num FILE KEY: the integer value of "KEY" (fails when absent).
num() {
  local v
  v=$(grep -o "\"$2\":[0-9]*" "$1" | head -n1 | cut -d: -f2)
  [ -n "$v" ] || fail "$(basename "$1"): no \"$2\" in the JSON"
  echo "$v"
}
# expect FILE KEY OP VALUE WHAT, e.g. expect c.json lost -eq 0 "nothing lost"
expect() {
  local v
  v=$(num "$1" "$2")
  [ "$v" "$3" "$4" ] || fail "$(basename "$1"): $2 = $v, expected $3 $4 ($5)"
}

start_server() {  # NAME PORT [CONF]
  (cd "$work" && exec "$bench" -c "${3:-$work/rdma.conf}" server --bind "$ADDR:$2" --once --duration 200 \
     --json "$out/$1-server.json") >"$out/$1-server.out" 2>"$out/$1-server.err" &
  server_pid=$!
  pids+=("$server_pid")
  local i
  for i in $(seq 1 600); do
    grep -q "server listening on" "$out/$1-server.err" 2>/dev/null && return 0
    kill -0 "$server_pid" 2>/dev/null || fail "$1: the server exited before listening"
    sleep 0.1
  done
  fail "$1: the server did not listen within 60 s"
}

# 1. Zero loss over both data paths.
run_verify() {
  local t0 count=160
  t0=$(now_ms)
  start_server verify 6800
  # Sizes 100 B and 4 KiB go by SEND (inline or copied), 96 KiB and 1 MiB by
  # RDMA READ (>= ms_async_rdma_zero_copy_threshold, 64 KiB).
  "$bench" -c "$work/rdma.conf" client --target "$ADDR:6800" --count $count \
      --size-dist 100:30,4K:30,96K:25,1M:15 --inflight 8 --verify --json "$out/verify-client.json" --quiet \
      --connect-timeout 60 --drain-timeout 60 >"$out/verify-client.out" 2>"$out/verify-client.err" \
    || fail "verify: the client exited with status $?"
  wait "$server_pid" || fail "verify: the server exited with status $?"
  local c="$out/verify-client.json" s="$out/verify-server.json" f k
  grep -q '"ms_type":"async+rdma"' "$c" || fail "the client did not run async+rdma"
  expect "$c" messages -eq $count "every request answered"
  expect "$c" errors -eq 0 "no errors"
  expect "$c" checked -eq $count "--verify checked every reply"
  for k in lost duplicated reordered corrupted; do expect "$c" $k -eq 0 "--verify: nothing $k"; done
  for f in "$c" "$s"; do
    expect "$f" tx_sends -gt 0 "data went by SEND"
    expect "$f" zero_copy_transfers -gt 0 "large data was advertised for RDMA READ"
    expect "$f" rdma_reads -gt 0 "large data was pulled by RDMA READ"
    expect "$f" rnr_events -eq 0 "no RNR"
    expect "$f" wc_errors -eq 0 "no completion in error"
  done
  expect "$s" messages -eq $count "the server served every request"
  grep -q '"client_runs":"1"' "$s" || fail "the server did not see the client's run end"
  log "verify: $count requests (100 B..1 MiB) over $DEV, zero lost/duplicated/reordered/corrupted," \
      "$(num "$c" zero_copy_transfers) zero-copy transfers (client), $(num "$c" tx_sends) SENDs (client)" \
      "($(( $(now_ms) - t0 )) ms)"
}

# 2. A connection fault mid-run: the lossless session reconnects and replays.
run_fault() {
  local t0 count=240
  t0=$(now_ms)
  # The path of every connection, on both sides (docs/rdma-verbs.md, "What
  # is applied per connection"): a GID pinned by value, SL 5, TOS 104 and
  # the path MTU capped at 1024 (rxe0's active MTU is 4096).
  cp "$work/rdma.conf" "$work/fault-server.conf"
  # debug_ms is 0/0 (Ceph's default) and governs the RDMA stack's log too;
  # debug_ms_rdma = 1 shows the level-1 line that reports the applied path.
  printf '%s\n' "ms_async_rdma_local_gid = ::ffff:$ADDR" "ms_async_rdma_sl = 5" "ms_async_rdma_dscp = 104" \
    "ms_async_rdma_path_mtu = 1024" "debug_ms_rdma = 1" >>"$work/fault-server.conf"
  start_server fault 6801 "$work/fault-server.conf"
  # The client faults a connection that received nothing for 2 s.
  cp "$work/fault-server.conf" "$work/fault.conf"
  echo "ms_connection_idle_timeout = 2" >>"$work/fault.conf"
  "$bench" -c "$work/fault.conf" client --target "$ADDR:6801" --count $count \
      --size-dist 100:50,96K:50 --inflight 4 --rate 30 --verify --json "$out/fault-client.json" --quiet \
      --connect-timeout 60 --drain-timeout 120 >"$out/fault-client.out" 2>"$out/fault-client.err" &
  local client_pid=$!
  pids+=("$client_pid")
  # Freeze the server once traffic flows (its requests keep arriving in the
  # kernel's receive queues meanwhile), long enough for the idle timeout.
  # (The client starts and connects in about 3 s in the guest; at 30
  # requests/s it sends for 8 s. A freeze before the session exists would
  # show as no reconnect, which the checks below reject.)
  sleep 4
  kill -STOP "$server_pid"
  local stopped_at
  stopped_at=$(now_ms)
  sleep 5
  kill -CONT "$server_pid"
  log "fault: server frozen for $(( $(now_ms) - stopped_at )) ms"
  wait "$client_pid" || fail "fault: the client exited with status $?"
  wait "$server_pid" || fail "fault: the server exited with status $?"
  local c="$out/fault-client.json" k
  expect "$c" checked -eq $count "--verify checked every reply"
  for k in lost duplicated reordered corrupted; do expect "$c" $k -eq 0 "--verify after the fault: nothing $k"; done
  expect "$c" faults -ge 1 "the connection faulted while the server was frozen"
  expect "$c" reconnects -ge 1 "the session reconnected (SESSION_RECONNECT, not a reset)"
  local applied="(pinned by ms_async_rdma_local_gid = ::ffff:$ADDR), path MTU 1024 (rdma-cm 4096, selection 1024), SL 5, traffic class 104"
  for k in client server; do
    grep -qF "$applied" "$out/fault-$k.err" ||
      fail "fault: the $k did not log 'rdma_cm connections use ... $applied'"
  done
  log "fault: $count requests, $(num "$c" faults) fault(s), $(num "$c" reconnects) reconnect(s)," \
      "zero lost/duplicated/reordered/corrupted ($(( $(now_ms) - t0 )) ms)"
}

case "$what" in
  verify) run_verify ;;
  fault) run_fault ;;
  all) run_verify; run_fault ;;
  *) echo "unknown step '$what' (verify, fault, all)" >&2; exit 2 ;;
esac
log "passed"
