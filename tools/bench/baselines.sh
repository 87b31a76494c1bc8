#!/usr/bin/env bash
# Measures siphon-bench next to the host's own TCP baselines, in the same run,
# on 127.0.0.1, and prints one Markdown table with ratios
# (docs/benchmarking.md, "Baselines").
#
#   tools/bench/baselines.sh [--bench PATH] [--seconds N] [--runs N] [--pin none|same|split]
#                            [--ceph-conf FILE [--ceph-pool POOL] [--rados-only]]
#
#   throughput  iperf3, one TCP stream (128 KiB and 1 MiB writes; 1 MiB is its
#               largest, so it is the baseline of the 4 MiB row too)
#               vs siphon-bench client --pattern sink --conns 1 (128 KiB, 1 MiB, 4 MiB)
#   latency     sockperf ping-pong over TCP (64 B and 4 KiB)
#               vs siphon-bench client --pattern echo --conns 1 --inflight 1
#   ucx         ucx_perftest tag_lat over TCP (UCX_TLS=tcp), 4000 x --seconds iterations,
#               and ucp_am_bw at 4 KiB (one-way message rate, 64 outstanding
#               sends) vs siphon-bench client --pattern sink --size 4096
#               --inflight 64 (msgs/s); only if installed (README's test
#               command installs ucx-utils)
#   rados       with --ceph-conf (a cluster is available): rados bench vs
#               siphon-bench rados, -t 16, 4 KiB and 4 MiB, write and seq, on
#               POOL (default bench) through tools/bench/rados_side_by_side.py:
#               throughput and client CPU per op (the whole process, from the
#               kernel's rusage); --rados-only skips the TCP rows
#
# Every pair runs as two processes (server, client) like the baselines.
# --pin same puts both on CPU 0, split puts the server on CPU 0 and the client
# on CPU 1 (taskset); the default leaves placement to the kernel. With
# --runs N each figure is the median of N runs. Install the baselines with
# SIPHON_DEPS=bench tools/dev/install-deps.sh.
set -euo pipefail
. "$(dirname "$0")/lib.sh"   # here, root, bench, free_port
seconds=5
runs=1
pin=none
ceph_conf=""
ceph_pool=bench
rados_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --bench) bench=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --pin) pin=$2; shift 2 ;;
    --ceph-conf) ceph_conf=$2; shift 2 ;;
    --ceph-pool) ceph_pool=$2; shift 2 ;;
    --rados-only) rados_only=1; shift ;;
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    *) echo "baselines.sh: unknown argument '$1' (--help)" >&2; exit 2 ;;
  esac
done
case "$pin" in none|same|split) ;; *) echo "baselines.sh: --pin none|same|split" >&2; exit 2 ;; esac
[[ "$seconds" =~ ^[0-9]+$ && "$seconds" -ge 1 ]] || { echo "baselines.sh: --seconds takes a whole number >= 1" >&2; exit 2; }
[[ "$runs" =~ ^[0-9]+$ && "$runs" -ge 1 ]] || { echo "baselines.sh: --runs takes a whole number >= 1" >&2; exit 2; }
[ -x "$bench" ] || { echo "baselines.sh: $bench is not built (cmake --preset release && cmake --build build/release --target siphon-bench)" >&2; exit 1; }
if [ "$rados_only" = 1 ] && [ -z "$ceph_conf" ]; then
  echo "baselines.sh: --rados-only needs --ceph-conf FILE (a cluster to run rados bench against)" >&2; exit 2
fi
if [ -n "$ceph_conf" ]; then
  [ -r "$ceph_conf" ] || { echo "baselines.sh: --ceph-conf $ceph_conf is not a readable file" >&2; exit 2; }
  command -v rados >/dev/null || { echo "baselines.sh: rados is missing (SIPHON_DEPS=interop tools/dev/install-deps.sh)" >&2; exit 1; }
fi
tools_needed="python3"
[ "$rados_only" = 1 ] || tools_needed="iperf3 sockperf python3"
for tool in $tools_needed; do
  command -v "$tool" >/dev/null || { echo "baselines.sh: $tool is missing (SIPHON_DEPS=bench tools/dev/install-deps.sh)" >&2; exit 1; }
done

tmp=$(mktemp -d /tmp/siphon-baselines.XXXXXX)
# Every function below stops the servers it started before it returns.
cleanup() { rm -rf "$tmp"; }
trap cleanup EXIT

server_cpu() { case "$pin" in same|split) echo "taskset -c 0" ;; *) echo "" ;; esac; }
client_cpu() { case "$pin" in same) echo "taskset -c 0" ;; split) echo "taskset -c 1" ;; *) echo "" ;; esac; }
median() { python3 -c 'import sys,statistics; v=[float(x) for x in sys.argv[1:]]; print(statistics.median(v))' "$@"; }
# wait_for FILE REGEX: up to 10 s.
wait_for() {
  local i
  for i in $(seq 1 200); do grep -Eq "$2" "$1" 2>/dev/null && return 0; sleep 0.05; done
  echo "baselines.sh: timed out waiting for /$2/ in $1" >&2
  cat "$1" >&2
  return 1
}

