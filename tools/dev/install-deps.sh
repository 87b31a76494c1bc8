#!/usr/bin/env bash
# Installs every Debian 12 package Siphon's build, tests and benchmarks need.
# Idempotent: packages already present are not reinstalled; apt is only
# touched when something is missing. Run as root (or through sudo).
set -euo pipefail

# Build and unit tests.
pkgs=(
  build-essential cmake ninja-build pkg-config ccache git python3
  g++ clang-14 libclang-rt-14-dev lld
  libboost-dev libfmt-dev liburing-dev libisal-dev libssl-dev
  libibverbs-dev librdmacm-dev rdma-core
  libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev
  iproute2 procps
)
# Optional groups, selected by the caller: SIPHON_DEPS="interop rxe bench".
for group in ${SIPHON_DEPS:-}; do
  case "$group" in
    interop) pkgs+=(ceph-mon ceph-common ceph-osd prometheus) ;;
    rxe)     pkgs+=(qemu-system-x86 busybox-static kmod cpio ibverbs-utils rdmacm-utils tshark) ;;
    bench)   pkgs+=(iperf3 sockperf ucx-utils) ;;
    *) echo "install-deps: unknown group '$group' (known: interop rxe bench)" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#pkgs[@]} packages present"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages: ${missing[*]}" >&2
  echo "install-deps: run as root (or: sudo $0) to install them" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get -o DPkg::Lock::Timeout=600 update -qq
apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}"
