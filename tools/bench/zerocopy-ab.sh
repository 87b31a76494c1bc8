#!/usr/bin/env bash
# MSG_ZEROCOPY on against off (siphon_ms_tcp_zerocopy_threshold), interleaved
# rounds, with iperf3's one stream as the same-run baseline
# (docs/performance.md, "Issue 20: zero-copy sends").
#
#   tools/bench/zerocopy-ab.sh [--bench PATH] [--rounds N] [--seconds N] [--pin]
#
# Each round: iperf3 -l 1M one stream, then for 4 MiB and 1 MiB messages
# three runs back to back (tools/bench/tcp-ab.sh does the work):
#   off      siphon_ms_tcp_zerocopy_threshold=0
#   forced   threshold 64K and siphon_ms_tcp_zerocopy_check_copies=false
#            (zero-copy kept on although loopback copies: its real cost here)
#   default  threshold 64K, check on (switches itself off on loopback)
case "${1:-}" in -h|--help) sed -n '2,13p' "$0"; exit 0 ;; esac
exec "$(dirname "$0")/tcp-ab.sh" --title "MSG_ZEROCOPY A/B" --sizes "4M 1M" "$@" \
  --variant off=siphon_ms_tcp_zerocopy_threshold=0 \
  --variant forced=siphon_ms_tcp_zerocopy_threshold=64K,siphon_ms_tcp_zerocopy_check_copies=false \
  --variant default=siphon_ms_tcp_zerocopy_threshold=64K
