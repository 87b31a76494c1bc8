#!/usr/bin/env bash
# pair_guest.sh — the guest half of the two-host rxe tier: runs in both
# guests of tests/rxe/run-pair (SIPHON_RXE_ROLE a or b), the servers in a,
# the clients in b, over async+rdma on each guest's rxe0 and the wire
# between them. The halves meet through files in the shared results dir
# ($SIPHON_RXE_OUT): a.ready, b.done, b.failed, a.failed.
#
#   pair_guest.sh wire SIPHON_BENCH SIPHON_OBJD PATH_MTU TOS [WITH_OBJD]
#       a: siphon-bench server (echo and sink, one each) and siphon-objd;
#       b: siphon-bench client echo and sink with --verify at 100 B, 4 KiB,
#          96 KiB and 1 MiB, then (WITH_OBJD 1, the default) siphon-bench
#          objd --verify. Every run must
#          be clean (nothing lost/duplicated/reordered/corrupted), both sides
#          use SENDs and RDMA READs, no RNR, no completion in error, and each
#          process logs the path it applied (its GID, path MTU, TOS), which
#          the host then holds the pcap against (pair_test.sh).
#   pair_guest.sh partition SIPHON_BENCH SIPHON_OBJD
#       a: two siphon-bench servers (lossless, lossy); b: a lossless and a
#          lossy client at a fixed rate with --verify, while the host cuts the
#          link for longer than the RC retry budget (b writes b.flowing when
#          traffic flows; the host writes host.restored). Lossless: faults,
#          reconnects, replays, --verify clean. Lossy: the reset is reported.
#          Afterwards neither server process holds a QP, MR or rdma_cm id.
set -euo pipefail

[ "${SIPHON_RXE_GUEST:-}" = 1 ] && [ -n "${SIPHON_RXE_ROLE:-}" ] || {
  echo "pair_guest.sh runs inside run-pair's guests: tests/rxe/run-pair -- $0 ..." >&2
  exit 2
}
scenario=${1:?usage: pair_guest.sh wire|partition|failover|removal SIPHON_BENCH SIPHON_OBJD [PATH_MTU TOS]}
bench=${2:?siphon-bench path}
objd=${3:?siphon-objd path}
role=$SIPHON_RXE_ROLE
ADDR=$SIPHON_RXE_ADDR
PEER=$SIPHON_RXE_PEER_ADDR
DEV=${SIPHON_RXE_DEV:-rxe0}
out=$SIPHON_RXE_OUT
work=$(mktemp -d)
pids=()
log() { echo "pair-$role: $*"; }
now_ms() { local t=${EPOCHREALTIME/./}; echo $((t / 1000)); }
cleanup() {
  local p
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  rm -rf -- "$work"
}
trap cleanup EXIT
# The stacks of every Siphon process this half started that still runs (gdb,
# bounded), for a failure that is a hang: $out/<role>-stacks-<pid>.txt.
dump_stacks() {
  local p
  command -v gdb >/dev/null || return 0
  for p in "${pids[@]}"; do
    kill -0 "$p" 2>/dev/null || continue
    timeout 90 gdb -batch -p "$p" -ex "thread apply all bt" >"$out/$role-stacks-$p.txt" 2>&1 || true
    log "stacks of pid $p ($(tr '\0' ' ' </proc/"$p"/cmdline 2>/dev/null | cut -c1-80)) in $role-stacks-$p.txt"
  done
}
fail() {
  log "FAILED: $*"
  echo "$*" >"$out/$role.failed"
  dump_stacks
  local f
  for f in "$out"/"$role"-*.err; do
    [ -s "$f" ] || continue
    echo "---- $(basename "$f") (last 20 lines) ----"
    tail -n 20 "$f"
  done
  exit 1
}
# wait_for FILE SECONDS WHAT: the other half's signal; its failure ends ours.
wait_for() {
  local i other=b
  [ "$role" = b ] && other=a
  for i in $(seq 1 $(($2 * 5))); do
    [ -e "$1" ] && return 0
    [ -e "$out/$other.failed" ] && fail "guest $other failed: $(cat "$out/$other.failed")"
    sleep 0.2
  done
  fail "no $3 within $2 s ($(basename "$1"))"
}
# stop_wait PID WHAT: SIGTERM, then at most 60 s for a clean exit (status
# 0); a process that does not exit fails the test with its stacks.
stop_wait() {
  local i st=0
  kill -TERM "$1" 2>/dev/null || true
  for i in $(seq 1 300); do
    kill -0 "$1" 2>/dev/null || break
    sleep 0.2
  done
  kill -0 "$1" 2>/dev/null && fail "$2 did not exit within 60 s of SIGTERM (hung in shutdown)"
  wait "$1" || st=$?
  [ "$st" -eq 0 ] || fail "$2 exited with status $st after SIGTERM"
}
# JSON checks in bash (python3 starts slowly in the guest; see bench_rdma.sh).
num() {
  local v
  v=$(grep -o "\"$2\":[0-9]*" "$1" | head -n1 | cut -d: -f2)
  [ -n "$v" ] || fail "$(basename "$1"): no \"$2\" in the JSON"
  echo "$v"
}
expect() {
  local v
  v=$(num "$1" "$2")
  [ "$v" "$3" "$4" ] || fail "$(basename "$1"): $2 = $v, expected $3 $4 ($5)"
}
# The line the verbs provider logs (debug_ms_rdma = 1) with the path its
# rdma_cm connections use: device, port, GID, path MTU, SL, traffic class.
applied_line() { grep -ho 'rdma_cm connections use .*' "$@" | head -n1; }

