#!/usr/bin/env bash
# End-to-end tests of the siphon-bench executable, one case per ctest:
#
#   bench_cli_test.sh CASE SIPHON_BENCH CHECK_BENCH_JSON SCHEMA
#
# Each case runs real messengers (TCP) and checks exit status, the table and
# the JSON document. Exit 0 pass, 1 fail, 77 skipped (with the reason).
set -uo pipefail

case_name=$1
bench=$2
checker=$3
schema=$4

tmp=$(mktemp -d /tmp/siphon-bench-test.XXXXXX)
cleanups=("rm -rf '$tmp'")
cleanup() {
  local i
  for ((i = ${#cleanups[@]} - 1; i >= 0; i--)); do eval "${cleanups[$i]}" >/dev/null 2>&1 || true; done
}
trap cleanup EXIT
# fail, skip, expect_in, expect_not_in, json, expect_json
. "$(dirname "${BASH_SOURCE[0]}")/../../support/cli_test_lib.sh"

# run NAME ARGS...: runs siphon-bench with no configuration from the
# environment; stdout/stderr in $tmp/NAME.out/.err, status in $status.
run() {
  local name=$1
  shift
  (cd "$tmp" && env -u CEPH_CONF -u CEPH_ARGS HOME="$tmp" "$bench" "$@") >"$tmp/$name.out" 2>"$tmp/$name.err"
  status=$?
}
expect_status() {
  [ "$status" -eq "$1" ] || fail "expected exit status $1, got $status"
}
validate() {
  python3 "$checker" "$schema" "$@" >"$tmp/validate.out" 2>&1 || { cat "$tmp/validate.out" >&2; fail "schema validation failed"; }
}
# Waits for `server listening on ADDR` in FILE; prints ADDR.
server_addr() {
  local i addr
  for i in $(seq 1 200); do
    addr=$(sed -n 's/.*server listening on \([^ ]*\) .*/\1/p' "$1" | head -n1)
    [ -n "$addr" ] && { echo "$addr"; return 0; }
    sleep 0.05
  done
  return 1
}

# keyrings KEYDIR: the bench's key (client.bench), a wrong key for the same
# entity, mode 600 as Ceph wants them.
keyrings() {
  printf '[client.bench]\n\tkey = AQAA8VNlAAAAABAAoKGio6SlpqeoqaqrrK2urw==\n' >"$tmp/bench.keyring"
  printf '[client.bench]\n\tkey = AQAA8VNlAAAAABAAABEiM0RVZneImaq7zN3u/w==\n' >"$tmp/wrong.keyring"
  chmod 600 "$tmp"/*.keyring
}
# Secure mode end to end (issue 15 item 7): cephx from the keyring on both
# sides, secure mode asked for on both, --verify clean, and the JSON saying
# what the session negotiated.
secure_loopback() {  # MS_TYPE
  keyrings
  run s loopback --ms-type "$1" -n client.bench -k "$tmp/bench.keyring" --set auth_client_required=cephx \
    --set auth_service_required=cephx --set ms_client_mode=secure --set ms_service_mode=secure \
    --count 3000 --size 16K --verify --json "$tmp/s.json"
  expect_status 0
  validate "$tmp/s.json"
  expect_in "$tmp/s.err" "authenticating as client\.bench with cephx \(keyring $tmp/bench\.keyring\), offering mode secure"
  expect_in "$tmp/s.err" 'server auth from clients cephx \(modes secure\)'
  expect_in "$tmp/s.out" 'auth / mode +cephx / secure'
  expect_json "$tmp/s.json" 'd["results"]["auth"] == {"method": "cephx", "con_mode": "secure", "connections": [{"method": "cephx", "con_mode": "secure"}]}'
  expect_json "$tmp/s.json" 'd["results"]["verify"]["checked"] == 3000 and d["results"]["verify"]["corrupted"] == 0 and d["results"]["verify"]["lost"] == 0'
  expect_json "$tmp/s.json" 'd["results"]["errors"] == 0 and d["results"]["messenger"]["faults"] == 0'
  # Left at Ceph's defaults (modes "crc secure" both sides) the same
  # keyring negotiates crc: the report reads the session, not the options.
  run c loopback --ms-type "$1" -n client.bench -k "$tmp/bench.keyring" --count 200 --verify --json "$tmp/c.json"
  expect_status 0
  expect_json "$tmp/c.json" 'd["results"]["auth"]["method"] == "cephx" and d["results"]["auth"]["con_mode"] == "crc"'
}

case "$case_name" in

no_config)
  # Hide a system-wide /etc/ceph/ceph.conf if this machine has one.
  if [ -e /etc/ceph/ceph.conf ]; then
    command -v unshare >/dev/null || skip "/etc/ceph/ceph.conf exists and unshare is missing"
    unshare -m true 2>/dev/null || skip "/etc/ceph/ceph.conf exists and no mount namespace can hide it"
    real=$bench
    bench="$tmp/in-empty-etc-ceph"
    printf '#!/bin/sh\nexec unshare -m sh -c '\''mount -t tmpfs none /etc/ceph && exec "$0" "$@"'\'' %s "$@"\n' "$real" >"$bench"
    chmod +x "$bench"
  fi
  run r loopback --duration 2 --warmup 0.5 --json "$tmp/r.json"
  expect_status 0
  # The embedded default is the RDMA stack (software fabric without a NIC).
  expect_in "$tmp/r.out" '^siphon-bench loopback \(async\+rdma, echo\), 2\.[0-9]+ s measured'
  expect_in "$tmp/r.err" 'loopback over async\+rdma \(embedded default: no ms_type configured\)'
  expect_in "$tmp/r.err" 'no configuration file found'
  validate "$tmp/r.json"
  expect_json "$tmp/r.json" 'd["results"]["messages"] > 0 and d["results"]["errors"] == 0'
  expect_json "$tmp/r.json" 'd["config"]["ms_type_source"] == "embedded default: no ms_type configured" and d["options"]["ms_type"] == "async+rdma" and d["options"]["ms_async_rdma_polling_us"].endswith(" (auto)")'
  # Left unset, the polling time is the stack's choice: on the software
  # fabric's driven engine (its default) the workers run the fabric and spin
  # 50 us; on its threaded engine they never spin (docs/rdma-transport.md §1).
  if grep -q 'software fabric (soft0)' "$tmp/r.err"; then
    if [ "${SIPHON_SOFT_ENGINE:-}" = thread ]; then
      expect_json "$tmp/r.json" 'd["options"]["ms_async_rdma_polling_us"] == "0 (auto)"'
    else
      expect_json "$tmp/r.json" 'd["options"]["ms_async_rdma_polling_us"] == "50 (auto)"'
    fi
  fi
  expect_json "$tmp/r.json" '1 <= len(d["results"]["msgs_per_second"]) <= 3'  # one sample a second; a loaded or sanitized run may tick late
  expect_json "$tmp/r.json" 'd["results"]["cpu"]["client_user_s"] + d["results"]["cpu"]["client_system_s"] > 0'
  expect_json "$tmp/r.json" 'd["results"]["cpu"]["server_user_s"] + d["results"]["cpu"]["server_system_s"] > 0'
  ;;

public_type)
  # Issue 16 item 6: a client uses ms_public_type when it is set, and the
  # tool names that option and its line, not ms_type's.
  cat >"$tmp/bench.conf" <<'EOF'
[global]
ms_type = async+rdma
ms_public_type = async+posix
EOF
  run r -c "$tmp/bench.conf" loopback --count 200 --json "$tmp/r.json"
  expect_status 0
  expect_in "$tmp/r.err" "loopback over async\+posix \(ms_public_type from .*bench.conf:3 \[global\]\)"
  expect_not_in "$tmp/r.err" "ms_type from"
  expect_json "$tmp/r.json" 'd["config"]["ms_type_source"].startswith("ms_public_type from ") and d["config"]["ms_type_source"].endswith("bench.conf:3 [global]")'
  ;;

config_posix)
  cat >"$tmp/bench.conf" <<'EOF'
[global]
ms_type = async+posix
ms_async_op_threads = 2

[client.bench]
ms_tcp_rcvbuf = 1M
EOF
  run r -c "$tmp/bench.conf" --name client.bench loopback --duration 2 --warmup 0.5 --json "$tmp/r.json"
  expect_status 0
  expect_in "$tmp/r.err" "loopback over async\+posix \(ms_type from .*bench.conf:2 \[global\]\)"
  expect_in "$tmp/r.err" 'server .* \(3 threads\)'   # 2 workers + the dispatch thread
  expect_not_in "$tmp/r.err" 'no configuration file found'
  validate "$tmp/r.json"
  expect_json "$tmp/r.json" 'd["options"]["ms_async_op_threads"] == "2" and d["options"]["ms_tcp_rcvbuf"] == "1048576"'
  expect_json "$tmp/r.json" 'd["options"]["ms_type"] == "async+posix" and "ms_async_rdma_credits" not in d["options"]'
  expect_json "$tmp/r.json" 'd["results"]["messages"] > 0 and d["results"]["errors"] == 0'
  # The command line wins over the file, as in Ceph.
  run r2 -c "$tmp/bench.conf" loopback --set ms_async_op_threads=1 --count 500 --json "$tmp/r2.json"
  expect_status 0
  expect_json "$tmp/r2.json" 'd["options"]["ms_async_op_threads"] == "1"'
  # A config selecting async+rdma runs on it (the software fabric here),
  # and a device that does not exist is an error that names the remedy.
  printf '[global]\nms_type = async+rdma\n' >"$tmp/rdma.conf"
  run r3 -c "$tmp/rdma.conf" loopback --count 500 --json "$tmp/r3.json"
  expect_status 0
  expect_json "$tmp/r3.json" 'd["ms_type"] == "async+rdma" and d["results"]["messages"] == 500'
  expect_json "$tmp/r3.json" 'd["options"]["ms_type"] == "async+rdma" and d["options"]["ms_async_rdma_credits"] != ""'
  printf '[global]\nms_type = async+rdma\nms_async_rdma_device_name = mlx5_0\n' >"$tmp/mlx.conf"
  run r4 -c "$tmp/mlx.conf" loopback --count 10
  expect_status 1
  expect_in "$tmp/r4.err" 'mlx5_0'
  ;;

verify_clean)
  run r loopback --count 20000 --conns 3 --threads 2 --size-dist 1-8K --verify --json "$tmp/r.json"
  expect_status 0
  validate "$tmp/r.json"
  expect_json "$tmp/r.json" 'd["results"]["messages"] == 20000'
  expect_json "$tmp/r.json" 'd["results"]["verify"] == {"checked": 20000, "lost": 0, "duplicated": 0, "reordered": 0, "corrupted": 0}'
  # Zero loss on every stack: the same over TCP and over RDMA explicitly.
  for stack in async+posix async+rdma; do
    run "v_$stack" loopback --ms-type "$stack" --count 5000 --conns 2 --size-dist 1-64K,128K-256K:1 --verify --json "$tmp/v.json"
    expect_status 0
    expect_json "$tmp/v.json" 'd["ms_type"] == "'"$stack"'" and d["results"]["verify"] == {"checked": 5000, "lost": 0, "duplicated": 0, "reordered": 0, "corrupted": 0}'
  done
  # The same over a lossless session whose sockets fail every few hundred
  # operations: the messenger replays, --verify still sees every message once.
  run f loopback --ms-type async+posix --count 20000 --conns 2 --verify --set ms_inject_socket_failures=200 --set ms_initial_backoff=0.01 \
    --json "$tmp/f.json"
  expect_status 0
  expect_json "$tmp/f.json" 'd["results"]["messenger"]["faults"] > 0'
  expect_json "$tmp/f.json" 'd["results"]["verify"]["checked"] == 20000 and d["results"]["verify"]["lost"] == 0'
  expect_json "$tmp/f.json" 'd["results"]["verify"]["duplicated"] + d["results"]["verify"]["reordered"] + d["results"]["verify"]["corrupted"] == 0'
  ;;

failover)
  # RDMA -> TCP failover inside one lossless session (docs/rdma-transport.md
  # §12): over async+rdma on the software fabric with a TCP fallback, the
  # process's fabric links are pulled 2 s into the run for 2 s. The run keeps
  # going over TCP, returns to RDMA, and --verify finds every message once,
  # in order, intact; one switch each way.
  run fo loopback --ms-type async+rdma --set ms_async_rdma_device_name=soft0 \
    --set siphon_ms_fallback_type=async+posix --set siphon_ms_fallback_after=0.5 \
    --set siphon_ms_fallback_retry_interval=0.2 --set ms_initial_backoff=0.01 --set ms_max_backoff=0.1 \
    --duration 7 --warmup 0 --size-dist 1-8K --verify --soft-link-down 2:2 --json "$tmp/fo.json"
  expect_status 0
  validate "$tmp/fo.json"
  expect_json "$tmp/fo.json" 'd["results"]["verify"]["checked"] > 1000'
  expect_json "$tmp/fo.json" 'd["results"]["verify"]["lost"] + d["results"]["verify"]["duplicated"] + d["results"]["verify"]["reordered"] + d["results"]["verify"]["corrupted"] == 0'
  expect_json "$tmp/fo.json" 'd["results"]["errors"] == 0'
  expect_json "$tmp/fo.json" 'd["results"]["messenger"]["fallback_switches"] == 1'
  expect_json "$tmp/fo.json" 'd["results"]["messenger"]["primary_switches"] == 1'
  expect_in "$tmp/fo.err" "software fabric link.* pulled"
  expect_in "$tmp/fo.err" "switches from async.rdma to async.posix"
  expect_in "$tmp/fo.err" "switches from async.posix back to async.rdma"
  # The same flags without a fallback stack: no switch, and the session
  # still loses nothing (it waits for RDMA to come back).
  run nofo loopback --ms-type async+rdma --set ms_async_rdma_device_name=soft0 \
    --set ms_initial_backoff=0.01 --set ms_max_backoff=0.1 \
    --duration 6 --warmup 0 --size-dist 1-8K --verify --soft-link-down 2:1 --json "$tmp/nofo.json"
  expect_status 0
  expect_json "$tmp/nofo.json" 'd["results"]["verify"]["lost"] + d["results"]["verify"]["duplicated"] + d["results"]["verify"]["reordered"] + d["results"]["verify"]["corrupted"] == 0'
  expect_json "$tmp/nofo.json" 'd["results"]["messenger"]["fallback_switches"] + d["results"]["messenger"]["primary_switches"] == 0'
  expect_json "$tmp/nofo.json" 'd["results"]["messenger"]["faults"] > 0'
  ;;

verify_detects)
  # Test hook --inject-corruption-every N: every Nth payload is damaged after
  # its CRC was taken and before the messenger sees it (source: the server
  # damages every Nth reply). --verify must count exactly count/N.
  for pattern in echo sink source; do
    run "$pattern" loopback --pattern "$pattern" --count 3000 --size 4K --verify --inject-corruption-every 100 \
      --json "$tmp/$pattern.json"
    expect_status 3
    expect_in "$tmp/$pattern.err" '--verify failed: 0 lost, 0 duplicated, 0 reordered, 30 corrupted'
    expect_json "$tmp/$pattern.json" 'd["results"]["verify"]["corrupted"] == 30 and d["results"]["verify"]["checked"] == 3000'
  done
  # Lost messages: a lossy session whose sockets fail drops what was in flight.
  run lossy loopback --ms-type async+posix --policy lossy --count 20000 --conns 2 --verify --set ms_inject_socket_failures=100 \
    --drain-timeout 1 --json "$tmp/lossy.json"
  expect_status 3
  expect_json "$tmp/lossy.json" 'd["results"]["verify"]["lost"] > 0 and d["results"]["messenger"]["faults"] > 0'
  ;;

verify_below | verify_below_lossy)
  # Bits flipped BELOW the messenger (TCP: in the bytes a socket read returned;
  # soft fabric: in data placed in registered memory by SEND, RDMA READ and
  # RDMA WRITE) must be caught by the msgr2 frame CRCs and never reach a
  # dispatcher. Sizes on both sides of the 64 KiB zero-copy threshold, so the
  # RDMA runs also pull data by RDMA READ.
  sizes=1-64K,128K-256K:1
  tcp=(--ms-type async+posix --set ms_inject_corruption_probability=0.005)
  rdma=(--ms-type async+rdma --set ms_async_rdma_soft_inject_corruption_probability=0.002)
  clean='d["results"]["verify"]["lost"] + d["results"]["verify"]["duplicated"] + d["results"]["verify"]["reordered"] + d["results"]["verify"]["corrupted"] == 0'
  caught='d["results"]["messenger"]["crc_errors"] > 0 and d["results"]["messenger"]["faults"] >= d["results"]["messenger"]["crc_errors"]'
  if [ "$case_name" = verify_below ]; then
    # Lossless (the default policy): faults, reconnects, replays; --verify
    # sees every message once, in order, intact.
    run tcp loopback "${tcp[@]}" --count 3000 --conns 2 --size-dist "$sizes" --verify --set ms_initial_backoff=0.01 \
      --json "$tmp/tcp.json"
    expect_status 0
    validate "$tmp/tcp.json"
    expect_json "$tmp/tcp.json" 'd["results"]["verify"]["checked"] == 3000 and '"$clean"
    expect_json "$tmp/tcp.json" "$caught"
    expect_json "$tmp/tcp.json" 'd["results"]["messenger"]["reconnects"] > 0'
    run rdma loopback "${rdma[@]}" --count 2000 --conns 2 --size-dist "$sizes" --verify --set ms_initial_backoff=0.01 \
      --json "$tmp/rdma.json"
    expect_status 0
    validate "$tmp/rdma.json"
    expect_json "$tmp/rdma.json" 'd["results"]["verify"]["checked"] == 2000 and '"$clean"
    expect_json "$tmp/rdma.json" "$caught"
    expect_json "$tmp/rdma.json" 'd["results"]["stack_counters"]["rdma_reads"] > 0'
  else
    # Lossy: the first fault drops the session; what was in flight is lost,
    # never delivered damaged. --verify fails with exit status 3.
    for s in tcp rdma; do
      eval 'args=("${'"$s"'[@]}")'
      run "lossy_$s" loopback "${args[@]}" --policy lossy --count 3000 --conns 2 --size-dist "$sizes" --verify \
        --drain-timeout 1 --json "$tmp/lossy_$s.json"
      expect_status 3
      validate "$tmp/lossy_$s.json"
      expect_in "$tmp/lossy_$s.err" '--verify failed: [1-9][0-9]* lost, 0 duplicated, 0 reordered, 0 corrupted'
      expect_json "$tmp/lossy_$s.json" 'd["results"]["verify"]["lost"] > 0 and d["results"]["verify"]["corrupted"] == 0'
      expect_json "$tmp/lossy_$s.json" 'd["results"]["messenger"]["faults"] > 0'
    done
    # Over TCP every flipped bit lands in msgr2 frame bytes, so the fault that
    # ended the session was a CRC rejection. (On the soft fabric it may also
    # have been the RDMA stack's own header validation; the lossless case
    # checks the CRC count there.)
    expect_json "$tmp/lossy_tcp.json" "$caught"
  fi
  ;;

workloads)
  # Byte accounting per pattern, counts, conns/threads, queue dispatch.
  run echo loopback --pattern echo --size 8K --count 1000 --json "$tmp/echo.json"
  expect_status 0
  expect_json "$tmp/echo.json" 'd["results"]["bytes"] == 2 * 8192 * 1000'
  run sink loopback --pattern sink --size 8K --count 1000 --json "$tmp/sink.json"
  expect_status 0
  expect_json "$tmp/sink.json" 'd["results"]["bytes"] == 8192 * 1000'
  run source loopback --pattern source --size 8K --count 1000 --conns 2 --dispatch queue --json "$tmp/source.json"
  expect_status 0
  expect_json "$tmp/source.json" 'd["results"]["bytes"] == 8192 * 1000 and d["pattern"] == "source"'
  # --think-us: the server spends 2 ms per request, so no round trip is shorter.
  run think loopback --think-us 2000 --count 100 --inflight 1 --json "$tmp/think.json"
  expect_status 0
  expect_json "$tmp/think.json" 'd["results"]["latency_ns"]["min"] >= 2000000'
  # Open loop: --rate sets the request rate.
  run rate loopback --rate 2000 --duration 2 --warmup 0.5 --json "$tmp/rate.json"
  expect_status 0
  # The rate is a ceiling an open loop cannot beat (a closed loop runs far
  # faster); a loaded machine may fall short of it, so the floor only tells
  # "ran at all" from "stalled".
  expect_json "$tmp/rate.json" '200 <= d["results"]["msgs_per_s"] <= 2600' 
  expect_json "$tmp/rate.json" 'd["config"]["rate"] == "2000" and d["config"]["inflight"] == "1024"'
  # --plot writes both panels.
  run plot loopback --count 2000 --plot "$tmp/p.svg"
  expect_status 0
  expect_in "$tmp/p.svg" '<path d="M[^"]+L'
  ;;

server_client)
  # Two processes on 127.0.0.1; the server picks a free port and prints it.
  (cd "$tmp" && exec env -u CEPH_CONF -u CEPH_ARGS HOME="$tmp" "$bench" server --bind 127.0.0.1 --once \
     --duration 60 --json "$tmp/server.json") >"$tmp/server.out" 2>"$tmp/server.err" &
  server_pid=$!
  cleanups+=("kill $server_pid")
  addr=$(server_addr "$tmp/server.err") || fail "the server did not report its address"
  run c client --target "$addr" --duration 2 --warmup 0.5 --conns 2 --verify --json "$tmp/c.json"
  expect_status 0
  wait "$server_pid"
  status=$?
  expect_status 0
  validate "$tmp/c.json" "$tmp/server.json"
  expect_json "$tmp/c.json" 'd["mode"] == "client" and d["results"]["verify"]["lost"] == 0'
  expect_json "$tmp/c.json" 'd["results"]["cpu"]["server_user_s"] + d["results"]["cpu"]["server_system_s"] > 0'
  expect_json "$tmp/server.json" 'd["mode"] == "server" and d["config"]["client_runs"] == "1"'
  expect_in "$tmp/server.out" 'requests served'
  # Nothing listening: a clear error after --connect-timeout.
  run nobody client --target 127.0.0.1:1 --count 10 --connect-timeout 1
  expect_status 1
  expect_in "$tmp/nobody.err" 'not ready after 1 s'
  ;;

netns)
  [ "$(id -u)" -eq 0 ] || skip "creating network namespaces needs root"
  command -v ip >/dev/null || skip "iproute2 (ip) is not installed"
  a=sbA$$ b=sbB$$ va=sba$$ vb=sbb$$
  ip netns add "$a" 2>"$tmp/ns.err" || skip "cannot create a network namespace: $(cat "$tmp/ns.err")"
  cleanups+=("ip netns del $a")
  ip netns add "$b" || fail "second namespace"
  cleanups+=("ip netns del $b")
  ip link add "$va" type veth peer name "$vb" 2>"$tmp/veth.err" || skip "cannot create a veth pair: $(cat "$tmp/veth.err")"
  cleanups+=("ip link del $va")
  ip link set "$va" netns "$a" && ip link set "$vb" netns "$b" || fail "moving the veth ends"
  ip -n "$a" addr add 192.0.2.1/24 dev "$va" && ip -n "$a" link set "$va" up && ip -n "$a" link set lo up || fail "addressing $a"
  ip -n "$b" addr add 192.0.2.2/24 dev "$vb" && ip -n "$b" link set "$vb" up && ip -n "$b" link set lo up || fail "addressing $b"
  # Both processes are of this host: the soft fabric would move the bytes
  # through its same-host rings and copies (docs/rdma-provider.md), past the
  # veth. SIPHON_SOFT_LINK=tcp keeps every byte on the network, which is
  # what this case proves.
  (cd "$tmp" && exec env -u CEPH_CONF -u CEPH_ARGS HOME="$tmp" SIPHON_SOFT_LINK=tcp ip netns exec "$a" "$bench" server --bind 192.0.2.1:6800 \
     --once --duration 60 --json "$tmp/server.json") >"$tmp/server.out" 2>"$tmp/server.err" &
  server_pid=$!
  cleanups+=("kill $server_pid")
  addr=$(server_addr "$tmp/server.err") || fail "the server did not report its address"
  [ "$addr" = "v2:192.0.2.1:6800/0" ] || fail "server address $addr"
  bench_real=$bench
  bench="$tmp/in-ns-b"
  printf '#!/bin/sh\nSIPHON_SOFT_LINK=tcp exec ip netns exec %s %s "$@"\n' "$b" "$bench_real" >"$bench"
  chmod +x "$bench"
  run c client --target 192.0.2.1:6800 --duration 2 --warmup 0.5 --conns 2 --size 16K --verify --json "$tmp/c.json"
  expect_status 0
  wait "$server_pid"
  status=$?
  expect_status 0
  validate "$tmp/c.json" "$tmp/server.json"
  expect_json "$tmp/c.json" 'd["results"]["messages"] > 0 and d["results"]["verify"]["lost"] == 0 and d["results"]["verify"]["corrupted"] == 0'
  # The payload really crossed the veth pair.
  sent=$(json "$tmp/c.json" 'd["results"]["bytes"] // 2')
  rx=$(ip -n "$a" -s -j link show "$va" | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["stats64"]["rx"]["bytes"])')
  [ "$rx" -ge "$sent" ] || fail "only $rx bytes arrived on $va, the client sent $sent payload bytes in the window"
  ;;

json_schema)
  run r loopback --count 2000 --verify --json - --quiet
  expect_status 0
  cp "$tmp/r.out" "$tmp/r.json"
  validate "$tmp/r.json"
  expect_in "$tmp/r.err" '^siphon-bench loopback'   # the table moves to stderr
  run c compare --ms-types async+posix,async+rdma --duration 1 --warmup 0.2 --json "$tmp/c.json"
  expect_status 0
  validate "$tmp/c.json"
  expect_json "$tmp/c.json" '[x["ms_type"] for x in d] == ["async+posix", "async+rdma"]'
  expect_json "$tmp/c.json" 'd[0]["results"]["messages"] > 0 and d[1]["results"]["messages"] > 0'
  expect_in "$tmp/c.out" 'ms_type +async\+posix +async\+rdma'
  # The validator rejects a document that breaks the schema.
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["results"]["messages"]="many"; json.dump(d, open(sys.argv[2],"w"))' \
    "$tmp/r.json" "$tmp/bad.json"
  ! python3 "$checker" "$schema" "$tmp/bad.json" >/dev/null || fail "the validator accepted a broken document"
  ;;

secure_posix)
  secure_loopback async+posix
  ;;

secure_rdma)
  secure_loopback async+rdma
  ;;

compare_modes)
  # One command, a column per stack and mode; each row's session negotiated
  # the mode its column names.
  keyrings
  run c compare --ms-types async+posix,async+rdma --modes crc,secure -n client.bench -k "$tmp/bench.keyring" \
    --set auth_client_required=cephx --set auth_service_required=cephx --count 500 --size 4K --verify \
    --json "$tmp/c.json"
  expect_status 0
  validate "$tmp/c.json"
  expect_in "$tmp/c.out" 'ms_type +async\+posix +async\+posix +async\+rdma +async\+rdma'
  expect_in "$tmp/c.out" 'mode asked +crc +secure +crc +secure'
  expect_in "$tmp/c.out" 'auth / mode +cephx / crc +cephx / secure +cephx / crc +cephx / secure'
  expect_json "$tmp/c.json" '[(x["ms_type"], x["results"]["auth"]["con_mode"]) for x in d] == [("async+posix", "crc"), ("async+posix", "secure"), ("async+rdma", "crc"), ("async+rdma", "secure")]'
  expect_json "$tmp/c.json" 'all(x["results"]["verify"]["checked"] == 500 and x["results"]["verify"]["corrupted"] == 0 for x in d)'
  expect_json "$tmp/c.json" '[x["options"]["ms_client_mode"] for x in d] == ["crc", "secure", "crc", "secure"]'
  # Secure mode without a key cannot be had: that column fails with the
  # reason, the crc one still runs, and the exit status says it failed.
  run n compare --ms-types async+posix --modes crc,secure -n client.bench -k "$tmp/missing.keyring" --count 100
  expect_status 1
  expect_in "$tmp/n.out" 'async\+posix secure: not run: secure mode was asked for, but connection 0 negotiated crc mode with auth none \(secure mode needs cephx: give the keyring with -k/--keyring\)'
  expect_in "$tmp/n.out" 'auth / mode +none / crc +-'
  ;;

auth_refused)
  # A bench server requiring cephx, in another process; clients with a
  # wrong key and with none are refused at once, naming the cause, exit 1.
  keyrings
  (cd "$tmp" && exec env -u CEPH_CONF -u CEPH_ARGS HOME="$tmp" "$bench" server --ms-type async+posix --bind 127.0.0.1 \
     -n client.bench -k "$tmp/bench.keyring" --set auth_service_required=cephx --duration 60 \
     --json "$tmp/server.json") >"$tmp/server.out" 2>"$tmp/server.err" &
  server_pid=$!
  cleanups+=("kill $server_pid")
  addr=$(server_addr "$tmp/server.err") || fail "the server did not report its address"
  expect_in "$tmp/server.err" "server auth from clients cephx \(modes crc secure\).*cephx keys of 1 entity from keyring $tmp/bench\.keyring"
  run wrong client --ms-type async+posix --target "$addr" -n client.bench -k "$tmp/wrong.keyring" --count 10 \
    --connect-timeout 30
  expect_status 1
  expect_in "$tmp/wrong.err" "authentication with [^ ]+ failed: the osd refused the cephx key of client\.bench from keyring $tmp/wrong\.keyring \(EACCES\)"
  # No keyring: cephx is dropped on the client (auth_client_required's
  # default also lists none), and the server allows cephx only.
  run nokey client --ms-type async+posix --target "$addr" -n client.bench -k "$tmp/missing.keyring" --count 10 \
    --connect-timeout 30
  expect_status 1
  expect_in "$tmp/nokey.err" "authentication with [^ ]+ failed: peer rejected auth method none.*cephx needs a key for client\.bench: no keyring found at $tmp/missing\.keyring"
  # Requiring cephx with no key is refused before connecting.
  run nomethod client --ms-type async+posix --target "$addr" -n client.bench -k "$tmp/missing.keyring" \
    --set auth_client_required=cephx --count 10
  expect_status 1
  expect_in "$tmp/nomethod.err" "no authentication method left for client\.bench: auth_client_required = cephx.*give the keyring with -k/--keyring"
  # The right key still gets in (the refusals did not wedge the server).
  run ok client --ms-type async+posix --target "$addr" -n client.bench -k "$tmp/bench.keyring" --count 100 --verify \
    --json "$tmp/ok.json"
  expect_status 0
  expect_json "$tmp/ok.json" 'd["results"]["auth"]["method"] == "cephx"'
  # A server told to require cephx without any keyring refuses to start.
  run srvnokey loopback --ms-type async+posix -n client.bench -k "$tmp/missing.keyring" \
    --set auth_service_required=cephx --count 10
  expect_status 1
  expect_in "$tmp/srvnokey.err" "auth_service_required = cephx .*no keyring was found"
  ;;

bad_flags)
  # Every bad invocation: exit 2, one clear sentence, never a crash.
  check() {  # EXPECTED-REGEX ARGS...
    local want=$1
    shift
    run bad "$@"
    [ "$status" -eq 2 ] || fail "'$*' exited $status, expected 2"
    grep -Eq -- "$want" "$tmp/bad.err" || fail "'$*' said: $(head -n1 "$tmp/bad.err") (expected /$want/)"
  }
  check "which mode"
  check "unknown mode 'fast'" fast
  check "unknown flag '--frobnicate'" loopback --frobnicate
  check "unexpected argument 'extra'" loopback extra
  check "--conns expects a whole number from 1 to 1024, got '0'" loopback --conns 0
  check "--size expects a byte count" loopback --size 4X
  check "--size needs a value" loopback --size --verify
  check "--size-dist '1K-': " loopback --size-dist 1K-
  check "--size and --size-dist exclude each other" loopback --size 4K --size-dist 1K-2K
  check "--count and --duration exclude each other" loopback --count 5 --duration 3
  check "--warmup applies to --duration runs" loopback --count 5 --warmup 1
  check "--pattern expects echo, sink or source" loopback --pattern flood
  check "--rate expects requests per second" loopback --rate -5
  check "--threads 4 exceeds --conns 1" loopback --threads 4
  check "--verify takes no value" loopback --verify=yes
  check "--inject-corruption-every needs --verify" loopback --inject-corruption-every 3
  check "client mode needs --target" client
  check "--target 'nowhere' is not an address" client --target nowhere
  check "--target '192.0.2.1' needs a port" client --target 192.0.2.1
  check "--bind 'x:y' is not an address" server --bind x:y
  check "--size does not apply to server mode" server --size 4K
  check "--once does not apply to loopback mode" loopback --once
  check "compare mode needs --ms-types" compare
  check "--ms-types: 'tcp' is not a messenger type" compare --ms-types async+posix,tcp
  check "compare takes the stacks from --ms-types" compare --ms-types async+posix --ms-type async+posix
  check "--modes expects connection modes crc and/or secure, comma-separated \(e.g. crc,secure\), got 'fast'" \
    compare --ms-types async+posix --modes crc,fast
  check "--modes lists crc twice" compare --ms-types async+posix --modes crc,crc
  check "--modes does not apply to loopback mode" loopback --modes crc
  check "--modes sets ms_client_mode and ms_service_mode for each run; drop --ms_client_mode=crc" \
    compare --ms-types async+posix --modes secure --set ms_client_mode=crc
  check "ms_type = tcp: 'tcp' is not a messenger type" loopback --ms-type tcp
  check "--set: 'nonsense' is not an option" loopback --set nonsense=1
  check "--set 'ms_async_op_threads': expected KEY=VALUE" loopback --set ms_async_op_threads
  check "above the maximum 24" loopback --set ms_async_op_threads=99
  check "exceeds ms_max_segment_size" loopback --size 300M
  check "unable to open a configuration file" loopback -c "$tmp/missing.conf"
  run help --help
  expect_status 0
  expect_in "$tmp/help.out" '^usage:'
  ;;

interactive)
  # The progress line appears once a second on a terminal only, never with --quiet.
  command -v script >/dev/null || skip "script (util-linux) is not installed"
  (cd "$tmp" && env -u CEPH_CONF -u CEPH_ARGS HOME="$tmp" script -qec "$bench loopback --duration 2 --warmup 0" \
     "$tmp/tty.out" >/dev/null 2>&1)
  expect_in "$tmp/tty.out" 'msgs/s +[0-9.]+ MiB/s +[0-9]+ in flight'
  (cd "$tmp" && env -u CEPH_CONF -u CEPH_ARGS HOME="$tmp" script -qec "$bench loopback --duration 2 --warmup 0 --quiet" \
     "$tmp/ttyq.out" >/dev/null 2>&1)
  expect_in "$tmp/ttyq.out" 'siphon-bench loopback'
  expect_not_in "$tmp/ttyq.out" 'in flight'
  run pipe loopback --duration 2 --warmup 0
  expect_status 0
  expect_not_in "$tmp/pipe.err" 'in flight'
  # Ctrl-C ends the run early and still reports what was measured.
  (cd "$tmp" && exec env -u CEPH_CONF -u CEPH_ARGS HOME="$tmp" "$bench" loopback --duration 60 --warmup 0 \
     --json "$tmp/int.json") >"$tmp/int.out" 2>"$tmp/int.err" &
  pid=$!
  sleep 2
  kill -INT "$pid"
  wait "$pid"
  status=$?
  expect_status 0
  validate "$tmp/int.json"
  expect_json "$tmp/int.json" '0.5 < d["results"]["seconds"] < 30 and d["results"]["messages"] > 0'
  ;;

*)
  echo "unknown case $case_name" >&2
  exit 2
  ;;
esac
echo "PASS ($case_name)"
