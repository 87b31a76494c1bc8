#!/bin/sh
# Runs the VerbsFakeDevice tests against a fake "rxe0" on a host without RDMA:
# a fake sysfs (libibverbs honours $SYSFS_PATH) and a private /dev whose
# /dev/infiniband/uverbs0 is the null device (rdma-testing.md §2). Everything
# happens in a private mount namespace; nothing outside it changes. Each run
# covers one rdma_cm situation: "absent" (no rdma_cm ABI file: librdmacm
# assumes the newest ABI, so rdma_get_devices works but there is no
# /dev/infiniband/rdma_cm) and "unsupported" (an ABI librdmacm rejects:
# rdma_get_devices fails and the provider falls back to ibv_open_device).
#
#   fake_device.sh <verbs_provider_test binary>      exit 77 = skipped
set -eu
bin=$1
if [ "$(id -u)" != 0 ] || ! unshare -m --propagation private true 2>/dev/null; then
  echo "skipped: needs root and unshare -m (private mount namespaces)"
  exit 77
fi
if ! ls /etc/libibverbs.d/rxe.driver >/dev/null 2>&1; then
  echo "skipped: the rxe provider of libibverbs is not installed (ibverbs-providers)"
  exit 77
fi
dir=$(mktemp -d /tmp/siphon-fake-sysfs.XXXXXX)
trap 'rm -rf "$dir"' EXIT
for cm in absent unsupported; do
  echo "=== rdma_cm $cm"
  SIPHON_FAKE_DIR=$dir SIPHON_VERBS_FAKE_CM=$cm unshare -m --propagation private sh -eu -c '
    F=$SIPHON_FAKE_DIR/sys
    rm -rf "$F"
    mkdir -p "$F/class/infiniband_verbs/uverbs0" "$F/class/infiniband/rxe0"
    echo 6 > "$F/class/infiniband_verbs/abi_version"
    echo rxe0 > "$F/class/infiniband_verbs/uverbs0/ibdev"
    echo 1:3 > "$F/class/infiniband_verbs/uverbs0/dev"        # the null device
    echo 2 > "$F/class/infiniband_verbs/uverbs0/abi_version"  # what librxe accepts
    echo "1: CA" > "$F/class/infiniband/rxe0/node_type"
    if [ "$SIPHON_VERBS_FAKE_CM" = unsupported ]; then
      mkdir -p "$F/class/misc/rdma_cm"
      echo 1 > "$F/class/misc/rdma_cm/abi_version"
    fi
    mount --make-rprivate /
    mount -t tmpfs siphon-fake-dev /dev
    mknod -m 666 /dev/null c 1 3
    mknod -m 666 /dev/zero c 1 5
    mknod -m 666 /dev/urandom c 1 9
    mkdir /dev/infiniband
    mknod -m 666 /dev/infiniband/uverbs0 c 1 3
    SYSFS_PATH=$F SIPHON_VERBS_FAKE_SYSFS=1 exec "$0" --gtest_brief=1 --gtest_filter="VerbsFakeDevice.*"
  ' "$bin"
done