# The previous run's files are removed by the host before either guest
# boots (pair_test.sh): removing them here, in one guest, raced with the
# other guest's new ones.

conf() {  # FILE [extra lines]
  local f=$1
  shift
  {
    echo "[global]"
    echo "ms_type = async+rdma"
    echo "ms_async_rdma_device_name = $DEV"
    echo "ms_async_op_threads = 2"
    echo "ms_async_rdma_polling_us = ${SIPHON_PAIR_POLLING_US:-100}"
    echo "ms_initial_backoff = 0.05"
    echo "ms_max_backoff = 0.5"
    echo "debug_ms_rdma = 1"
    # SIPHON_PAIR_DUMP=1: every Siphon process gets an admin socket, and
    # dump_loop (below) records its `messenger dump` every 2 s.
    [ "${SIPHON_PAIR_DUMP:-0}" = 1 ] && echo "admin_socket = $work/siphon-\$pid.asok"
    printf '%s\n' "$@"
  } >"$f"
}

# SIPHON_PAIR_DUMP=1 (a diagnostic, off in CI): while this half runs, every
# 2 s, the `messenger dump` of each Siphon process with an admin socket in
# $work goes to $out/<role>-dump.jsonl, one JSON line per process and time:
# the state of each RDMA connection (credits, transfers in and out, WRs in
# flight) through a stall, and "state": "unknown" if a worker stops
# answering. python3 starts slowly in the guest; it runs once, in a loop.
dump_loop() {
  [ "${SIPHON_PAIR_DUMP:-0}" = 1 ] || return 0
  python3 - "$work" "$out/$role-dump.jsonl" <<'PY' &
import glob, json, os, socket, struct, sys, time
work, dest = sys.argv[1], sys.argv[2]
def ask(path):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(5)
    s.connect(path)
    s.sendall(b'{"prefix": "messenger dump"}\0')
    data = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        data += b
    n = struct.unpack(">I", data[:4])[0]
    return data[4:4 + n].decode()
while os.path.isdir(work):
    for path in glob.glob(os.path.join(work, "*.asok")):
        try:
            body = json.loads(ask(path))
        except Exception as e:
            body = {"error": repr(e)}
        with open(dest, "a") as f:
            f.write(json.dumps({"t": time.time(), "asok": os.path.basename(path), "dump": body}) + "\n")
    time.sleep(2)
PY
  pids+=("$!")
}

start_bg() {  # NAME READY_REGEX CMD...: start, wait (60 s) for READY_REGEX on stderr/stdout
  local name=$1 re=$2 i
  shift 2
  (cd "$work" && exec "$@") >"$out/$role-$name.out" 2>"$out/$role-$name.err" &
  local pid=$!
  pids+=("$pid")
  eval "pid_$name=$pid"
  for i in $(seq 1 600); do
    grep -qE "$re" "$out/$role-$name.err" "$out/$role-$name.out" 2>/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || fail "$name exited before it was ready"
    sleep 0.1
  done
  fail "$name not ready within 60 s"
}

