#!/usr/bin/env bash
# siphon_conf_vs_ceph_conf: runs `siphon-conf --lookup` and Ceph's
# `ceph-conf --lookup` on the same files, names and keys (corpus/lookups.tsv)
# and requires the same output and exit status for every row.
#
#   conf_vs_ceph_conf.sh SIPHON_CONF CORPUS_DIR SOURCE_ROOT
#
# ceph-conf comes from Debian's ceph-common. When it is missing the script
# installs it (SIPHON_DEPS=interop tools/dev/install-deps.sh) and fails,
# never skips, if it cannot.
set -uo pipefail
siphon_conf=$(realpath "$1")
corpus=$2
root=$(realpath "$3")

if ! command -v ceph-conf >/dev/null 2>&1; then
  echo "conf_vs_ceph_conf: ceph-conf not found; installing ceph-common"
  if ! SIPHON_DEPS=interop "$root/tools/dev/install-deps.sh"; then
    echo "conf_vs_ceph_conf: FAIL: could not install ceph-common (run as root with apt access)" >&2
    exit 1
  fi
  if ! command -v ceph-conf >/dev/null 2>&1; then
    echo "conf_vs_ceph_conf: FAIL: ceph-conf still missing after installing ceph-common" >&2
    exit 1
  fi
fi
echo "conf_vs_ceph_conf: comparing with $(ceph-conf --version 2>/dev/null | head -1)"

# Both tools read CEPH_ARGS and CEPH_CONF; only the rows set them.
unset CEPH_ARGS CEPH_CONF
cd "$corpus" || exit 1
rows=0
found=0
failures=0
while IFS=$'\t' read -r file args key env || [ -n "$file" ]; do
  case "$file" in ''|'#'*) continue ;; esac
  rows=$((rows + 1))
  argv=()
  [ "$args" != "-" ] && read -r -a argv <<< "$args"
  if [ -n "${env:-}" ]; then
    export CEPH_ARGS="$env"
  else
    unset CEPH_ARGS
  fi
  want=$(ceph-conf -c "$file" "${argv[@]}" --lookup "$key" 2>/dev/null)
  want_rc=$?
  got=$("$siphon_conf" -c "$file" "${argv[@]}" --lookup "$key" 2>/dev/null)
  got_rc=$?
  [ "$want_rc" = 0 ] && found=$((found + 1))
  if [ "$want" != "$got" ] || [ "$want_rc" != "$got_rc" ]; then
    failures=$((failures + 1))
    echo "MISMATCH: -c $file $args --lookup '$key'${env:+ (CEPH_ARGS='$env')}"
    echo "  ceph-conf   (exit $want_rc): [$want]"
    echo "  siphon-conf (exit $got_rc): [$got]"
  fi
done < lookups.tsv
unset CEPH_ARGS
echo "conf_vs_ceph_conf: $rows lookups ($found set, $((rows - found)) unset or rejected), $failures mismatch(es)"
[ "$rows" -gt 0 ] && [ "$failures" -eq 0 ]
