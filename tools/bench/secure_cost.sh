#!/usr/bin/env bash
# What msgr2 secure mode costs against crc mode, next to what the cipher
# itself costs on this machine, in one run (issue 15 item 7;
# docs/performance.md, "Secure mode against crc mode"):
#
#   1. openssl speed -evp aes-128-gcm -bytes 16384 -seconds 3: OpenSSL's own
#      AES-128-GCM on one core, the baseline;
#   2. tests/bench/secure_bench: the same 16 KiB through Siphon's code
#      (GcmStream alone, and a whole secure frame sealed and opened);
#   3. siphon-bench compare --modes crc,secure over async+posix and
#      async+rdma (soft fabric without a NIC), one connection, 4 KiB and
#      4 MiB messages, cephx from a throwaway keyring;
#
# then prints the two ratios the issue targets: secure/crc bulk throughput
# on TCP (4 MiB; target >= 0.8) and the AES-GCM path per core against
# openssl speed at 16 KiB (secure frame sealing; target >= 0.9).
#
#   tools/bench/secure_cost.sh [--build DIR] [--duration SEC] [--out DIR]
#
# DIR defaults to build/release; the JSON and raw outputs stay in --out
# (default: a temporary directory, removed at the end).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build="$root/build/release"
duration=5
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "secure_cost.sh: unknown argument '$1' (--build DIR, --duration SEC, --out DIR)" >&2; exit 2 ;;
  esac
done
bench="$build/tools/bench/siphon-bench"
sbench="$build/tests/bench/secure_bench"
for x in "$bench" "$sbench"; do
  [ -x "$x" ] || { echo "secure_cost.sh: $x not built (cmake --build --preset release --target siphon-bench secure_bench)" >&2; exit 2; }
done
command -v openssl >/dev/null || { echo "secure_cost.sh: openssl not found (apt-get install openssl)" >&2; exit 2; }
if [ -z "$out" ]; then
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi
mkdir -p "$out"

echo "# $(date -u +%FT%TZ) $(uname -n), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# $(openssl version)"

# 1. OpenSSL's own figure (its 'numbers' are 1000s of bytes per second).
echo "+ openssl speed -evp aes-128-gcm -bytes 16384 -seconds 3"
openssl speed -evp aes-128-gcm -bytes 16384 -seconds 3 >"$out/openssl.txt" 2>"$out/openssl.err"
openssl_bps=$(awk '/^AES-128-GCM/ {v=$NF; sub(/k$/, "", v); printf "%.0f", v * 1000}' "$out/openssl.txt")
[ -n "$openssl_bps" ] || { cat "$out/openssl.txt" "$out/openssl.err" >&2; echo "secure_cost.sh: no AES-128-GCM line from openssl speed" >&2; exit 1; }

# 2. Siphon's AES-GCM path, same size.
# glibc's heap trimming is kept out of it: the open benchmark frees a batch
# of sealed frames at a time, and with glibc's defaults that trims the heap
# top and grows it again with brk every few frames (docs/performance.md,
# "Secure mode against crc mode"), which is the allocator's cost in this
# pattern, not the cipher path's.
tunables=glibc.malloc.trim_threshold=67108864:glibc.malloc.top_pad=16777216
echo "+ GLIBC_TUNABLES=$tunables secure_bench --benchmark_min_time=2 --benchmark_repetitions=3"
GLIBC_TUNABLES=$tunables "$sbench" --benchmark_min_time=2 --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
  --benchmark_format=json >"$out/secure_bench.json" 2>"$out/secure_bench.err"

# 3. crc against secure, both stacks, 4 KiB and 4 MiB, one connection.
python3 - "$out/keyring" <<'PY'
import base64, os, struct, sys, time
# Ceph's key encoding: u16 type (1 = AES), utime created, u16 length, secret.
key = struct.pack("<HIIH", 1, int(time.time()), 0, 16) + os.urandom(16)
with open(sys.argv[1], "w") as f:
    f.write("[client.bench]\n\tkey = %s\n" % base64.b64encode(key).decode())
os.chmod(sys.argv[1], 0o600)
PY
for size in 4K 4M; do
  cmd=("$bench" compare --ms-types async+posix,async+rdma --modes crc,secure --size "$size" --conns 1
       --duration "$duration" --warmup 1 -n client.bench -k "$out/keyring" --set auth_client_required=cephx
       --set auth_service_required=cephx --quiet --json "$out/compare-$size.json")
  echo "+ siphon-bench ${cmd[*]:1}"
  env -u CEPH_ARGS -u CEPH_CONF "${cmd[@]}" >"$out/compare-$size.txt" 2>"$out/compare-$size.err" || {
    cat "$out/compare-$size.txt" "$out/compare-$size.err" >&2
    echo "secure_cost.sh: the $size compare failed" >&2
    exit 1
  }
  cat "$out/compare-$size.txt"