# ---------------------------------------------------------------- wire
wire_a() {
  start_bg echo "server listening on" "$bench" -c "$work/rdma.conf" server --bind "$ADDR:6800" --once \
    --duration 280 --json "$out/a-echo.json"
  start_bg sink "server listening on" "$bench" -c "$work/rdma.conf" server --bind "$ADDR:6801" --once \
    --duration 280 --json "$out/a-sink.json"
  cat >>"$work/objd.conf" <<EOF
objd max object size = 1M
[osd.0]
public addr = v2:$ADDR:6810
cluster addr = v2:$ADDR:6811
EOF
  if [ "$with_objd" = 1 ]; then
    start_bg objd "siphon-objd osd" "$objd" -c "$work/objd.conf" -i 0 --addr-file "$out/objd.addr"
    grep -q "(async+rdma" "$out/a-objd.out" || fail "siphon-objd does not run async+rdma: $(cat "$out/a-objd.out")"
  fi
  touch "$out/a.ready"
  log "servers up: echo :6800, sink :6801$([ "$with_objd" = 1 ] && echo ", siphon-objd $(cat "$out/objd.addr")")"
  wait_for "$out/b.done" 280 "end of guest b's runs"
  local k f
  for k in echo sink; do
    wait "$(eval echo "\$pid_$k")" || fail "the $k server exited with status $?"
    f=$out/a-$k.json
    expect "$f" faults -eq 0 "no connection fault on a clean wire"
    expect "$f" tx_sends -gt 0 "SENDs"
    expect "$f" rdma_reads -gt 0 "the server pulled large requests by RDMA READ"
    expect "$f" rnr_events -eq 0 "no RNR"
    expect "$f" wc_errors -eq 0 "no completion in error"
  done
  if [ "$with_objd" = 1 ]; then
    stop_wait "$pid_objd" siphon-objd
  fi
  applied_line "$out"/a-*.err >"$out/a.applied" || fail "no 'rdma_cm connections use' line in a's logs"
  log "applied: $(cat "$out/a.applied")"
}

