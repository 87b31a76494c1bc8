#!/usr/bin/env bash
# pair_test.sh — the host half of the two-host rxe tier (ctest label rxe2):
# boots the guest pair through run-pair, runs pair_guest.sh in both, and
# checks on the host what only the host can see.
#
#   pair_test.sh wire SIPHON_BENCH SIPHON_OBJD OUT_DIR PATH_MTU TOS [WITH_OBJD]
#       the link is dumped to OUT_DIR/wire.pcap (filter-dump); afterwards
#       wire_check.py holds every RoCEv2 packet against TOS
#       (ms_async_rdma_dscp), PATH_MTU (ms_async_rdma_path_mtu) and the GIDs
#       both stacks logged, and wants SENDs, RDMA READs and no RNR NAK.
#   pair_test.sh partition SIPHON_BENCH SIPHON_OBJD OUT_DIR
#       once guest b reports traffic flowing, the link is cut at guest a's
#       NIC (QEMU monitor: set_link wire0 off) for CUT seconds
#       (SIPHON_PAIR_CUT, default 8: far longer than the RC retry budget,
#       (ms_async_rdma_retry_count 6 + 1) x 67 ms (ms_async_rdma_timeout 14)
#       ), then restored;
#       the guests check the outcome, the host prints detection and recovery
#       times (OUT_DIR/partition-times.txt).
#   pair_test.sh failover SIPHON_BENCH SIPHON_OBJD OUT_DIR
#       RDMA -> TCP failover and back inside one lossless session: guest a
#       drops its RoCEv2 packets (tc, UDP port 4791) for
#       SIPHON_PAIR_ROCE_DOWN seconds (default 6) while guest b's client runs
#       --verify; the guests check the outcome (pair_guest.sh).
#   pair_test.sh removal SIPHON_BENCH SIPHON_OBJD OUT_DIR
#       the same session while guest a runs `rdma link delete rxe0` and later
#       `rdma link add rxe0`: the delete returns (the server released the
#       device), the session moves to TCP and back once the server reopened
#       rxe0 (pair_guest.sh, docs/rdma-transport.md §13).
#
# Exit 0 pass, 1 fail (run-pair's status otherwise: 124 timeout, 125 setup).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
scenario=${1:?usage: pair_test.sh wire|partition|failover|removal SIPHON_BENCH SIPHON_OBJD OUT_DIR [PATH_MTU TOS]}
bench=$2
objd=$3
out=$4
shift 4
cache=${SIPHON_RXE_CACHE:-$(pwd)/rxe-cache}
timeout_s=${SIPHON_PAIR_TIMEOUT:-240}
log() { echo "pair-test: $*"; }
mkdir -p -- "$out"
out=$(readlink -f -- "$out")
rm -f -- "$out"/wire.pcap
# The previous run's signal and result files, before either guest boots: a
# guest that boots faster than the other must not take the other's old
# a.ready or b.flowing for a new one (and start its half early), nor have
# its fresh output removed by the other's cleanup (pair_guest.sh).
rm -f -- "$out"/*.ready "$out"/*.done "$out"/*.failed "$out"/*.flowing "$out"/host.* \
  "$out"/[ab]-* "$out"/[ab].* "$out"/*.addr "$out"/partition-times.txt

case "$scenario" in
  wire)
    mtu=${1:?PATH_MTU}
    tos=${2:?TOS}
    with_objd=${3:-1}
    st=0
    "$here/run-pair" --cache "$cache" --timeout "$timeout_s" --out "$out" --pcap "$out/wire.pcap" -- \
      "$here/pair_guest.sh" wire "$bench" "$objd" "$mtu" "$tos" "$with_objd" || st=$?
    [ "$st" -eq 0 ] || { log "FAILED: the guests reported status $st"; exit "$st"; }
    [ -s "$out/wire.pcap" ] || { log "FAILED: no pcap written"; exit 1; }
    log "pcap: $(du -h "$out/wire.pcap" | cut -f1)"
    "$here/wire_check.py" "$out/wire.pcap" --tos "$tos" --mtu "$mtu" \
      --applied-a "$out/a.applied" --applied-b "$out/b.applied" || { log "FAILED: the wire check"; exit 1; }
    ;;
  partition)
    cut_s=${SIPHON_PAIR_CUT:-8}
    mon=$(mktemp -d /tmp/siphon-pair-mon.XXXXXX)
    trap 'rm -rf -- "$mon"' EXIT
    "$here/run-pair" --cache "$cache" --timeout "$timeout_s" --out "$out" --monitor-dir "$mon" -- \
      "$here/pair_guest.sh" partition "$bench" "$objd" "$cut_s" &
    pair=$!
    # Wait (bounded by the pair's own timeout) for guest b's signal.
    rm -f -- "$out/b.flowing"
    while [ ! -e "$out/b.flowing" ]; do
      kill -0 "$pair" 2>/dev/null || break
      sleep 0.2
    done
    if [ -e "$out/b.flowing" ]; then
      date +%s.%N >"$out/host.flowing-seen"
      "$here/hmp" "$mon/a.mon" set_link wire0 off || log "warning: set_link off failed"
      date +%s%N >"$out/host.cut"
      log "link cut at guest a's NIC (set_link wire0 off) for ${cut_s} s"
      sleep "$cut_s"
      # ... and until both of guest b's clients saw their connections fault
      # (b.faulted; at most 90 s more): on a loaded host a guest starved of
      # CPU may not have lived through the whole cut.
      for _ in $(seq 1 450); do
        [ -e "$out/b.faulted" ] && break
        kill -0 "$pair" 2>/dev/null || break
        sleep 0.2
      done
      [ -e "$out/b.faulted" ] || log "warning: guest b reported no fault of its clients; restoring the link anyway"
      "$here/hmp" "$mon/a.mon" set_link wire0 on || log "warning: set_link on failed"
      date +%s%N >"$out/host.restored"
      log "link restored"
    fi
    st=0
    wait "$pair" || st=$?
    [ "$st" -eq 0 ] || { log "FAILED: the guests reported status $st"; exit "$st"; }
    # Detection and recovery, in the host's clock. Guest b's clock is related
    # to it once: b wrote its time into b.flowing, the host noted when that
    # file showed up (polled every 0.2 s, through 9p), so each figure is good
    # to about +-0.3 s.
    python3 - "$out" <<'PY'
import sys, pathlib
d = pathlib.Path(sys.argv[1])
rd = lambda n: float(d.joinpath(n).read_text().split()[0])
t = dict(l.split("=", 1) for l in d.joinpath("b.partition-times").read_text().split())
off = rd("host.flowing-seen") - rd("b.flowing")
cut, restored = rd("host.cut") / 1e9, rd("host.restored") / 1e9
fault, reco = float(t["first_fault"]) + off, float(t["reconnected"]) + off
line = (f"cut {restored - cut:.1f} s; first fault {fault - cut:.1f} s after the cut (detection); "
        f"session reconnected {reco - restored:.1f} s after the restore (recovery); +-0.3 s")
print("pair-test: partition: " + line)
d.joinpath("partition-times.txt").write_text(line + "\n")
PY
    ;;
  failover)
    down_s=${SIPHON_PAIR_ROCE_DOWN:-6}
    st=0
    "$here/run-pair" --cache "$cache" --timeout "$timeout_s" --out "$out" -- \
      "$here/pair_guest.sh" failover "$bench" "$objd" "$down_s" || st=$?
    [ "$st" -eq 0 ] || { log "FAILED: the guests reported status $st"; exit "$st"; }
    ;;
  removal)
    st=0
    "$here/run-pair" --cache "$cache" --timeout "$timeout_s" --out "$out" -- \
      "$here/pair_guest.sh" removal "$bench" "$objd" || st=$?
    [ "$st" -eq 0 ] || { log "FAILED: the guests reported status $st"; exit "$st"; }
    ;;
  *) echo "unknown scenario '$scenario' (wire, partition, failover, removal)" >&2; exit 2 ;;
esac
log "passed"
