#!/usr/bin/env bash
# Option variants of the TCP stack against each other, interleaved rounds,
# with iperf3's one stream as the same-run baseline (docs/performance.md,
# "Issue 20").
#
#   tools/bench/tcp-ab.sh [--bench PATH] [--rounds N] [--seconds N] [--sizes "4M 1M"]
#                         [--pin] [--title TEXT] --variant NAME=K=V[,K=V...] ...
#
# Each round: iperf3 -l 1M one stream, then for each size (siphon-bench client
# --pattern sink --conns 1, two processes on 127.0.0.1, async+posix) one run
# per variant, back to back, with the variant's options set in both processes
# (NAME= with nothing after it: the defaults). Prints one row per run: Gbit/s,
# the ratio to iperf3 of the round, CPU µs per message of both processes, of
# the sender (the client) and of the receiver (the server).
# --pin runs every process (iperf3's too) on CPU 0, where each wake-up is a
# context switch on the same CPU rather than a cross-CPU one.
# tools/bench/zerocopy-ab.sh is this with the MSG_ZEROCOPY variants.
set -euo pipefail
. "$(dirname "$0")/lib.sh"   # here, root, bench, free_port
rounds=3
seconds=5
sizes="4M 1M"
pin=""
title="TCP option variants"
names=()
variants=()
while [ $# -gt 0 ]; do
  case "$1" in
    --bench) bench=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --pin) pin="taskset -c 0"; shift ;;
    --title) title=$2; shift 2 ;;
    --variant) names+=("${2%%=*}"); variants+=("${2#*=}"); shift 2 ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "tcp-ab.sh: unknown argument '$1' (--help)" >&2; exit 2 ;;
  esac
done
[ ${#names[@]} -gt 0 ] || { echo "tcp-ab.sh: give at least one --variant NAME=K=V[,K=V...]" >&2; exit 2; }
[ -x "$bench" ] || { echo "tcp-ab.sh: $bench is not built (cmake --build --preset release --target siphon-bench)" >&2; exit 1; }
for tool in iperf3 python3; do
  command -v "$tool" >/dev/null || { echo "tcp-ab.sh: $tool is missing (SIPHON_DEPS=bench tools/dev/install-deps.sh)" >&2; exit 1; }
done
tmp=$(mktemp -d /tmp/siphon-tcp-ab.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

iperf3_gbit() {
  local port
  port=$(free_port)
  $pin iperf3 -s -1 -B 127.0.0.1 -p "$port" >"$tmp/iperf3-server.log" 2>&1 &
  local ipid=$!
  sleep 0.5
  $pin iperf3 -c 127.0.0.1 -p "$port" -t "$seconds" -l 1M -J >"$tmp/iperf3.json" 2>/dev/null || true
  kill "$ipid" 2>/dev/null || true
  wait "$ipid" 2>/dev/null || true
  python3 -c 'import json,sys
try: print(json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"]/1e9)
except Exception: print("nan")' "$tmp/iperf3.json"
}

# siphon SIZE SET...: prints "gbit cpu_us_per_msg sender_cpu_us_per_msg receiver_cpu_us_per_msg"
siphon() {
  local size=$1
  shift
  local sets=()
  local s
  for s in "$@"; do sets+=(--set "$s"); done
  local slog="$tmp/server.log"
  rm -f "$slog" "$tmp/client.json"
  $pin "$bench" server --ms-type async+posix --bind 127.0.0.1 --once --duration $((seconds + 60)) "${sets[@]}" \
    >"$tmp/server.out" 2>"$slog" &
  local spid=$! addr="" i
  for i in $(seq 1 200); do
    addr=$(sed -n 's/.*server listening on \([^ ]*\) .*/\1/p' "$slog" 2>/dev/null | head -n1)
    [ -n "$addr" ] && break
    sleep 0.05
  done
  if [ -n "$addr" ]; then
    $pin "$bench" client --ms-type async+posix --target "$addr" --pattern sink --size "$size" --conns 1 \
      --duration "$seconds" --warmup 1 --quiet --json "$tmp/client.json" "${sets[@]}" >"$tmp/client.out" 2>&1 || true
  fi
  kill "$spid" 2>/dev/null || true
  wait "$spid" 2>/dev/null || true
  python3 - "$tmp/client.json" <<'EOF'
import json, sys
try:
    r = json.load(open(sys.argv[1]))["results"]
    c = r["cpu"]
    n = r["messages"]
    snd = (c["client_user_s"] + c["client_system_s"]) * 1e6 / n
    print(r["gbit_per_s"], c["us_per_msg"], snd, c["us_per_msg"] - snd)
except Exception as e:
    print("nan nan nan nan")
EOF
}

commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
echo "# $title at $commit, $(date -u '+%Y-%m-%d %H:%M UTC'), kernel $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)${pin:+, every process on CPU 0}"
echo
for i in "${!names[@]}"; do echo "- ${names[$i]}: ${variants[$i]:-(defaults)}"; done
echo
echo "| round | size | variant | Gbit/s | × iperf3 | CPU µs/msg (both) | sender | receiver |"
echo "|---|---|---|---|---|---|---|---|"
for ((round = 1; round <= rounds; round++)); do
  ip=$(iperf3_gbit)
  printf '| %d | iperf3 -l 1M | one stream | %.2f | 1.00 | | | |\n' "$round" "$ip"
  for size in $sizes; do
    for i in "${!names[@]}"; do
      IFS=, read -r -a sets <<<"${variants[$i]}"
      read -r g cpu snd rcv < <(siphon "$size" ${sets[@]+"${sets[@]}"})
      python3 -c 'import sys
r, size, mode, g, cpu, snd, rcv, ip = sys.argv[1:]
def f(x, d=2):
    try: return f"{float(x):.{d}f}"
    except Exception: return "n/a"
try: ratio = f"{float(g)/float(ip):.2f}"
except Exception: ratio = "n/a"
print(f"| {r} | {size} | {mode} | {f(g)} | {ratio} | {f(cpu,0)} | {f(snd,0)} | {f(rcv,0)} |")' "$round" "$size" "${names[$i]}" "$g" "$cpu" "$snd" "$rcv" "$ip"
    done
  done
  echo "load after round $round: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
done