wire_b() {
  wait_for "$out/a.ready" 120 "servers in guest a"
  local pat n=${SIPHON_PAIR_COUNT:-16} c k t0 st
  local sizes=100:25,4K:25,96K:25,1M:25 common=(--count "$n" --verify --quiet --connect-timeout 60 --drain-timeout 120)
  t0=$(now_ms)
  # One after another by default. SIPHON_PAIR_CONCURRENT=1 runs the three
  # side by side, which is quicker but reproduces a zero-copy stall that this
  # tier found (docs/testing-rxe.md, "What the two-host tier found").
  local bg=() pats=(echo sink)
  [ "$with_objd" = 0 ] || pats+=(objd)
  [ "${SIPHON_PAIR_CONCURRENT:-0}" = 1 ] && bg=(1)
  run_client() {  # NAME ARGS...
    local name=$1
    shift
    "$bench" "$@" --json "$out/b-$name.json" >"$out/b-$name.out" 2>"$out/b-$name.err" &
    eval "p_$name=$!"
    pids+=("$(eval echo "\$p_$name")")
    [ ${#bg[@]} -gt 0 ] && return 0
    local st=0 pid i
    pid=$(eval echo "\$p_$name")
    # A client that hangs (no timeout of its own fires) is a failure with
    # its stacks, not a guest timeout.
    for i in $(seq 1 $((${SIPHON_PAIR_CLIENT_LIMIT:-100} * 5))); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.2
    done
    kill -0 "$pid" 2>/dev/null && fail "the $name client still runs after ${SIPHON_PAIR_CLIENT_LIMIT:-100} s (hung)"
    wait "$pid" || st=$?
    [ "$st" -eq 0 ] || fail "the $name client exited with status $st"
  }
  run_client echo -c "$work/rdma.conf" client --target "$PEER:6800" --pattern echo --size-dist $sizes --inflight 8 "${common[@]}"
  run_client sink -c "$work/rdma.conf" client --target "$PEER:6801" --pattern sink --size-dist $sizes --inflight 8 "${common[@]}"
  [ "$with_objd" = 0 ] ||
    run_client objd -c "$work/objd.conf" objd --target "$(cat "$out/objd.addr")" --size-dist $sizes --inflight 4 "${common[@]}"
  if [ ${#bg[@]} -gt 0 ]; then
    for pat in "${pats[@]}"; do
      st=0
      wait "$(eval echo "\$p_$pat")" || st=$?
      [ "$st" -eq 0 ] || fail "the $pat client exited with status $st"
    done
  fi
  for pat in "${pats[@]}"; do
    c=$out/b-$pat.json
    grep -q '"ms_type":"async+rdma"' "$c" || fail "the $pat client did not run async+rdma"
    expect "$c" checked -eq "$n" "--verify checked every message"
    for k in lost duplicated reordered corrupted; do expect "$c" $k -eq 0 "$pat --verify: nothing $k"; done
    expect "$c" errors -eq 0 "no errors"
    [ "$pat" = objd ] && continue   # objd's JSON has no stack counters of its own
    # A clean wire: no connection fault at all (a stall that only the
    # transfer timeout ends would show here, even when replay hides it).
    expect "$c" faults -eq 0 "no connection fault on a clean wire"
    expect "$c" tx_sends -gt 0 "SENDs"
    expect "$c" zero_copy_transfers -gt 0 "96 KiB and 1 MiB went zero-copy (RDMA READ by the peer)"
    expect "$c" rnr_events -eq 0 "no RNR"
    expect "$c" wc_errors -eq 0 "no completion in error"
  done
  log "${pats[*]}: $n messages each of 100 B..1 MiB with guest a, --verify clean ($(( $(now_ms) - t0 )) ms)"
  applied_line "$out"/b-*.err >"$out/b.applied" || fail "no 'rdma_cm connections use' line in b's logs"
  log "applied: $(cat "$out/b.applied")"
  touch "$out/b.done"
}

# ---------------------------------------------------------------- partition
# Guest a: a lossless and a lossy server; they outlive b's clients so that
# what the clients' departure leaves in the kernel can be counted.
# rdma_res KIND PID: the kernel's RDMA resources (rdma res show qp|mr|cm_id) of PID.
rdma_res() { timeout 20 rdma res show "$1" 2>/dev/null | grep -c " pid $2 " || true; }
# rxe treats an RC retry count of 7 (ms_async_rdma_retry_count's default) as
# "retry forever": a cut link then never faults a connection, the QPs just
# retransmit until it is back (docs/testing-rxe.md, "A partition"). 6 is the
# largest count that gives up; both ends set it (each side's own QP retries).
retry_conf() { echo "ms_async_rdma_retry_count = ${SIPHON_PAIR_RETRY_COUNT:-6}"; }
# The lossy client's connection faults during the cut and its close (the
# rdma_cm DREQ) is lost in the cut; the lossy server, a sink that never
# sends, has no other way to learn that its peer is gone: its QP would stay
# until ms_connection_idle_timeout (Ceph's 900 s) faults the idle connection,
# as Ceph's AsyncConnection::tick does. Both ends run with 5 s here. (A
# keepalive from the server would find the dead peer through the QP's retry
# budget on RDMA, but on TCP only after the kernel's retransmission timeout,
# about 15 min; docs/messenger.md, "Idle connections".)
idle_conf() { echo "ms_connection_idle_timeout = ${SIPHON_PAIR_IDLE_TIMEOUT:-5}"; }
partition_a() {
  # debug_ms_session = 1: the servers' session faults in their logs (the
  # idle timeout's line below; siphon-bench's default debug_ms is 0).
  conf "$work/rdma.conf" "$(retry_conf)" "$(idle_conf)" "debug_ms_session = 1"
  start_bg lossless "server listening on" "$bench" -c "$work/rdma.conf" server --bind "$ADDR:6820" \
    --duration 280 --json "$out/a-lossless.json"
  start_bg lossy "server listening on" "$bench" -c "$work/rdma.conf" server --bind "$ADDR:6821" --policy lossy \
    --duration 280 --json "$out/a-lossy.json"
  local k p
  for k in lossless lossy; do
    p=$(eval echo "\$pid_$k")
    echo "$(rdma_res mr "$p") $(rdma_res cm_id "$p")" >"$work/base-$k"
  done
  touch "$out/a.ready"
  wait_for "$out/b.done" 280 "end of guest b's runs"
  # Every connection the clients had must be gone from the servers, in the
  # kernel too: no QP left, MRs and rdma_cm ids back at the listening baseline.
  local i qp mr cm base
  for k in lossless lossy; do
    p=$(eval echo "\$pid_$k")
    read -r base_mr base_cm <"$work/base-$k"
    for i in $(seq 1 100); do
      qp=$(rdma_res qp "$p"); mr=$(rdma_res mr "$p"); cm=$(rdma_res cm_id "$p")
      [ "$qp" -eq 0 ] && [ "$mr" -le "$base_mr" ] && [ "$cm" -le "$base_cm" ] && break
      sleep 0.2
    done
    [ "$qp" -eq 0 ] || fail "the $k server still holds $qp QP(s) after the client left: $(rdma res show qp | grep " pid $p ")"
    [ "$mr" -le "$base_mr" ] || fail "the $k server holds $mr MRs after the client left, $base_mr before it came"
    [ "$cm" -le "$base_cm" ] || fail "the $k server holds $cm rdma_cm ids after the client left, $base_cm before it came"
    log "$k server after the client left: 0 QPs, $mr MRs (baseline $base_mr), $cm rdma_cm ids (baseline $base_cm)"
    stop_wait "$p" "the $k server"
  done
  # The lossy client exited during the cut, so its DREQ never arrived. The
  # lossy server learned that its client was gone either from its own QP
  # (a reply in flight at the cut: retries exceeded) or, with nothing in
  # flight, from its idle timeout; nothing else can have told it.
  if grep -q "ms_connection_idle_timeout: no traffic" "$out/a-lossy.err"; then
    log "the lossy server closed its connection on ms_connection_idle_timeout (nothing in flight at the cut)"
  elif grep -q "RDMA connection from .* faulted" "$out/a-lossy.err"; then
    log "the lossy server's own QP gave up (a reply in flight at the cut): $(grep -h "RDMA connection from .* faulted" "$out/a-lossy.err" | head -n1 | cut -c1-160)"
  else
    fail "the lossy server's connection ended with neither its idle timeout nor a fault of its own QP"
  fi
}

# Guest b: both clients at a fixed rate across the cut. A watcher notes, in
# this guest's clock, when the host's cut and restore become visible (the
# shared dir is polled every 0.1 s), to set against the clients' log times.
partition_b() {
  local cut_s=${4:-12}
  conf "$work/rdma.conf" "debug_ms_session = 5" "$(retry_conf)" "$(idle_conf)"
  wait_for "$out/a.ready" 120 "servers in guest a"
  local n=${SIPHON_PAIR_PARTITION_COUNT:-300} rate=10 common
  common=(--count "$n" --rate "$rate" --size-dist 100:50,32K:50 --verify --quiet --connect-timeout 60)
  "$bench" -c "$work/rdma.conf" client --target "$PEER:6820" "${common[@]}" --drain-timeout 150 \
    --json "$out/b-lossless.json" >"$out/b-lossless.out" 2>"$out/b-lossless.err" &
  local p_lossless=$!
  "$bench" -c "$work/rdma.conf" client --target "$PEER:6821" --policy lossy "${common[@]}" --drain-timeout 2 \
    --json "$out/b-lossy.json" >"$out/b-lossy.out" 2>"$out/b-lossy.err" &
  local p_lossy=$!
  pids+=("$p_lossless" "$p_lossy")
  # Traffic flows once both clients have an RDMA connection (their path line)
  # and a couple of seconds went by.
  local i
  for i in $(seq 1 600); do
    [ "$(cat "$out"/b-loss*.err 2>/dev/null | grep -c 'rdma_cm connections use')" -ge 2 ] && break
    sleep 0.1
  done
  sleep 2
  # This guest's clock, for the host to relate its own times to (pair_test.sh).
  date +%s.%N >"$out/b.flowing"
  log "traffic flowing; waiting for the host to cut the link for ${cut_s} s"
  local cut_seen="" restored_seen=""
  for i in $(seq 1 $(( (cut_s + 120) * 10 ))); do
    [ -z "$cut_seen" ] && [ -e "$out/host.cut" ] && cut_seen=$(date -u +%FT%T.%6NZ)
    # The lossless connection faulted and the lossy client is gone (it ends
    # 2 s after its reset, --drain-timeout 2): the host may restore the link.
    # It waits for this as well as for its CUT seconds, so that a guest the
    # loaded host starved of CPU still sees its QPs give up, and so that the
    # lossy client's DREQ certainly died in the cut with its process.
    if [ -n "$cut_seen" ] && [ ! -e "$out/b.faulted" ] &&
       grep -q "faulted in state" "$out/b-lossless.err" 2>/dev/null &&
       ! kill -0 "$p_lossy" 2>/dev/null; then
      touch "$out/b.faulted"
    fi
    [ -e "$out/host.restored" ] && { restored_seen=$(date -u +%FT%T.%6NZ); break; }
    sleep 0.1
  done
  [ -n "$restored_seen" ] || fail "the host never cut and restored the link"
  log "link cut seen at $cut_seen, restored at $restored_seen (guest b's clock)"
  local st_lossless=0 st_lossy=0
  wait "$p_lossless" || st_lossless=$?
  wait "$p_lossy" || st_lossy=$?
  # Lossless: nothing lost, duplicated, reordered; the fault and the
  # reconnect are counted and logged.
  local c=$out/b-lossless.json k
  [ "$st_lossless" -eq 0 ] || fail "the lossless client exited with status $st_lossless"
  expect "$c" checked -eq "$n" "--verify checked every message"
  for k in lost duplicated reordered corrupted; do expect "$c" $k -eq 0 "lossless through the cut: nothing $k"; done
  expect "$c" faults -ge 1 "the connection faulted during the cut"
  expect "$c" reconnects -ge 1 "the session reconnected (SESSION_RECONNECT) after the cut"
  expect "$c" qps_active -le 1 "the faulted QPs were destroyed (at most the live one left)"
  expect "$c" connections_active -le 1 "the faulted connections were closed"
  # Lossy: the reset is reported (exit 1 or 3), and nothing arrives twice,
  # out of order or damaged.
  c=$out/b-lossy.json
  case "$st_lossy" in 1|3) ;; *) fail "the lossy client exited with status $st_lossy, expected 1 or 3 (a reset)" ;; esac
  expect "$c" faults -ge 1 "the lossy connection faulted"
  expect "$c" errors -ge 1 "the lossy session's reset is reported"
  for k in duplicated reordered corrupted; do expect "$c" $k -eq 0 "lossy: nothing $k"; done
  expect "$c" reconnects -eq 0 "a lossy session is not resumed"
  grep -q "faulted in state" "$out/b-lossy.err" || fail "the lossy client did not log its session's fault"
  # Nothing of either client left in this kernel.
  local left
  left=$(rdma res show qp 2>/dev/null | grep -c " pid " || true)
  [ "$left" -eq 0 ] || fail "QPs left in guest b after both clients exited: $(rdma res show qp)"
  # Times, in guest b's clock: detection = first fault after the cut;
  # recovery = the reconnect after the restore.
  local fault_at reco_at
  fault_at=$(grep -h "faulted" "$out/b-lossless.err" | head -n1 | cut -d' ' -f1)
  reco_at=$(grep -h "reconnected to" "$out/b-lossless.err" | tail -n1 | cut -d' ' -f1)
  {
    echo "first_fault=$(date -d "$fault_at" +%s.%N)"
    echo "reconnected=$(date -d "$reco_at" +%s.%N)"
  } >"$out/b.partition-times"
  log "lossless: fault at $fault_at, reconnected at $reco_at; $(num "$out/b-lossless.json" faults) fault(s)," \
      "$(num "$out/b-lossless.json" reconnects) reconnect(s), --verify clean"
  log "lossy: exit $st_lossy, $(num "$c" errors) error(s), $(num "$c" lost) lost (reported)"
  touch "$out/b.done"
}

# ---------------------------------------------------------------- failover
# RDMA -> TCP failover inside one lossless session across the wire
# (docs/rdma-transport.md §12): both ends run async+rdma with the TCP
# fallback. Guest a's server listens on both; guest b's client runs --verify
# at a fixed rate while guest a drops every RoCEv2 packet it sends (tc: UDP
# to port 4791, on eth0's egress) for 6 s (SIPHON_PAIR_ROCE_DOWN); IP and TCP stay
# up. The session must move to TCP, move back to RDMA once a probe connects
# after the drop is lifted, and lose, duplicate or reorder nothing; the
# client's switch counters must equal its logged switches, one each way.
# (Not `rdma link delete rxe0`: with a process holding rxe0 open, that
# command blocks in the kernel until the process exits, docs/testing-rxe.md.)
failover_conf() {
  conf "$work/rdma.conf" "$(retry_conf)" "$(idle_conf)" \
    "siphon_ms_fallback_type = async+posix" \
    "siphon_ms_fallback_after = 1" \
    "siphon_ms_fallback_retry_interval = 2" \
    "ms_connection_ready_timeout = 3" \
    "debug_ms_session = 1" "$@"
}
# wait_on_tcp WHEN: up to 90 s for guest b's session to be on TCP (b.on-tcp);
# guest b's failure ends ours, a timeout is only logged ("... within 90 s WHEN").
wait_on_tcp() {
  local i
  for i in $(seq 1 450); do
    [ -e "$out/b.on-tcp" ] && return 0
    [ -e "$out/b.failed" ] && fail "guest b failed: $(cat "$out/b.failed")"
    sleep 0.2
  done
  log "guest b's session did not switch to TCP within 90 s $1"
}
failover_a() {
  local down_s=${1:-6} i
  failover_conf
  start_bg server "server listening on" "$bench" -c "$work/rdma.conf" server --bind "$ADDR:6830" \
    --duration 280 --json "$out/a-server.json"
  # Bound on both stacks: the RDMA address first, the TCP fallback's last.
  grep -qE "server listening on \[v2:$ADDR:6830/[0-9]+,v2:$ADDR:[0-9]+/[0-9]+\]" "$out/a-server.err" "$out/a-server.out" ||
    fail "the server does not advertise a fallback address: $(grep -h 'listening on' "$out"/a-server.* | head -n1)"
  touch "$out/a.ready"
  wait_for "$out/b.flowing" 120 "traffic from guest b"
  sleep 1
  # Every RoCEv2 packet this guest sends is dropped: its RC ACKs, READ
  # responses, SENDs and the CM's MADs (UD on QP1, also UDP 4791).
  tc qdisc add dev "$SIPHON_RXE_NETDEV" root handle 1: prio || fail "tc qdisc add failed"
  tc filter add dev "$SIPHON_RXE_NETDEV" parent 1: protocol ip prio 1 u32 \
    match ip protocol 17 0xff match ip dport 4791 0xffff action drop || fail "tc filter add failed"
  date +%s.%N >"$out/a.roce-down"
  log "RoCEv2 dropped on $SIPHON_RXE_NETDEV's egress for ${down_s} s (IP and TCP stay up)"
  # At least down_s seconds, and until guest b's session is on TCP (b.on-tcp;
  # at most 90 s): on a loaded host a starved guest may need longer.
  sleep "$down_s"
  wait_on_tcp "of the drop; lifting it"
  log "RoCE drop counters: $(tc -s filter show dev "$SIPHON_RXE_NETDEV" parent 1: | grep -o 'Sent [0-9]* bytes [0-9]* pkt' | head -n1)"
  tc qdisc del dev "$SIPHON_RXE_NETDEV" root || fail "tc qdisc del failed"
  date +%s.%N >"$out/a.roce-up"
  log "RoCEv2 flows again"
  wait_for "$out/b.done" 240 "end of guest b's run"
  stop_wait "$pid_server" "the server"
  expect "$out/a-server.json" fallback_switches -eq 0 "the accepting side never switches (the client decides)"
}
failover_b() {
  failover_conf
  wait_for "$out/a.ready" 120 "the server in guest a"
  # 30 s at 20 per second: the drop (from about 2 s in, 6 s long, up to
  # twice that on a loaded host), the probe that finds RDMA back (every 2 s)
  # and some seconds over RDMA again all fit in it.
  local n=${SIPHON_PAIR_FAILOVER_COUNT:-600} c=$out/b-client.json k st=0 i
  "$bench" -c "$work/rdma.conf" client --target "$PEER:6830" --count "$n" --rate 20 \
    --size-dist 100:50,32K:50 --verify --quiet --connect-timeout 60 --drain-timeout 150 \
    --json "$c" >"$out/b-client.out" 2>"$out/b-client.err" &
  local p=$!
  pids+=("$p")
  for i in $(seq 1 600); do
    grep -q 'rdma_cm connections use' "$out/b-client.err" 2>/dev/null && break
    sleep 0.1
  done
  sleep 1
  touch "$out/b.flowing"
  log "traffic flowing over RDMA; guest a drops RoCEv2 next"
  # Tell guest a when the session is on TCP (it lifts the drop after that).
  while kill -0 "$p" 2>/dev/null; do
    grep -q "switches from async+rdma to async+posix" "$out/b-client.err" 2>/dev/null && { touch "$out/b.on-tcp"; break; }
    sleep 0.2
  done
  wait "$p" || st=$?
  [ "$st" -eq 0 ] || fail "the client exited with status $st"
  grep -q '"ms_type":"async+rdma"' "$c" || fail "the client did not run async+rdma"
  expect "$c" checked -eq "$n" "--verify checked every message"
  for k in lost duplicated reordered corrupted; do expect "$c" $k -eq 0 "through the failover and back: nothing $k"; done
  expect "$c" errors -eq 0 "no errors: the application never saw a reset"
  local to_tcp to_rdma
  to_tcp=$(grep -c "switches from async+rdma to async+posix" "$out/b-client.err" || true)
  to_rdma=$(grep -c "switches from async+posix back to async+rdma" "$out/b-client.err" || true)
  [ "$to_tcp" -ge 1 ] || fail "the session never switched to TCP (no 'switches from async+rdma to async+posix' line)"
  [ "$to_rdma" -ge 1 ] || fail "the session never came back to RDMA (no 'switches ... back to async+rdma' line)"
  expect "$c" fallback_switches -eq "$to_tcp" "the fallback counter equals the logged switches to TCP"
  expect "$c" primary_switches -eq "$to_rdma" "the primary counter equals the logged switches back to RDMA"
  log "client: $n messages, --verify clean; switches to TCP $to_tcp, back to RDMA $to_rdma (counters agree)"
  grep -h "switches from" "$out/b-client.err" | cut -c1-200
  touch "$out/b.done"
}

# ----------------------------------------------------------------- removal
# The RDMA device taken away under a running server and given back
# (docs/rdma-transport.md §13): guest a runs `rdma link delete rxe0` while
# guest b's lossless client streams to it with --verify. The delete must
# return (rxe has no disassociate_ucontext: the kernel waits until the
# server has released every object it made on rxe0; a stack that holds its
# device makes the command hang for good), the session must move to TCP,
# and once `rdma link add rxe0` brings the device back the server must
# reopen it and listen again, and the session move back to RDMA, with
# nothing lost. Guest a gets a second device first (rxe1 on a dummy
# netdev): librdmacm does not sync its device list while no device at all
# is listed, so with rxe0 alone it would keep its context of the dead
# device open and the delete would wait for it (§13).
removal_a() {
  local i st
  failover_conf "ms_async_rdma_device_check_interval = 1"
  ip link add dummy1 type dummy || fail "cannot create dummy1 (is the dummy module loaded?)"
  ip link set dummy1 up
  ip addr add 198.51.100.1/24 dev dummy1
  rdma link add rxe1 type rxe netdev dummy1 || fail "rdma link add rxe1 failed"
  log "second RDMA device: rxe1 on dummy1 ($(rdma link show | tr '\n' ' '))"
  start_bg server "server listening on" "$bench" -c "$work/rdma.conf" server --bind "$ADDR:6830" \
    --duration 280 --json "$out/a-server.json"
  touch "$out/a.ready"
  wait_for "$out/b.flowing" 120 "traffic from guest b"
  sleep 1
  date +%s.%N >"$out/a.delete-start"
  rdma link delete "$DEV" &
  local del=$!
  for i in $(seq 1 300); do
    kill -0 "$del" 2>/dev/null || break
    sleep 0.2
  done
  if kill -0 "$del" 2>/dev/null; then
    log "devices: $(ls /sys/class/infiniband 2>/dev/null | tr '\n' ' '); the server's uverbs files:" \
      "$(ls -l /proc/"$pid_server"/fd 2>/dev/null | grep -c uverbs)"
    fail "rdma link delete $DEV did not return within 60 s: the server still holds objects of $DEV"
  fi
  st=0
  wait "$del" || st=$?
  [ "$st" -eq 0 ] || fail "rdma link delete $DEV exited with status $st"
  log "rdma link delete $DEV returned after $(awk -v a="$(cat "$out/a.delete-start")" -v b="$(date +%s.%N)" \
    'BEGIN { printf "%.1f", b - a }') s"
  grep -q "RDMA device $DEV went away" "$out/a-server.err" || fail "the server did not log the removal"
  grep -q "RDMA device $DEV released" "$out/a-server.err" || fail "the server did not log the release"
  wait_on_tcp "of the removal"
  rdma link add "$DEV" type rxe netdev "$SIPHON_RXE_NETDEV" || fail "rdma link add $DEV failed"
  log "$DEV added again on $SIPHON_RXE_NETDEV"
  for i in $(seq 1 300); do
    grep -q "RDMA device $DEV is back" "$out/a-server.err" && break
    sleep 0.2
  done
  grep -h "RDMA device $DEV is back" "$out/a-server.err" || fail "the server did not reopen $DEV within 60 s"
  wait_for "$out/b.done" 240 "end of guest b's run"
  stop_wait "$pid_server" "the server"
  [ "$(grep -c "RDMA device $DEV went away" "$out/a-server.err")" -eq 1 ] || fail "more than one removal logged"
  expect "$out/a-server.json" fallback_switches -eq 0 "the accepting side never switches (the client decides)"
  log "server: released $DEV on removal, reopened it when it came back"
}

case "$scenario" in
  wire)
    mtu=${4:?path MTU}
    tos=${5:?TOS byte (ms_async_rdma_dscp)}
    with_objd=${6:-1}
    # The ACK timeout at 2^20 x 4.096 us (4.3 s) instead of the default 14
    # (67 ms): two TCG guests on a loaded host often take longer than 67 ms
    # to ACK, and a retransmission on rxe (Debian 12's 6.1 kernel) can wedge
    # the QP's requester: the retransmitted packet is the last the QP ever
    # sends, and every WR posted after it (a read_done, a credit update,
    # the READs of a transfer) stays in its send queue until a transfer
    # timeout faults the connection (docs/testing-rxe.md, "What the
    # two-host tier found"). The partition scenario keeps the default: its
    # cut must outlast the retry budget.
    conf "$work/rdma.conf" "ms_async_rdma_path_mtu = $mtu" "ms_async_rdma_dscp = $tos" "ms_async_rdma_timeout = 20"
    cp "$work/rdma.conf" "$work/objd.conf"
    dump_loop
    "wire_$role"
    ;;
  partition)
    "partition_$role" "$@"
    ;;
  failover)
    "failover_$role" "${4:-6}"
    ;;
  removal)
    # Guest b's half is failover's: the client with --verify, the switches.
    if [ "$role" = a ]; then removal_a; else failover_b; fi
    ;;
  *) echo "unknown scenario '$scenario' (wire, partition, failover, removal)" >&2; exit 2 ;;
esac
log "passed"
