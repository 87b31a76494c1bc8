#!/usr/bin/env bash
# Per-message system cost of siphon-bench loopback (docs/performance.md,
# "Per-message cost of the RDMA stack"): context switches, syscalls (the
# sum of every syscalls:sys_enter_* tracepoint, and the five commonest) and
# task-clock (CPU time of all threads), divided by the request count, for
# each --ms-type given, in the same run. Instructions are not counted: the
# machine this was written on has no PMU in its VM (perf: "instructions not
# supported"), and valgrind cannot run the soft fabric (no epoll_pwait2).
#
#   tools/bench/per-msg-cost.sh [--bench PATH] [--count N] [--size S] [--runs N]
#                               [--types T1,T2] [-- extra siphon-bench flags]
#
# One request is one message each way (siphon-bench's echo pattern).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bench="$root/build/release/tools/bench/siphon-bench"
count=50000
size=4K
runs=3
types=async+posix,async+rdma
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --bench) bench=$2; shift 2 ;;
    --count) count=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --types) types=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    *) echo "per-msg-cost.sh: unknown argument '$1' (see the comment at the top)" >&2; exit 2 ;;
  esac
done
command -v perf >/dev/null || { echo "per-msg-cost.sh: perf not found (apt-get install linux-perf)" >&2; exit 2; }
[ -x "$bench" ] || { echo "per-msg-cost.sh: $bench not built (cmake --build --preset release)" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "| ms-type | run | cs/req | syscalls/req | task-clock µs/req | top syscalls per req |"
echo "|---|---|---|---|---|---|"
IFS=, read -ra tlist <<<"$types"
for run in $(seq 1 "$runs"); do
  for t in "${tlist[@]}"; do
    perf stat -x, -o "$tmp/stat" -e context-switches,task-clock,'syscalls:sys_enter_*' -- \
      "$bench" loopback --ms-type "$t" --count "$count" --size "$size" "${extra[@]}" >"$tmp/out" 2>&1 ||
      { echo "per-msg-cost.sh: siphon-bench failed:" >&2; tail -5 "$tmp/out" >&2; exit 1; }
    grep -q "errors *0$" "$tmp/out" || { echo "per-msg-cost.sh: the run had errors:" >&2; tail -5 "$tmp/out" >&2; exit 1; }
    awk -F, -v n="$count" -v t="$t" -v run="$run" '
      $3 == "context-switches" { cs = $1 }
      $3 == "task-clock" { clk = $1 }   # msec
      $3 ~ /^syscalls:sys_enter_/ && $1 ~ /^[0-9]+$/ && $1 > 0 {
        sys += $1; name = $3; sub("syscalls:sys_enter_", "", name); by[name] = $1 }
      END {
        top = ""
        for (k = 0; k < 5; k++) {
          best = ""; bv = 0
          for (s in by) if (by[s] > bv) { bv = by[s]; best = s }
          if (best == "") break
          top = top sprintf("%s%s %.2f", top == "" ? "" : ", ", best, bv / n); delete by[best]
        }
        printf "| %s | %d | %.2f | %.2f | %.1f | %s |\n", t, run, cs / n, sys / n, clk * 1000 / n, top
      }' "$tmp/stat"
  done
done
