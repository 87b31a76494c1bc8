#!/usr/bin/env bash
# siphon-objd driven by siphon-bench objd, one case per ctest:
#
#   objd_cli_test.sh CASE SIPHON_OBJD SIPHON_BENCH CONF_DIR CHECK_BENCH_JSON SCHEMA
#
#   posix, rdma   the same workload body on objd-posix.conf / objd-rdma.conf
#                 (the files differ only in the stack lines): put/stat/get/
#                 delete of 300 objects, every get verified, clean SIGTERM
#   dir           objd_data_dir (io_uring file store): the same workload, no
#                 file left behind
#   foreign       a siphon-bench client (messages objd does not serve) is
#                 dropped, objd keeps serving
#   bad_input     configuration and command-line errors: clear message, exit
#                 status, no crash; ms_cluster_type selects the cluster stack
#   cephx_aes256k_posix, cephx_aes256k_rdma  the same with aes256k (type 2)
#                 keys, secure and crc mode, an AES client beside them, and
#                 the refusal of a wrong aes256k key and of an AES key
#   cephx_posix, cephx_rdma (soft fabric), cephx_verbs (rxe0, in the rxe guest)
#                 objd-cephx.conf (cephx required, ms_service_mode secure) on
#                 each stack: siphon-bench with the right key (-k, -n)
#                 passes --verify and objd logs it as authenticated in secure
#                 mode; no key, a wrong key, and an entity the keyring lacks
#                 are refused: bench exits 1 naming the cause, objd logs the
#                 reason and counts the refusals; cephx required without a
#                 keyring stops objd with an error
# Exit 0 pass, 1 fail.
set -uo pipefail

case_name=$1
objd=$2
bench=$3
confdir=$4
checker=$5
schema=$6

