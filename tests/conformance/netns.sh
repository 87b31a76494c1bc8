#!/bin/sh
# Runs the conformance suite's two-sided tests with side A in one network
# namespace and side B in another, joined by a veth pair with TEST-NET-1
# addresses (192.0.2.1/24, 192.0.2.2/24) that exist only inside the
# namespaces. Creates and deletes the namespaces itself; exits 77 (skipped)
# when namespaces cannot be created (not root, no `ip`).
#   netns.sh PATH/TO/provider_conformance [gtest args...]
set -u
bin=$1
shift
if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null 2>&1; then
  echo "SKIP: network namespaces need root and iproute2 ('ip')"
  exit 77
fi
tag=$$
a=siphon_a_$tag
b=siphon_b_$tag
cleanup() {
  ip netns del "$a" 2>/dev/null
  ip netns del "$b" 2>/dev/null
}
trap cleanup EXIT INT TERM
if ! ip netns add "$a" 2>/dev/null || ! ip netns add "$b" 2>/dev/null; then
  echo "SKIP: cannot create network namespaces (ip netns add failed)"
  exit 77
fi
set -e
ip link add "va$tag" type veth peer name "vb$tag"
ip link set "va$tag" netns "$a"
ip link set "vb$tag" netns "$b"
ip -n "$a" addr add 192.0.2.1/24 dev "va$tag"
ip -n "$b" addr add 192.0.2.2/24 dev "vb$tag"
ip -n "$a" link set lo up
ip -n "$b" link set lo up
ip -n "$a" link set "va$tag" up
ip -n "$b" link set "vb$tag" up
set +e
ip netns exec "$a" "$bin" --provider=soft --peer=netns --peer-netns="$b" \
  --local-addr=192.0.2.1 --peer-addr=192.0.2.2 \
  --gtest_filter='SendRecv.*:Imm.*:Rdma.*:Rnr.*:Flush.*:Srq.*:PeerDeath.*:Cm.*:MemoryWindow.*' --gtest_brief=1 "$@"
