#!/usr/bin/env bash
# siphon_conf_vs_ceph_conf: compares Siphon's reading of ceph.conf with
# Ceph's own `ceph-conf`:
#   1. lookups.tsv: `siphon-conf --lookup` and `ceph-conf --lookup` on the same
#      files, names and keys must print the same and exit the same;
#   2. values.tsv: option values: the same typed value, or the documented
#      difference (Siphon rejects what Ceph silently ignores, ...);
#   3. every Ceph option in Siphon's schema has Ceph's default, every Siphon
#      extension is unknown to Ceph, and compat/ceph_option_names.inc lists
#      exactly the options the installed Ceph has.
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
[ "$rows" -gt 0 ] || failures=$((failures + 1))

# 2. Values.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Ceph's defaults, every option in one ceph-conf run (`-D` prints what
# `--show-config-value` prints for each option; one run takes ~90 ms, and the
# two loops below used to start one per row and per option).
declare -A ceph_default=()
while IFS= read -r line; do
  ceph_default["${line%% = *}"]=${line#* = }
done < <(CEPH_ARGS= ceph-conf -c /dev/null -D 2>/dev/null)
if [ ${#ceph_default[@]} -lt 100 ]; then
  echo "conf_vs_ceph_conf: FAIL: ceph-conf -D listed ${#ceph_default[@]} options" >&2
  exit 1
fi
values=0
value_failures=0
while IFS=$'\t' read -r opt text expect || [ -n "$opt" ]; do
  case "$opt" in ''|'#'*) continue ;; esac
  values=$((values + 1))
  printf '[global]\n%s = %s\n' "$opt" "$text" > "$tmp/value.conf"
  default=${ceph_default[$opt]-}
  ceph=$(ceph-conf -c "$tmp/value.conf" --show-config-value "$opt" 2>/dev/null)
  siphon=$("$siphon_conf" -c "$tmp/value.conf" --show-config-value "$opt" 2>/dev/null)
  siphon_rc=$?
  ok=0
  case "$expect" in
    same) [ "$siphon_rc" = 0 ] && [ "$siphon" = "$ceph" ] && ok=1 ;;
    both-reject) [ "$siphon_rc" != 0 ] && [ "$ceph" = "$default" ] && ok=1 ;;
    siphon-rejects) [ "$siphon_rc" != 0 ] && [ "$ceph" != "$default" ] && ok=1 ;;
    ceph16-rejects) [ "$siphon_rc" = 0 ] && [ "$ceph" = "$default" ] && ok=1 ;;
    *) echo "values.tsv: unknown expectation '$expect'" ;;
  esac
  if [ "$ok" != 1 ]; then
    value_failures=$((value_failures + 1))
    echo "MISMATCH: $opt = '$text' (expected: $expect)"
    echo "  ceph-conf: [$ceph] (default [$default])"
    echo "  siphon-conf (exit $siphon_rc): [$siphon]"
  fi
done < values.tsv
echo "conf_vs_ceph_conf: $values values, $value_failures mismatch(es)"
failures=$((failures + value_failures))

# 3. Schema against Ceph: defaults, extensions, the list of Ceph's names.
schema_failures=0
while IFS=$'\t' read -r opt type origin level; do
  ceph=${ceph_default[$opt]-}
  ceph_rc=0
  [[ -v ceph_default[$opt] ]] || ceph_rc=1
  siphon=$("$siphon_conf" -c /dev/null --show-config-value "$opt" 2>/dev/null)
  if [ "$origin" = ceph ] && { [ "$ceph_rc" != 0 ] || [ "$ceph" != "$siphon" ]; }; then
    schema_failures=$((schema_failures + 1))
    echo "MISMATCH: default of Ceph option $opt: ceph-conf [$ceph] (exit $ceph_rc), siphon-conf [$siphon]"
  elif [ "$origin" = siphon ] && [ "$ceph_rc" = 0 ]; then
    schema_failures=$((schema_failures + 1))
    echo "MISMATCH: $opt is marked a Siphon extension but Ceph has it"
  fi
done < <("$siphon_conf" --list-options)
printf '%s\n' "${!ceph_default[@]}" | grep -vx 'name\|cluster' | LC_ALL=C sort -u > "$tmp/ceph-names"
grep -o '"[^"]*"' "$root/compat/ceph_option_names.inc" | tr -d '"' | tr ' ' '\n' | sed '/^$/d' |
  LC_ALL=C sort -u > "$tmp/siphon-names"
if ! diff -q "$tmp/ceph-names" "$tmp/siphon-names" >/dev/null; then
  schema_failures=$((schema_failures + 1))
  echo "MISMATCH: compat/ceph_option_names.inc differs from this Ceph's options" \
       "(run tools/dev/gen-ceph-option-names.sh):"
  diff "$tmp/ceph-names" "$tmp/siphon-names" | head -20
fi
echo "conf_vs_ceph_conf: schema: $(wc -l < "$tmp/ceph-names") Ceph names, $schema_failures mismatch(es)"
failures=$((failures + schema_failures))
[ "$failures" -eq 0 ]