tmp=$(mktemp -d /tmp/siphon-objd-test.XXXXXX)
objd_pid=""
cleanup() {
  if [ -n "$objd_pid" ]; then kill -KILL "$objd_pid" 2>/dev/null; wait "$objd_pid" 2>/dev/null; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

# fail, skip, expect_in, expect_not_in, json, expect_json
. "$(dirname "${BASH_SOURCE[0]}")/../../support/cli_test_lib.sh"

# start_objd NAME ARGS...: starts siphon-objd, waits for its address file.
start_objd() {
  local name=$1
  shift
  rm -f "$tmp/addr"
  # Its own admin socket, not /var/run/ceph (tests run in parallel).
  env -u CEPH_CONF -u CEPH_ARGS "$objd" --addr-file "$tmp/addr" --admin_socket "$tmp/$name.asok" "$@" \
    >"$tmp/$name.out" 2>"$tmp/$name.err" &
  objd_pid=$!
  for _ in $(seq 1 300); do
    [ -s "$tmp/addr" ] && return 0
    kill -0 "$objd_pid" 2>/dev/null || { wait "$objd_pid"; fail "siphon-objd exited with status $? before listening"; }
    sleep 0.1
  done
  fail "siphon-objd did not listen within 30 s"
}
# stop_objd SIGNAL: the daemon must exit 0 and report what it served.
stop_objd() {
  kill "-$1" "$objd_pid"
  local st=0
  wait "$objd_pid" || st=$?
  objd_pid=""
  [ "$st" -eq 0 ] || fail "siphon-objd exited with status $st after SIG$1"
}
run_bench() {  # NAME ARGS...
  local name=$1
  shift
  env -u CEPH_CONF -u CEPH_ARGS HOME="$tmp" "$bench" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
  status=$?
}

# The workload body every stack runs: only the configuration file differs.
workload() {  # CONF EXPECTED_MS_TYPE [extra objd args]
  local conf=$1 type=$2
  shift 2
  start_objd objd -c "$conf" -i 0 "$@"
  local type_re=${type//+/\\+}
  expect_in "$tmp/objd.out" "siphon-objd osd\.0: public v2:127\.0\.0\.1:[0-9]+/[0-9]+ \($type_re, ms_type from [^)]+\), cluster .*\($type_re, ms_type from [^)]+\)"
  run_bench bench objd -c "$conf" --target "$(cat "$tmp/addr")" --count 300 --size-dist 1K-128K --conns 2 \
    --inflight 8 --verify --json "$tmp/result.json"
  [ "$status" -eq 0 ] || fail "siphon-bench objd exited with status $status"
  python3 "$checker" "$schema" "$tmp/result.json" >"$tmp/schema.out" 2>&1 || fail "JSON does not match the schema"
  expect_json "$tmp/result.json" "d['mode'] == 'objd' and d['ms_type'] == '$type'"
  expect_json "$tmp/result.json" "d['results']['verify'] == {'checked': 300, 'lost': 0, 'duplicated': 0, 'reordered': 0, 'corrupted': 0}"
  expect_json "$tmp/result.json" "[(p['name'], p['ops'], p['errors']) for p in d['results']['phases']] == [('put', 300, 0), ('stat', 300, 0), ('get', 300, 0), ('delete', 300, 0)]"
  expect_json "$tmp/result.json" "d['results']['errors'] == 0 and d['results']['messages'] == 1200"
  expect_json "$tmp/result.json" "d['results']['phases'][0]['bytes'] == d['results']['phases'][2]['bytes'] > 300 * 1024"
  expect_in "$tmp/bench.out" "get ops +300"
  stop_objd TERM
  # 300 of each, plus the stat that checks the first object is gone (ENOENT).
  expect_in "$tmp/objd.out" "served 300 put, 300 get, 301 stat, 300 delete; 1 error replies, 0 messages dropped"
  expect_in "$tmp/objd.err" "SIGTERM received, shutting down"
}

case "$case_name" in
  posix) workload "$confdir/objd-posix.conf" async+posix ;;
  rdma) workload "$confdir/objd-rdma.conf" async+rdma ;;
  dir)
    workload "$confdir/objd-posix.conf" async+posix --objd_data_dir "$tmp/data"
    expect_in "$tmp/objd.out" "store: directory $tmp/data \(io_uring\)"
    [ -d "$tmp/data" ] || fail "objd_data_dir was not created"
    left=$(find "$tmp/data" -mindepth 1 | head -5)
    [ -z "$left" ] || fail "files left in objd_data_dir after every object was deleted: $left"
    ;;
  foreign)
    start_objd objd -c "$confdir/objd-posix.conf" -i 0
    # siphon-bench's own request messages: objd drops them; the client gets
    # no replies and gives up.
    run_bench foreign client -c "$confdir/objd-posix.conf" --target "$(cat "$tmp/addr")" --count 20 \
      --drain-timeout 0.5 --connect-timeout 10
    [ "$status" -ne 0 ] || fail "siphon-bench client succeeded against siphon-objd"
    kill -0 "$objd_pid" 2>/dev/null || fail "siphon-objd died after foreign messages"
    run_bench bench objd -c "$confdir/objd-posix.conf" --target "$(cat "$tmp/addr")" --count 20 --verify
    [ "$status" -eq 0 ] || fail "siphon-objd does not serve after foreign messages (bench status $status)"
    stop_objd INT
    expect_in "$tmp/objd.err" "SIGINT received"
    grep -Eq "messages dropped" "$tmp/objd.out" || fail "no final counters"
    dropped=$(sed -nE 's/.* ([0-9]+) messages dropped/\1/p' "$tmp/objd.out")
    [ "${dropped:-0}" -ge 1 ] || fail "expected dropped foreign messages, got '${dropped:-}'"
    ;;
  bad_input)
    env -u CEPH_CONF -u CEPH_ARGS "$objd" -c "$confdir/objd-posix.conf" -i 0 --ms_type async+nosuchstack \
      >"$tmp/e1.out" 2>"$tmp/e1.err"
    st=$?
    [ "$st" -eq 1 ] || fail "unknown stack: status $st, expected 1"
    expect_in "$tmp/e1.err" "async\+nosuchstack"
    expect_in "$tmp/e1.err" "async\+posix"
    mkdir -p "$tmp/ro" && touch "$tmp/ro/file"
    env -u CEPH_CONF -u CEPH_ARGS "$objd" -c "$confdir/objd-posix.conf" -i 0 --objd_data_dir "$tmp/ro/file/sub" \
      >"$tmp/e2.out" 2>"$tmp/e2.err"
    st=$?
    [ "$st" -eq 1 ] || fail "unusable objd_data_dir: status $st, expected 1"
    expect_in "$tmp/e2.err" "objd_data_dir $tmp/ro/file/sub: cannot create it"
    env -u CEPH_CONF -u CEPH_ARGS "$objd" -c "$confdir/objd-posix.conf" -i 0 --bogus >"$tmp/e3.out" 2>"$tmp/e3.err"
    st=$?
    [ "$st" -eq 2 ] || fail "unknown argument: status $st, expected 2"
    expect_in "$tmp/e3.err" "unknown argument '--bogus'"
    env -u CEPH_CONF -u CEPH_ARGS "$objd" -c "$confdir/objd-posix.conf" -i 0 --objd_max_object_size lots \
      >"$tmp/e4.out" 2>"$tmp/e4.err"
    st=$?
    [ "$st" -eq 2 ] || fail "invalid value: status $st, expected 2"
    expect_in "$tmp/e4.err" "objd_max_object_size"
    printf '[global]\npublic addr = v1:127.0.0.1:0\n' >"$tmp/v1.conf"
    env -u CEPH_CONF -u CEPH_ARGS "$objd" -c "$tmp/v1.conf" -i 0 >"$tmp/e5.out" 2>"$tmp/e5.err"
    st=$?
    [ "$st" -eq 2 ] || fail "v1 public_addr: status $st, expected 2"
    expect_in "$tmp/e5.err" "msgr2 only"
    run_bench nobench objd -c "$confdir/objd-posix.conf"
    [ "$status" -eq 2 ] || fail "siphon-bench objd without --target: status $status, expected 2"
    expect_in "$tmp/nobench.err" "objd mode needs --target"
    # Nothing listens there: a clear connection error, status 1.
    run_bench noserver objd -c "$confdir/objd-posix.conf" --target 127.0.0.1:9 --connect-timeout 1 --count 5
    [ "$status" -eq 1 ] || fail "no server: status $status, expected 1"
    expect_in "$tmp/noserver.err" "not ready after"
    # ms_cluster_type overrides ms_type for the cluster messenger only.
    start_objd split -c "$confdir/objd-posix.conf" -i 0 --ms_cluster_type async+rdma \
      --ms_async_rdma_device_name soft0
    expect_in "$tmp/split.out" "public v2:[^ ]+ \(async\+posix, ms_type from [^)]+\), cluster v2:[^ ]+ \(async\+rdma, ms_cluster_type from command line\)"
    stop_objd TERM
    ;;
  cephx_posix | cephx_rdma | cephx_verbs)
    stack=${case_name#cephx_}
    extra=()
    [ "$stack" = rdma ] && extra=(--ms_type async+rdma --ms_async_rdma_device_name soft0)
    if [ "$stack" = verbs ]; then
      # Inside the rxe guest (tests/rxe, rxe.objd_cephx): real verbs on rxe0.
      [ "${SIPHON_RXE_GUEST:-}" = 1 ] || skip "cephx_verbs runs inside the rxe guest"
      stack=rdma
      addr_rxe=${SIPHON_RXE_ADDR:-192.0.2.1}
      extra=(--ms_type async+rdma --ms_async_rdma_device_name "${SIPHON_RXE_DEV:-rxe0}"
             --public_addr "v2:$addr_rxe:0" --cluster_addr "v2:$addr_rxe:0")
    fi
    # The daemon's keyring lists who may come in; the clients' hold their own key.
    printf '[client.bench]\n\tkey = AQAA8VNlAAAAABAAoKGio6SlpqeoqaqrrK2urw==\n[client.admin]\n\tkey = AQAA8VNlAAAAABAAABEiM0RVZneImaq7zN3u/w==\n' \
      >"$tmp/objd.keyring"
    printf '[client.bench]\n\tkey = AQAA8VNlAAAAABAAoKGio6SlpqeoqaqrrK2urw==\n' >"$tmp/bench.keyring"
    printf '[client.bench]\n\tkey = AQAA8VNlAAAAABAAABEiM0RVZneImaq7zN3u/w==\n' >"$tmp/wrong.keyring"
    printf '[client.eve]\n\tkey = AQAA8VNlAAAAABAAoKGio6SlpqeoqaqrrK2urw==\n' >"$tmp/eve.keyring"
    chmod 600 "$tmp"/*.keyring
    conf="$confdir/objd-cephx.conf"
    start_objd objd -c "$conf" -i 0 -k "$tmp/objd.keyring" --debug_ms_session 5 "${extra[@]}"
    expect_in "$tmp/objd.out" "siphon-objd osd\.0: auth from clients cephx \(modes secure\), from daemons cephx \(modes crc secure\); cephx keys of 2 entities from keyring $tmp/objd.keyring"
    addr=$(cat "$tmp/addr")
    # The right key: the whole workload, verified, in secure mode.
    run_bench bench objd -c "$conf" -n client.bench -k "$tmp/bench.keyring" --target "$addr" --count 100 \
      --size-dist 1K-128K --conns 2 --inflight 8 --verify --json "$tmp/result.json" "${extra[@]}"
    [ "$status" -eq 0 ] || fail "siphon-bench objd with the right key exited with status $status"
    expect_json "$tmp/result.json" "d['results']['verify'] == {'checked': 100, 'lost': 0, 'duplicated': 0, 'reordered': 0, 'corrupted': 0}"
    expect_json "$tmp/result.json" "d['results']['errors'] == 0 and d['results']['messages'] == 400"
    expect_json "$tmp/result.json" "d['ms_type'] == 'async+$stack'"
    expect_in "$tmp/objd.out" "public v2:[^ ]+ \(async\+$stack, "
    # On rxe0 the daemon listens on the guest's RoCE address.
    [ -z "${addr_rxe:-}" ] || expect_in "$tmp/objd.out" "public v2:${addr_rxe//./\\.}:[0-9]+/"
    expect_in "$tmp/bench.err" "authenticating as client\.bench with cephx \(keyring $tmp/bench\.keyring\)"
    expect_in "$tmp/objd.err" "accepted client\.bench from [^ ]+ as global_id [0-9]+: auth cephx, secure mode"
    expect_not_in "$tmp/objd.err" "auth none"
    # No key at all: cephx is dropped on the client (no keyring), objd refuses auth none.
    run_bench nokey objd -c "$conf" -n client.bench --keyring "$tmp/missing.keyring" --target "$addr" --count 5 \
      --connect-timeout 20 "${extra[@]}"
    [ "$status" -eq 1 ] || fail "no key: status $status, expected 1"
    expect_in "$tmp/nokey.err" "authentication with [^ ]+ failed: peer rejected auth method none .*it allows methods \[cephx\] and modes \[secure\].*cephx needs a key for client\.bench: no keyring found at $tmp/missing\.keyring"
    expect_in "$tmp/objd.err" "refused the authentication of a peer from [^ ]+: client\.bench asked for auth none, which is not allowed from a client peer \(allowed: cephx\)"
    # A wrong key: the challenge fails on both sides.
    run_bench wrong objd -c "$conf" -n client.bench -k "$tmp/wrong.keyring" --target "$addr" --count 5 \
      --connect-timeout 20 "${extra[@]}"
    [ "$status" -eq 1 ] || fail "wrong key: status $status, expected 1"
    expect_in "$tmp/wrong.err" "failed: the osd refused the cephx key of client\.bench from keyring $tmp/wrong\.keyring \(EACCES\)"
    expect_in "$tmp/objd.err" "refused the authentication of a peer from [^ ]+: client\.bench failed the cephx challenge: its key does not match the aes key in the keyring \(keyring $tmp/objd\.keyring\)"
    # An entity the daemon's keyring does not list.
    run_bench eve objd -c "$conf" -n client.eve -k "$tmp/eve.keyring" --target "$addr" --count 5 \
      --connect-timeout 20 "${extra[@]}"
    [ "$status" -eq 1 ] || fail "unknown entity: status $status, expected 1"
    expect_in "$tmp/eve.err" "refused the cephx key of client\.eve"
    expect_in "$tmp/objd.err" "client\.eve is not in the keyring \(keyring $tmp/objd\.keyring\)"
    # The daemon still serves the right key after the refusals (-n and -k
    # before the mode, as configuration flags may come).
    run_bench again -n client.bench -k "$tmp/bench.keyring" objd -c "$conf" --target "$addr" --count 10 --verify \
      "${extra[@]}"
    [ "$status" -eq 0 ] || fail "siphon-objd does not serve after refusals (bench status $status)"
    stop_objd TERM
    expect_in "$tmp/objd.out" "served 110 put, 110 get, 112 stat, 110 delete"
    expect_in "$tmp/objd.out" "siphon-objd osd\.0: refused 3 authentication attempt\(s\)"
    # cephx required and no keyring: the daemon does not start.
    env -u CEPH_CONF -u CEPH_ARGS "$objd" -c "$conf" -i 0 --keyring "$tmp/missing.keyring" "${extra[@]}" \
      >"$tmp/e1.out" 2>"$tmp/e1.err"
    st=$?
    [ "$st" -eq 1 ] || fail "cephx required without a keyring: status $st, expected 1"
    expect_in "$tmp/e1.err" "auth_service_required = cephx \([^)]*objd-cephx\.conf[^)]*\): osd\.0 requires cephx of its peers, but no keyring was found \(searched $tmp/missing\.keyring\)"
    # Left at Ceph's default (cephx) with no keyring: auth none, and a warning says so.
    start_objd dflt -c "$confdir/objd-posix.conf" -i 0 --keyring "$tmp/missing.keyring" "${extra[@]}"
    expect_in "$tmp/dflt.out" "auth from clients none \(modes crc secure\), from daemons none \(modes crc secure\)$"
    expect_in "$tmp/dflt.err" "auth_service_required is at its default \(cephx\) but no keyring was found \(searched $tmp/missing\.keyring\): osd\.0 lets its peers in without authentication"
    stop_objd TERM
    ;;
  cephx_aes256k_posix | cephx_aes256k_rdma)
    # aes256k keys (Ceph 19.2.6+ key type 2) in the key-based exchange:
    # secure and crc mode, verified; an AES client beside them; a wrong
    # aes256k key and an AES key where the daemon holds an aes256k one are
    # refused and counted like a wrong AES key.
    stack=${case_name#cephx_aes256k_}
    extra=()
    [ "$stack" = rdma ] && extra=(--ms_type async+rdma --ms_async_rdma_device_name soft0)
    k256() {  # the keyring form of a type-2 key: base64(u16 2 | utime | u16 32 | secret)
      python3 -c 'import base64,struct,sys; print(base64.b64encode(struct.pack("<HIIH",2,1700000000,0,32)+bytes.fromhex(sys.argv[1])).decode())' "$1"
    }
    kb=$(k256 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f)
    kw=$(k256 202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f)
    aes=AQAA8VNlAAAAABAAoKGio6SlpqeoqaqrrK2urw==
    case "$kb" in Ag*) ;; *) fail "a type-2 key should print as Ag..., got $kb" ;; esac
    printf '[client.bench]\n\tkey = %s\n[client.mixed]\n\tkey = %s\n' "$kb" "$aes" >"$tmp/objd.keyring"
    printf '[client.bench]\n\tkey = %s\n' "$kb" >"$tmp/bench.keyring"
    printf '[client.bench]\n\tkey = %s\n' "$kw" >"$tmp/wrong.keyring"
    printf '[client.bench]\n\tkey = %s\n' "$aes" >"$tmp/aes.keyring"
    printf '[client.mixed]\n\tkey = %s\n' "$aes" >"$tmp/mixed.keyring"
    chmod 600 "$tmp"/*.keyring
    conf="$confdir/objd-cephx.conf"
    start_objd objd -c "$conf" -i 0 -k "$tmp/objd.keyring" --ms_service_mode "secure crc" --debug_ms_session 5 \
      "${extra[@]}"
    expect_in "$tmp/objd.out" "cephx keys of 2 entities from keyring $tmp/objd.keyring"
    addr=$(cat "$tmp/addr")
    for mode in secure crc; do
      run_bench "$mode" objd -c "$conf" -n client.bench -k "$tmp/bench.keyring" --ms_client_mode "$mode" \
        --target "$addr" --count 100 --size-dist 1K-128K --conns 2 --inflight 8 --verify --json "$tmp/$mode.json" \
        "${extra[@]}"
      [ "$status" -eq 0 ] || fail "aes256k key in $mode mode: siphon-bench exited with status $status"
      expect_json "$tmp/$mode.json" "d['results']['verify'] == {'checked': 100, 'lost': 0, 'duplicated': 0, 'reordered': 0, 'corrupted': 0}"
      expect_json "$tmp/$mode.json" "d['results']['errors'] == 0 and d['ms_type'] == 'async+$stack'"
      expect_in "$tmp/objd.err" "accepted client\.bench from [^ ]+ as global_id [0-9]+: auth cephx, $mode mode"
    done
    # An AES client of the same daemon (a keyring of both types).
    run_bench mixed objd -c "$conf" -n client.mixed -k "$tmp/mixed.keyring" --target "$addr" --count 20 --verify \
      "${extra[@]}"
    [ "$status" -eq 0 ] || fail "an aes client beside aes256k ones: status $status"
    expect_in "$tmp/objd.err" "accepted client\.mixed from [^ ]+ as global_id [0-9]+: auth cephx, (crc|secure) mode"
    # Another aes256k key, and the AES key where the keyring holds aes256k.
    for k in wrong aes; do
      run_bench "$k" objd -c "$conf" -n client.bench -k "$tmp/$k.keyring" --target "$addr" --count 5 \
        --connect-timeout 20 "${extra[@]}"
      [ "$status" -eq 1 ] || fail "$k key: status $status, expected 1"
      expect_in "$tmp/$k.err" "failed: the osd refused the cephx key of client\.bench from keyring $tmp/$k\.keyring \(EACCES\)"
    done
    expect_in "$tmp/objd.err" "client\.bench failed the cephx challenge: its key does not match the aes256k key in the keyring \(keyring $tmp/objd\.keyring\)"
    stop_objd TERM
    expect_in "$tmp/objd.out" "served 220 put, 220 get, 223 stat, 220 delete"
    expect_in "$tmp/objd.out" "siphon-objd osd\.0: refused 2 authentication attempt\(s\)"
    ;;
  *) fail "unknown case" ;;
esac
echo "PASS ($case_name)"