# --- the measurements (each prints one number) ---------------------------------

iperf3_gbit() {  # WRITE_SIZE
  local port out attempt gbit
  # A run that fails (iperf3's control connection occasionally does on a
  # loaded host) is retried once; its error goes to stderr.
  for attempt in 1 2; do
    port=$(free_port)
    $(server_cpu) iperf3 -s -1 -B 127.0.0.1 -p "$port" --forceflush >"$tmp/iperf3-server.log" 2>&1 &
    local ipid=$!
    out="$tmp/iperf3.json"
    : >"$out"
    if wait_for "$tmp/iperf3-server.log" "listening"; then
      $(client_cpu) iperf3 -c 127.0.0.1 -p "$port" -t "$seconds" -l "$1" -J >"$out" || true
    fi
    kill "$ipid" 2>/dev/null || true
    wait "$ipid" 2>/dev/null || true
    gbit=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["end"]["sum_received"]["bits_per_second"]/1e9)' \
      "$out" 2>/dev/null) && { echo "$gbit"; return 0; }
    echo "baselines.sh: iperf3 -l $1 (attempt $attempt) gave no result: $(python3 -c 'import json,sys
try: print(json.load(open(sys.argv[1])).get("error", "no error field"))
except Exception as e: print("unreadable output:", e)' "$out"); server: $(tail -n2 "$tmp/iperf3-server.log" | tr '\n' ' ')" >&2
  done
}

sockperf_rtt() {  # MESSAGE_SIZE -> "p50 p99 avg" as round trips (µs)
  local port out
  port=$(free_port)
  $(server_cpu) sockperf server -i 127.0.0.1 -p "$port" --tcp >"$tmp/sockperf-server.log" 2>&1 &
  local spid=$!
  sleep 0.5
  out="$tmp/sockperf.log"
  $(client_cpu) sockperf ping-pong -i 127.0.0.1 -p "$port" --tcp -m "$1" -t "$seconds" >"$out" 2>&1
  kill "$spid" 2>/dev/null || true
  wait "$spid" 2>/dev/null || true
  # sockperf reports half a round trip; double it to compare round trips.
  python3 - "$out" <<'EOF'
import re, sys
t = re.sub(r"\x1b\[[0-9;]*m", "", open(sys.argv[1]).read())
p50 = float(re.search(r"percentile 50\.000 =\s*([0-9.]+)", t).group(1))
p99 = float(re.search(r"percentile 99\.000 =\s*([0-9.]+)", t).group(1))
avg = float(re.search(r"avg-latency=([0-9.]+)", t).group(1))
print(2 * p50, 2 * p99, 2 * avg)
EOF
}

# siphon_run KEY ARGS...: server + client, prints the client JSON's KEY
# ("gbit" | "rate": msgs/s | "rtt": "p50 p99 avg" in µs).
siphon_run() {
  local key=$1
  shift
  local slog="$tmp/siphon-server.log"
  # The server picks a free port and prints its address on stderr.
  rm -f "$slog"
  # The baselines are TCP tools, so siphon-bench runs its TCP stack (the
  # embedded default would be async+rdma on the software fabric).
  $(server_cpu) "$bench" server --ms-type async+posix --bind 127.0.0.1 --once --duration $((seconds + 60)) >"$tmp/siphon-server.out" 2>"$slog" &
  local spid=$!
  rm -f "$tmp/siphon.json"
  local addr="" i
  for i in $(seq 1 200); do
    addr=$(sed -n 's/.*server listening on \([^ ]*\) .*/\1/p' "$slog" 2>/dev/null | head -n1)
    [ -n "$addr" ] && break
    sleep 0.05
  done
  if [ -n "$addr" ]; then
    $(client_cpu) "$bench" client --ms-type async+posix --target "$addr" --duration "$seconds" --warmup 1 --quiet --json "$tmp/siphon.json" \
      "$@" >"$tmp/siphon-client.out" || true
  else
    : >"$tmp/siphon-client.out"
    kill "$spid" 2>/dev/null || true
  fi
  wait "$spid" 2>/dev/null || true
  [ -s "$tmp/siphon.json" ] || { echo "baselines.sh: siphon-bench client failed:" >&2; cat "$tmp/siphon-client.out" "$slog" >&2; return 0; }
  python3 - "$tmp/siphon.json" "$key" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))["results"]
if sys.argv[2] == "gbit":
    print(r["gbit_per_s"])
elif sys.argv[2] == "rate":
    print(r["msgs_per_s"])