done

# Secure mode sends every byte through SENDs on async+rdma (no RDMA READ of
# a ciphertext segment, and no plaintext in a region the peer can read), so
# the fair crc baseline there is crc with zero copy off, too.
cmd=("$bench" loopback --ms-type async+rdma --set ms_async_rdma_zero_copy_threshold=0 --size 4M --conns 1
     --duration "$duration" --warmup 1 -n client.bench -k "$out/keyring" --set auth_client_required=cephx
     --set auth_service_required=cephx --set ms_client_mode=crc --quiet --json "$out/rdma-copied-4M.json")
echo "+ siphon-bench ${cmd[*]:1}"
env -u CEPH_ARGS -u CEPH_CONF "${cmd[@]}" >"$out/rdma-copied-4M.txt" 2>"$out/rdma-copied-4M.err" || {
  cat "$out/rdma-copied-4M.err" >&2
  echo "secure_cost.sh: the copied-path RDMA run failed" >&2
  exit 1
}

python3 - "$out" "$openssl_bps" <<'PY'
import json, sys
out, openssl_bps = sys.argv[1], float(sys.argv[2])
gb = json.load(open(out + "/secure_bench.json"))
def bench(name):
    for b in gb["benchmarks"]:
        if b["name"].startswith(name + "/") and b.get("aggregate_name") == "median":
            return b["bytes_per_second"]
    raise SystemExit("secure_cost.sh: no median for " + name + " in secure_bench's output")
print()
print("AES-128-GCM at 16 KiB, one core (bytes/s; secure_bench medians of 3):")
print("  %-34s %12.0f MB/s" % ("openssl speed -evp aes-128-gcm", openssl_bps / 1e6))
for name, label in (("BM_GcmStreamSeal", "BM_GcmStreamSeal"), ("BM_SecureFrameSeal", "BM_SecureFrameSeal"),
                    ("BM_SecureFrameOpen/bytes:16384/batch:8", "BM_SecureFrameOpen, in cache"),
                    ("BM_SecureFrameOpen/bytes:16384/batch:256", "BM_SecureFrameOpen, from memory")):
    v = bench(name)
    print("  %-34s %12.0f MB/s  %.2fx openssl" % (label, v / 1e6, v / openssl_bps))
print()
print("secure / crc throughput (siphon-bench compare, one connection, echo):")
rows = {}
for size in ("4K", "4M"):
    for d in json.load(open("%s/compare-%s.json" % (out, size))):
        if d["results"] is None:
            continue
        rows[(size, d["ms_type"], d["results"]["auth"]["con_mode"])] = d["results"]["mib_per_s"]
for size in ("4K", "4M"):
    for stack in ("async+posix", "async+rdma"):
        crc, sec = rows.get((size, stack, "crc")), rows.get((size, stack, "secure"))
        if crc and sec:
            print("  %-4s %-12s crc %9.1f MiB/s  secure %9.1f MiB/s  ratio %.2f" % (size, stack, crc, sec, sec / crc))
copied = json.load(open(out + "/rdma-copied-4M.json"))["results"]["mib_per_s"]
sec = rows.get(("4M", "async+rdma", "secure"))
if sec:
    print("  4M   async+rdma   crc, zero copy off %9.1f MiB/s  secure %9.1f MiB/s  ratio %.2f" % (copied, sec, sec / copied))
print()
tcp = rows.get(("4M", "async+posix", "secure")), rows.get(("4M", "async+posix", "crc"))
ratio1 = tcp[0] / tcp[1] if all(tcp) else float("nan")
ratio2 = bench("BM_SecureFrameSeal") / openssl_bps
ratio3 = bench("BM_SecureFrameOpen/bytes:16384/batch:8") / openssl_bps
print("target 1: secure-mode bulk throughput on TCP (4 MiB) / crc mode = %.2f (target >= 0.8: %s)"
      % (ratio1, "met" if ratio1 >= 0.8 else "missed"))
print("target 2: AES-GCM path per core (16 KiB) / openssl speed: secure frame seal %.2f, open (in cache) %.2f"
      " (target >= 0.9: %s)" % (ratio2, ratio3, "met" if min(ratio2, ratio3) >= 0.9 else "missed"))
PY
