#!/usr/bin/env bash
# siphon_conf_cli: siphon-conf's actions and exit statuses (the lookups are
# compared with ceph-conf by siphon_conf_vs_ceph_conf).
#
#   siphon_conf_cli.sh SIPHON_CONF CORPUS_DIR
set -uo pipefail
sc=$(realpath "$1")
cd "$2" || exit 1
unset CEPH_ARGS CEPH_CONF
failures=0

# expect NAME WANT_EXIT PATTERN -- ARGS...: runs siphon-conf ARGS and checks
# the exit status and that stdout+stderr match the extended regex PATTERN.
expect() {
  local name=$1 want=$2 pattern=$3
  shift 4
  local out rc
  out=$("$sc" "$@" 2>&1)
  rc=$?
  if [ "$rc" != "$want" ] || ! grep -Eq -- "$pattern" <<< "$out"; then
    failures=$((failures + 1))
    echo "FAIL: $name: siphon-conf $* (exit $rc, wanted $want; pattern '$pattern')"
    sed 's/^/  | /' <<< "$out" | head -20
  fi
}

expect "check: clean file" 0 "basic.conf: 0 errors, 13 warnings" -- -c basic.conf --check
expect "check: warnings have positions" 0 "basic.conf:24:1: warning: unknown option 'ms__type'" -- -c basic.conf --check
expect "check: [ms] snippet" 1 "ms-snippet.conf:3:22: error: .*use ms_async_rdma_device_name = mlx5_0" -- \
  -c ms-snippet.conf -n osd.0 --check
expect "check: [ms] is not read" 1 "ms-snippet.conf:1:1: warning: section \[ms\] is read by no Ceph" -- \
  -c ms-snippet.conf --check
expect "check: syntax error" 1 "junk-after-quote.conf:2:19: error: unexpected text" -- \
  -c malformed/junk-after-quote.conf --check
expect "check: BOM tolerated" 0 "bom.conf:1:1: warning: UTF-8 byte-order mark" -- -c siphon-only/bom.conf --check
expect "show-config: sources" 0 "^ms_type = async\+posix  # basic.conf:33 \[osd.1\]$" -- \
  -c basic.conf -n osd.1 --show-config
expect "show-config: argv source" 0 "^ms_async_op_threads = 9  # command line$" -- \
  -c basic.conf --ms-async-op-threads 9 --show-config
export CEPH_ARGS="--ms_crc_header=false"
expect "show-config: env source" 0 "^ms_crc_header = false  # CEPH_ARGS$" -- -c basic.conf --show-config
unset CEPH_ARGS
expect "show-config: header" 0 "^cluster = basic$" -- -c basic.conf --show-config
expect "show-config-value" 0 "^131072$" -- -c basic.conf --show-config-value ms_async_rdma_buffer_size
expect "show-config-value: not an option" 1 "not an option Siphon uses" -- -c basic.conf --show-config-value nope
expect "list sections" 0 "^client.rgw.gw1$" -- -c basic.conf -L
expect "positional key" 0 "^async\+rdma$" -- -c basic.conf -n osd.3 ms_type
# $pid is this siphon-conf's (ceph-conf's own differs, so conf_vs_ceph_conf
# cannot compare it).
expect "lookup \$pid" 0 "^/tmp/admin_socket-client\.pid\.[0-9]+\.asok$" -- -c admin_socket.conf -n client.pid --lookup admin_socket
expect "admin_socket default" 0 "^/var/run/ceph/basic-osd\.2\.asok$" -- -c basic.conf -n osd.2 --show-config-value admin_socket
expect "lookup --name=" 0 "^async\+posix$" -- -c basic.conf --name=osd.1 --lookup=ms_type
expect "no action" 1 "give an action" --
expect "unknown argument" 1 "unknown argument '--bogus'" -- -c basic.conf --bogus --lookup x
expect "bad value on the command line" 1 "command line: error: --ms_crc_data=maybe" -- \
  -c basic.conf --ms_crc_data=maybe --show-config
# The RDMA stack's ranges (rdma/transport/options.h) are the schema's: a value the
# stack would refuse at start is an error here, with its accepted range.
expect "rdma range from the stack" 1 "command line: error: --ms_async_rdma_credits: '5000' is above the maximum 4096 .*2..4096" -- \
  -c basic.conf --ms_async_rdma_credits 5000 --check
expect "bad name" 1 "'foo' is not an entity name" -- -c basic.conf -n foo --lookup ms_type
expect "missing file" 1 "unable to open a configuration file from the search list: nope.conf" -- \
  -c nope.conf --check
expect "search list" 0 "^async\+rdma$" -- -c "nope.conf,crlf.conf" --lookup ms_type
expect "help" 0 "^USAGE" -- --help
expect "schema list" 0 "^ms_async_rdma_credits	uint	siphon	advanced$" -- --list-options
expect "markdown" 0 "^\| \`ms_type\` \| str \|" -- --dump-schema-markdown
export CEPH_CONF=crlf.conf
expect "CEPH_CONF" 0 "^async\+rdma$" -- --lookup ms_type
unset CEPH_CONF

echo "siphon_conf_cli: $failures failure(s)"
[ "$failures" -eq 0 ]