else:
    l = r["latency_ns"]
    print(l["percentiles"]["p50"] / 1000, l["percentiles"]["p99"] / 1000, l["mean"] / 1000)
EOF
}

# ucx_pair CLIENT_ARGS...: a ucx_perftest server and one client run over
# UCX's TCP transport; the client's output goes to $tmp/ucx.log.
ucx_pair() {
  local port
  port=$(free_port)
  UCX_TLS=tcp UCX_NET_DEVICES=lo $(server_cpu) ucx_perftest -p "$port" >"$tmp/ucx-server.log" 2>&1 &
  local upid=$!
  sleep 1
  UCX_TLS=tcp UCX_NET_DEVICES=lo $(client_cpu) ucx_perftest 127.0.0.1 -p "$port" "$@" >"$tmp/ucx.log" 2>&1 || true
  kill "$upid" 2>/dev/null || true
  wait "$upid" 2>/dev/null || true
}

ucx_rtt() {  # MESSAGE_SIZE -> "p50 avg" round trips (µs), or nothing
  ucx_pair -t tag_lat -s "$1" -n $((4000 * seconds)) -w $((400 * seconds))
  # The closing line (UCX 1.13): "Final: ITERATIONS P50 AVERAGE OVERALL ...",
  # latencies in µs, one way.
  python3 - "$tmp/ucx.log" <<'EOF'
import sys
rows = [l.split() for l in open(sys.argv[1]) if l.split()[:1] == ["Final:"]]
if rows:
    r = rows[-1]
    print(2 * float(r[2]), 2 * float(r[4]))
EOF
}

ucx_am_rate() {  # MESSAGE_SIZE -> one-way messages/s (ucp_am_bw, 64 outstanding), or nothing
  ucx_pair -t ucp_am_bw -s "$1" -O 64 -n $((60000 * seconds)) -w $((6000 * seconds))
  # "Final: ITERATIONS LAT_TYPICAL LAT_AVG LAT_OVERALL MB/s_AVG MB/s_OVERALL
  # MSGS/s_AVG MSGS/s_OVERALL": the overall message rate.
  python3 - "$tmp/ucx.log" <<'EOF'
import sys
rows = [l.split() for l in open(sys.argv[1]) if l.split()[:1] == ["Final:"]]
if rows and len(rows[-1]) >= 9:
    print(float(rows[-1][8]))
EOF
}

