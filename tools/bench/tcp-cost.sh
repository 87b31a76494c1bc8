#!/usr/bin/env bash
# Where a two-process siphon-bench run over TCP spends its time, per message
# and per side (docs/performance.md, "Issue 20"): CPU time (task-clock),
# context switches and the socket system calls (sendmsg, recvfrom,
# epoll_wait, futex, write/read for eventfds) counted by `perf stat` over a
# 3-second window of steady state, divided by the messages the client
# measured in it; and each thread's CPU and context switches over the same
# window from /proc/PID/task/*/stat and status. No PMU is needed (the VMs
# this was written on have none).
#
#   tools/bench/tcp-cost.sh [--bench PATH] [--set K=V]... WORKLOAD [-- extra siphon-bench client flags]
#
#   --set K=V  an option for both processes (e.g. siphon_ms_tcp_rcvlowat=0,
#              which acts on the receiving side: the server)
#
#   WORKLOAD  sink4M  --pattern sink --size 4M --conns 1 (vs iperf3 one stream)
#             sink1M  --pattern sink --size 1M --conns 1
#             echo64  --pattern echo --size 64 --conns 1 --inflight 1 (vs sockperf ping-pong)
set -euo pipefail
. "$(dirname "$0")/lib.sh"   # here, root, bench, free_port
both=()
while :; do
  case "${1:-}" in
    --bench) bench=$2; shift 2 ;;
    --set) both+=(--set "$2"); shift 2 ;;
    *) break ;;
  esac
done
workload=${1:?"usage: tcp-cost.sh [--bench PATH] [--set K=V]... sink4M|sink1M|echo64 [-- flags]"}
shift
[ "${1:-}" = -- ] && shift
case "$workload" in
  sink4M) args=(--pattern sink --size 4M --conns 1) ;;
  sink1M) args=(--pattern sink --size 1M --conns 1) ;;
  echo64) args=(--pattern echo --size 64 --conns 1 --inflight 1) ;;
  *) echo "tcp-cost.sh: unknown workload '$workload'" >&2; exit 2 ;;
esac
command -v perf >/dev/null || { echo "tcp-cost.sh: perf not found (apt-get install linux-perf)" >&2; exit 2; }
[ -x "$bench" ] || { echo "tcp-cost.sh: $bench not built (cmake --build --preset release --target siphon-bench)" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'kill "${spid:-}" "${cpid:-}" 2>/dev/null || true; rm -rf "$tmp"' EXIT
"$bench" server --ms-type async+posix --bind 127.0.0.1 --once --duration 40 ${both[@]+"${both[@]}"} >"$tmp/server.out" 2>"$tmp/server.log" &
spid=$!
addr=""
for _ in $(seq 200); do
  addr=$(sed -n 's/.*server listening on \([^ ]*\) .*/\1/p' "$tmp/server.log" | head -n1)
  [ -n "$addr" ] && break
  sleep 0.05
done
[ -n "$addr" ] || { echo "tcp-cost.sh: the server did not start:" >&2; cat "$tmp/server.log" >&2; exit 1; }
"$bench" client --ms-type async+posix --target "$addr" --duration 5 --warmup 1 --quiet --json "$tmp/client.json" \
  "${args[@]}" ${both[@]+"${both[@]}"} "$@" >"$tmp/client.out" 2>&1 &
cpid=$!
sleep 1.5  # connected, past the first second of warm-up

threads() {  # pid tid comm utime stime voluntary nonvoluntary
  local p t
  for p in $spid $cpid; do
    for t in /proc/$p/task/*; do
      echo "$p ${t##*/} $(cat "$t/comm") $(awk '{print $14, $15}' "$t/stat")" \
        "$(awk '/^(voluntary|nonvoluntary)_ctxt_switches/ {printf "%s ", $2}' "$t/status")"
    done 2>/dev/null || true
  done
}
threads >"$tmp/before"
events=task-clock,context-switches,cpu-migrations
for s in sendmsg recvfrom epoll_wait futex read write setsockopt; do events+=",syscalls:sys_enter_$s"; done
perf stat -x, -e "$events" -p "$spid" -o "$tmp/perf.server" -- sleep 3 &
perf stat -x, -e "$events" -p "$cpid" -o "$tmp/perf.client" -- sleep 3
wait %3 2>/dev/null || true
threads >"$tmp/after"
wait "$cpid" || true
wait "$spid" || true
python3 - "$tmp" "$spid" "$cpid" <<'EOF'
import json, sys
d, spid, cpid = sys.argv[1:4]
r = json.load(open(f"{d}/client.json"))["results"]
msgs = r["msgs_per_s"] * 3.0  # messages in the 3 s window
print(f"client: {r['gbit_per_s']:.2f} Gbit/s, {r['msgs_per_s']:.0f} msgs/s, p50 {r['latency_ns']['percentiles']['p50']/1000:.1f} µs, "
      f"CPU {r['cpu']['us_per_msg']:.1f} µs/msg (both sides, whole run)")
print("| side | CPU µs/msg | cs/msg | sendmsg | recvfrom | epoll_wait | futex | read | write | setsockopt |")
print("|---|---|---|---|---|---|---|---|---|---|")
for side in ("client", "server"):
    v = {}
    for line in open(f"{d}/perf.{side}"):
        f = line.strip().split(",")
        if len(f) > 2 and f[0] and not line.startswith("#"):
            try: v[f[2].replace("syscalls:sys_enter_", "")] = float(f[0])
            except ValueError: pass
    per = lambda k: f"{v.get(k, 0) / msgs:.2f}"
    print(f"| {side} | {v.get('task-clock', 0) * 1000 / msgs:.1f} | {per('context-switches')} | {per('sendmsg')} | "
          f"{per('recvfrom')} | {per('epoll_wait')} | {per('futex')} | {per('read')} | {per('write')} | {per('setsockopt')} |")
def load(p):
    t = {}
    for line in open(p):
        f = line.split()
        if len(f) >= 7: t[(f[0], f[1])] = (f[2], int(f[3]) + int(f[4]), int(f[5]), int(f[6]))
    return t
b, a = load(f"{d}/before"), load(f"{d}/after")
print("\nthreads over the window (CPU ms, voluntary / involuntary context switches per message):")
for k in sorted(a):
    if k in b:
        cpu = (a[k][1] - b[k][1]) * 10
        vcs, ncs = (a[k][2] - b[k][2]) / msgs, (a[k][3] - b[k][3]) / msgs
        if cpu or vcs > 0.01:
            print(f"  {'server' if k[0] == spid else 'client'} {a[k][0]:<14} {cpu:5d} ms  {vcs:.2f} / {ncs:.2f}")
EOF
