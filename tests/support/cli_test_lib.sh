# Shell helpers for the end-to-end tests of the executables
# (tests/unit/tools/bench_cli_test.sh, tests/unit/objd/objd_cli_test.sh).
# Source it after setting case_name (the case being run) and tmp (the
# case's scratch directory, where the commands' NAME.out/NAME.err go).

# fail MESSAGE: reports the case as failed with the tail of every output.
fail() {
  echo "FAIL ($case_name): $*" >&2
  for f in "$tmp"/*.out "$tmp"/*.err; do
    [ -f "$f" ] && { echo "--- $f" >&2; tail -n 40 "$f" >&2; }
  done
  exit 1
}
# skip REASON: the case cannot run here (ctest SKIP_RETURN_CODE 77).
skip() {
  echo "SKIP ($case_name): $*"
  exit 77
}
expect_in() {  # FILE REGEX
  grep -Eq -- "$2" "$1" || fail "'$2' not found in $(basename "$1")"
}
expect_not_in() {  # FILE REGEX
  ! grep -Eq -- "$2" "$1" || fail "'$2' unexpectedly found in $(basename "$1")"
}
# json FILE EXPR: evaluates EXPR with d = the document (python).
json() {
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1" || fail "cannot read $1 as JSON"
}
expect_json() {  # FILE EXPR (must be true)
  local v
  v=$(json "$1" "$2")
  [ "$v" = "True" ] || fail "JSON check '$2' is $v in $(basename "$1")"
}