# ratio A B: A/B with two decimals, "n/a" when either is missing.
ratio() { python3 -c 'import sys
try: print(f"{float(sys.argv[1])/float(sys.argv[2]):.2f}")
except Exception: print("n/a")' "${1:-}" "${2:-}"; }
num() { python3 -c 'import sys
try: print(f"{float(sys.argv[1]):.{int(sys.argv[2])}f}")
except Exception: print("n/a")' "${1:-}" "$2"; }

# repeat N CMD...: median of N runs, field by field.
repeat() {
  local n=$1
  shift
  local i out=()
  for ((i = 0; i < n; i++)); do out+=("$("$@")"); done
  python3 - "${out[@]}" <<'EOF'
import statistics, sys
rows = [[float(x) for x in a.split()] for a in sys.argv[1:] if a.strip()]
if rows:
    print(" ".join(f"{statistics.median(c):.3f}" for c in zip(*rows)))
EOF
}

# --- the run ------------------------------------------------------------------------

commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
cpu_model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1)
echo "# siphon-bench baselines"
echo
echo "Machine: $(nproc) CPUs ($cpu_model), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)," \
  "$(. /etc/os-release && echo "$PRETTY_NAME"), kernel $(uname -r); load average at start $(cut -d' ' -f1-3 /proc/loadavg)."
echo "Date: $(date -u +%Y-%m-%dT%H:%MZ); commit $commit; $seconds s per measurement, median of $runs run(s), pinning: $pin."
echo "siphon-bench: $("$bench" --version), 127.0.0.1, server and client as two processes, ms_type async+posix."
echo

echo "| workload | baseline | baseline | siphon-bench | siphon-bench / baseline |"
echo "|---|---|---|---|---|"
tcp_rows() {
for size in 128K 1M 4M; do
  # iperf3 refuses writes above 1 MiB ("block size too large"), so the 4 MiB
  # messages are held against its largest writes, 1 MiB.
  isize=$size
  [ "$size" = 4M ] && isize=1M
  base=$(repeat "$runs" iperf3_gbit "$isize")
  sb=$(repeat "$runs" siphon_run gbit --pattern sink --size "$size" --conns 1)
  label="$size writes / messages"
  [ "$isize" != "$size" ] && label="$size messages (iperf3: $isize writes, its maximum)"
  echo "| one stream, $label | iperf3 | $(num "$base" 2) Gbit/s | $(num "$sb" 2) Gbit/s | $(ratio "$sb" "$base") |"
done
for size in 64 4096; do
  read -r bp50 bp99 bavg <<<"$(repeat "$runs" sockperf_rtt "$size")"
  read -r sp50 sp99 savg <<<"$(repeat "$runs" siphon_run rtt --pattern echo --size "$size" --conns 1 --inflight 1)"
  echo "| ping-pong $size B, round trip p50 | sockperf | $(num "${bp50:-}" 1) µs | $(num "${sp50:-}" 1) µs | $(ratio "${sp50:-}" "${bp50:-}") |"
  echo "| ping-pong $size B, round trip p99 | sockperf | $(num "${bp99:-}" 1) µs | $(num "${sp99:-}" 1) µs | $(ratio "${sp99:-}" "${bp99:-}") |"
done
if command -v ucx_perftest >/dev/null; then
  for size in 64 4096; do
    read -r up50 uavg <<<"$(repeat "$runs" ucx_rtt "$size")"
    if [ -z "${up50:-}" ]; then
      echo "| ping-pong $size B, round trip p50 | ucx_perftest tag_lat (UCX_TLS=tcp) | no result: $(tail -n1 "$tmp/ucx.log") | | |"
      continue
    fi
    read -r sp50 sp99 savg <<<"$(repeat "$runs" siphon_run rtt --pattern echo --size "$size" --conns 1 --inflight 1)"
    echo "| ping-pong $size B, round trip p50 | ucx_perftest tag_lat (UCX_TLS=tcp) | $(num "$up50" 1) µs | $(num "${sp50:-}" 1) µs | $(ratio "${sp50:-}" "$up50") |"
  done
  urate=$(repeat "$runs" ucx_am_rate 4096)
  if [ -z "${urate:-}" ]; then
    echo "| one-way 4 KiB messages, 64 in flight | ucx_perftest ucp_am_bw (UCX_TLS=tcp) | no result: $(tail -n1 "$tmp/ucx.log") | | |"
  else
    srate=$(repeat "$runs" siphon_run rate --pattern sink --size 4096 --conns 1 --inflight 64)
    echo "| one-way 4 KiB messages, 64 in flight | ucx_perftest ucp_am_bw (UCX_TLS=tcp) | $(num "$urate" 0) msgs/s | $(num "${srate:-}" 0) msgs/s | $(ratio "${srate:-}" "$urate") |"
  fi
else
  echo
  echo "ucx_perftest: not installed, UCX row skipped (Debian package ucx-utils)."
fi
}
[ "$rados_only" = 1 ] || tcp_rows

# rados bench against siphon-bench rados on the cluster of --ceph-conf: the
# medians over --runs interleaved rounds of rados_side_by_side.py.
if [ -n "$ceph_conf" ]; then
  python3 "$here/rados_side_by_side.py" "$bench" "$ceph_conf" "$ceph_pool" --seconds "$seconds" --rounds "$runs" \
    --threads 16 --sizes 4096,4194304 >"$tmp/rados.md" 2>"$tmp/rados.err" \
    || { echo "baselines.sh: rados_side_by_side.py failed:" >&2; cat "$tmp/rados.err" >&2; }
  python3 - "$tmp/rados.md" <<'EOF'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    c = [x.strip() for x in line.strip().strip("|").split("|")]
    if len(c) >= 10 and c[0].isdigit():
        runs.setdefault((int(c[0]), c[1], c[3]), []).append((float(c[5]), float(c[9])))
def med(key, i):
    v = [r[i] for r in runs.get(key, []) if r[i] == r[i]]
    return statistics.median(v) if v else None
for size, label in ((4096, "4 KiB"), (4194304, "4 MiB")):
    for mode in ("write", "seq"):
        b, s = (size, mode, "rados bench"), (size, mode, "siphon-bench rados")
        for i, what, unit, fmt in ((0, "MiB/s", "MiB/s", "{:.1f}"), (1, "client CPU per op", "µs", "{:.0f}")):
            x, y = med(b, i), med(s, i)
            ratio = f"{y / x:.2f}" if x and y else "n/a"
            show = lambda v: (fmt.format(v) + " " + unit) if v is not None else "n/a"
            print(f"| rados {mode} {label}, -t 16, {what} | rados bench | {show(x)} | {show(y)} | {ratio} |")
EOF
fi
echo
if [ "$rados_only" = 0 ]; then
  echo "Round trips: sockperf and ucx_perftest print half a round trip; the table doubles them."
  echo "siphon-bench figures are payload only (msgr2 framing excluded); iperf3 counts TCP payload."
fi
[ -z "$ceph_conf" ] || echo "rados rows: cluster of $ceph_conf, pool $ceph_pool; MiB/s as rados bench prints it; CPU per op = user + system of the whole process / ops; the issue's targets: MiB/s ratio >= 1.0, CPU ratio <= 0.5."
