#!/usr/bin/env bash
# smoke.sh — proves the rxe tier works: runs inside the guest that
# tests/rxe/run-in-guest boots, and exercises the stock rdma-core tools over
# the kernel's Soft-RoCE device.
#
#   1. ibv_devinfo: rxe0 port 1 is PORT_ACTIVE with active_mtu 4096;
#   2. the RoCEv2 GID of the guest's IPv4 address is found in sysfs;
#   3. ibv_rc_pingpong (RC QP, out-of-band TCP exchange, polled completions);
#   4. ibv_rc_pingpong -e (the same, waking up through a completion channel);
#   5. rping (connection set up by rdma_cm, RDMA READ/WRITE of the ping buffer).
#
# Every step runs under a time limit and stops the script on failure. The last
# line is "rxe-smoke: N passed, N failed".
set -euo pipefail

if [ "${SIPHON_RXE_GUEST:-}" != 1 ]; then
  echo "smoke.sh runs inside the rxe guest: tests/rxe/run-in-guest -- $0" >&2
  exit 2
fi

DEV=${SIPHON_RXE_DEV:-rxe0}
ADDR=${SIPHON_RXE_ADDR:-192.0.2.1}
PORT=1
STEP_LIMIT=120          # seconds per step; the guest is slow (TCG), not hung
work=$(mktemp -d)
passed=0
current="setup"
bg_pids=()

log()  { echo "rxe-smoke: $*"; }
finish() {
  local rc=$? p
  for p in "${bg_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  if [ "$rc" -ne 0 ]; then
    log "FAILED in step '$current' (exit $rc)"
    for f in "$work"/*.log; do
      [ -s "$f" ] || continue
      echo "---- $(basename "$f") ----"
      cat "$f"
    done
    echo "rxe-smoke: $passed passed, 1 failed"
  fi
  rm -rf -- "$work"
}
trap finish EXIT
fail() { log "FAILED: $*"; exit 1; }
now_ms() { local t=${EPOCHREALTIME/./}; echo $((t / 1000)); }
step() { current=$1; step_start=$(now_ms); log "== $1"; }
ok() {
  local ms=$(( $(now_ms) - step_start ))
  passed=$((passed + 1))
  log "ok: $current ($((ms / 1000)).$(printf '%03d' $((ms % 1000))) s)"
}

# Waits until a TCP port is listening, or the server process is gone.
wait_listen() {
  local port=$1 pid=$2 i
  for i in $(seq 1 200); do
    if ss -Hltn "sport = :$port" | grep -q .; then return 0; fi
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

# Runs one ibv_rc_pingpong server/client pair; extra arguments go to both sides.
rc_pingpong() {
  local name=$1 tcp_port=$2 spid
  shift 2
  timeout "$STEP_LIMIT" ibv_rc_pingpong -d "$DEV" -i "$PORT" -g "$gid_index" -p "$tcp_port" "$@" \
    >"$work/$name-server.log" 2>&1 &
  spid=$!
  bg_pids+=("$spid")
  wait_listen "$tcp_port" "$spid" || fail "ibv_rc_pingpong server did not start listening on port $tcp_port"
  timeout "$STEP_LIMIT" ibv_rc_pingpong -d "$DEV" -i "$PORT" -g "$gid_index" -p "$tcp_port" "$@" "$ADDR" \
    >"$work/$name-client.log" 2>&1 || fail "ibv_rc_pingpong client failed"
  wait "$spid" || fail "ibv_rc_pingpong server failed"
  grep -q 'iters in' "$work/$name-client.log" || fail "client printed no result"
  grep -q 'iters in' "$work/$name-server.log" || fail "server printed no result"
  sed 's/^/  client: /' "$work/$name-client.log" | grep -E 'bytes in|iters in'
  rm -f "$work/$name"-*.log
}

# 1. device and port
step "ibv_devinfo -d $DEV"
ibv_devinfo -d "$DEV" >"$work/devinfo.log" 2>&1 || fail "ibv_devinfo failed"
grep -Eq 'state:[[:space:]]+PORT_ACTIVE' "$work/devinfo.log" || fail "port $PORT is not PORT_ACTIVE"
grep -Eq 'active_mtu:[[:space:]]+4096' "$work/devinfo.log" || fail "active_mtu is not 4096"
grep -Eq 'link_layer:[[:space:]]+Ethernet' "$work/devinfo.log" || fail "link_layer is not Ethernet"
rm -f "$work/devinfo.log"
ok

# 2. the RoCEv2 GID that maps the guest's IPv4 address (::ffff:a.b.c.d)
step "RoCEv2 GID of $ADDR"
IFS=. read -r a b c d <<<"$ADDR"
want=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "$a" "$b" "$c" "$d")
gids=/sys/class/infiniband/$DEV/ports/$PORT/gids
types=/sys/class/infiniband/$DEV/ports/$PORT/gid_attrs/types
gid_index=""
for attempt in $(seq 1 10); do           # the GID table fills in asynchronously
  for f in "$gids"/*; do
    read -r gid <"$f" || continue
    [ "$gid" = "$want" ] || continue
    i=${f##*/}
    type=""
    read -r type <"$types/$i" 2>/dev/null || true
    if [ "$type" = "RoCE v2" ]; then gid_index=$i; break; fi
  done
  [ -n "$gid_index" ] && break
  sleep 0.5
done
[ -n "$gid_index" ] || fail "no RoCE v2 GID $want in $gids"
if [ -n "${SIPHON_RXE_GID_INDEX:-}" ] && [ "$SIPHON_RXE_GID_INDEX" != "$gid_index" ]; then
  fail "the runner exported SIPHON_RXE_GID_INDEX=$SIPHON_RXE_GID_INDEX, sysfs says $gid_index"
fi
log "GID index $gid_index = $want (RoCE v2)"
ok

# 3. RC ping-pong, polling
step "ibv_rc_pingpong (RC, polled, 4 KiB x 500, path MTU 4096)"
rc_pingpong rc-poll 18515 -m 4096 -s 4096 -n 500
ok

# 4. RC ping-pong, completion channel
step "ibv_rc_pingpong -e (RC, completion channel, 4 KiB x 200)"
rc_pingpong rc-event 18516 -e -m 4096 -s 4096 -n 200
ok

# 5. rping over rdma_cm. rdma_cm listens in its own port space, invisible to
# ss, so the client retries while the server is still starting.
step "rping over rdma_cm ($ADDR, 10 iterations)"
timeout "$STEP_LIMIT" rping -s -a "$ADDR" -C 10 -v >"$work/rping-server.log" 2>&1 &
spid=$!
bg_pids+=("$spid")
connected=0
for attempt in $(seq 1 20); do
  sleep 0.5
  kill -0 "$spid" 2>/dev/null || fail "rping server exited early"
  if timeout "$STEP_LIMIT" rping -c -a "$ADDR" -C 10 -v >"$work/rping-client.log" 2>&1; then
    connected=1
    break
  fi
  log "rping client attempt $attempt failed, retrying"
done
[ "$connected" = 1 ] || fail "rping client never completed"
wait "$spid" || fail "rping server failed"
n=$(grep -c 'ping data:' "$work/rping-client.log" || true)
[ "$n" -eq 10 ] || fail "rping client reported $n pings, wanted 10"
log "rping: $n pings verified"
ok

current="done"
echo "rxe-smoke: $passed passed, 0 failed"
