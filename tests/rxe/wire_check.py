#!/usr/bin/env python3
"""wire_check.py -- holds a pcap of the two-host rxe tier's link (run-pair
--pcap, QEMU filter-dump) against what the RDMA stack was asked for and what
it logged. tshark (Debian's) decodes RoCEv2: UDP port 4791 carries the
InfiniBand BTH.

  wire_check.py PCAP --tos N --mtu N --applied-a FILE --applied-b FILE [--tshark PATH]

  --tos N        ms_async_rdma_dscp (the whole TOS byte, as in Ceph): every
                 RoCE packet's IP DSCP must be N >> 2 and its ECN bits N & 3
                 (rxe copies the traffic class into the TOS byte unchanged)
  --mtu N        ms_async_rdma_path_mtu: no BTH payload above N, and some at
                 exactly N (the segmentation really used N)
  --applied-a/-b the 'rdma_cm connections use ...' line each guest's stack
                 logged: the RoCEv2 IPv4-mapped GIDs (::ffff:a.b.c.d), which on
                 RoCEv2 travel as the IPv4 source and destination

Also: every IPv4 packet on the link is RoCEv2 (UDP to 4791, dissected as
InfiniBand); the RC opcode mix has SENDs, RDMA READ requests and READ
responses (the zero-copy path); no RNR NAK. Prints a summary; exit 0 when
every check holds, 1 otherwise (each failed check named), 2 on bad input.
"""
import argparse
import collections
import ipaddress
import re
import subprocess
import sys

# Extension header bytes after the BTH, by RC/UD opcode (IBA vol. 1, 9.2 and
# table 38): RETH 16, AETH 4, ImmDt 4, IETH 4, AtomicETH 28, AtomicAckETH 8,
# DETH 8.
EXT = {0: 0, 1: 0, 2: 0, 3: 4, 4: 0, 5: 4, 6: 16, 7: 0, 8: 0, 9: 4, 10: 16, 11: 20, 12: 16, 13: 4, 14: 0,
       15: 4, 16: 4, 17: 4, 18: 12, 19: 28, 20: 28, 22: 4, 23: 4, 100: 8, 101: 12}
NAMES = {0: "SEND first", 1: "SEND middle", 2: "SEND last", 3: "SEND last+imm", 4: "SEND only",
         5: "SEND only+imm", 6: "WRITE first", 7: "WRITE middle", 8: "WRITE last", 9: "WRITE last+imm",
         10: "WRITE only", 11: "WRITE only+imm", 12: "READ request", 13: "READ response first",
         14: "READ response middle", 15: "READ response last", 16: "READ response only", 17: "ACK",
         100: "UD SEND only (CM MADs)"}
FIELDS = ["frame.number", "ip.src", "ip.dst", "ip.proto", "udp.dstport", "udp.length", "ip.dsfield.dscp",
          "ip.dsfield.ecn", "infiniband.bth.opcode", "infiniband.bth.padcnt", "infiniband.bth.destqp",
          "infiniband.aeth.syndrome", "infiniband.cm.rej.localcommid", "infiniband.cm.rej.reason"]

# A CM REJ with no local communication ID and reason 8 (invalid service ID)
# is the kernel's answer to a REQ for a port nobody listens on (a client
# dialling before the server's listener is up): no rdma_cm id exists on the
# rejecting side, so no consumer's TOS can apply, and it goes out with the
# kernel's default traffic class. Such REJs are counted, and exempt from the
# DSCP/ECN check; every other CM MAD must carry the TOS.
KERNEL_REJ_REASON = 8


def gid_ipv4(path: str) -> str:
    text = open(path, encoding="utf-8", errors="replace").read()
    m = re.search(r"GID\[\d+\] (\S+) RoCE v2", text)
    if not m:
        raise ValueError(f"{path}: no 'GID[n] <gid> RoCE v2' in {text.strip()!r}")
    g = ipaddress.IPv6Address(m.group(1))
    if g.ipv4_mapped is None:
        raise ValueError(f"{path}: GID {g} is not IPv4-mapped (::ffff:a.b.c.d)")
    return str(g.ipv4_mapped)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("pcap")
    ap.add_argument("--tos", type=int, required=True)
    ap.add_argument("--mtu", type=int, required=True)
    ap.add_argument("--applied-a", required=True)
    ap.add_argument("--applied-b", required=True)
    ap.add_argument("--tshark", default="tshark")
    a = ap.parse_args()
    try:
        ip_a, ip_b = gid_ipv4(a.applied_a), gid_ipv4(a.applied_b)
    except (OSError, ValueError) as e:
        print(f"wire_check: {e}", file=sys.stderr)
        return 2
    cmd = [a.tshark, "-n", "-r", a.pcap, "-Y", "ip", "-T", "fields", "-E", "separator=\t", "-E", "occurrence=f"]
    for f in FIELDS:
        cmd += ["-e", f]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as e:
        print(f"wire_check: cannot run tshark: {e}", file=sys.stderr)
        return 2
    if res.returncode != 0:
        print(f"wire_check: tshark failed ({res.returncode}): {res.stderr.strip()}", file=sys.stderr)
        return 2

    failures = []
    opcodes = collections.Counter()
    tos_seen = collections.Counter()
    pairs = collections.Counter()
    payload_max = 0
    payload_at_mtu = 0
    rnr = naks = 0
    total = roce = 0
    kernel_rejs = 0  # CM REJs the kernel sent for a port with no listener (exempt from the TOS check)
    first_bad = {}

    def bad(key: str, msg: str):
        if key not in first_bad:
            first_bad[key] = msg

    for line in res.stdout.splitlines():
        v = line.split("\t")
        v += [""] * (len(FIELDS) - len(v))
        frame, src, dst, proto, dport, ulen, dscp, ecn, op, pad, destqp, synd, rej_comm, rej_reason = v[:len(FIELDS)]
        total += 1
        if proto != "17" or dport != "4791" or op == "":
            bad("not-roce", f"frame {frame}: IPv4 {src} -> {dst} proto {proto} port {dport or '-'} is not RoCEv2")
            continue
        roce += 1
        op_i = int(op)
        opcodes[op_i] += 1
        pairs[(src, dst)] += 1
        tos_seen[(int(dscp), int(ecn))] += 1
        if rej_reason != "" and int(rej_reason, 0) == KERNEL_REJ_REASON and int(rej_comm or "0", 0) == 0:
            kernel_rejs += 1
        elif int(dscp) != a.tos >> 2:
            bad("dscp", f"frame {frame} ({NAMES.get(op_i, op_i)}): DSCP {dscp}, expected {a.tos >> 2}")
        if int(ecn) != a.tos & 3 and not (rej_reason != "" and int(rej_reason, 0) == KERNEL_REJ_REASON
                                          and int(rej_comm or "0", 0) == 0):
            bad("ecn", f"frame {frame} ({NAMES.get(op_i, op_i)}): ECN {ecn}, expected {a.tos & 3}")
        if (src, dst) not in ((ip_a, ip_b), (ip_b, ip_a)):
            bad("gid", f"frame {frame}: {src} -> {dst}, but the stacks logged GIDs ::ffff:{ip_a} and ::ffff:{ip_b}")
        if op_i not in EXT:
            bad("opcode", f"frame {frame}: opcode {op_i}, which this check does not know")
            continue
        payload = int(ulen) - 8 - 12 - EXT[op_i] - 4 - int(pad or 0)
        if payload < 0:
            bad("length", f"frame {frame}: UDP length {ulen} is too short for {NAMES.get(op_i, op_i)}")
        payload_max = max(payload_max, payload)
        if payload == a.mtu:
            payload_at_mtu += 1
        if payload > a.mtu:
            bad("mtu", f"frame {frame} ({NAMES.get(op_i, op_i)}): {payload} payload bytes over the path MTU {a.mtu}")
        if synd:
            s = int(synd, 0)
            if s & 0xE0 == 0x20:
                rnr += 1
                bad("rnr", f"frame {frame}: RNR NAK (AETH syndrome {synd})")
            elif s & 0xE0 == 0x60:
                naks += 1

    print(f"wire_check: {total} IPv4 frames, {roce} RoCEv2 (UDP 4791, InfiniBand BTH)")
    print("  opcodes: " + ", ".join(f"{NAMES.get(k, k)} {n}" for k, n in sorted(opcodes.items())))
    print("  (DSCP, ECN): " + ", ".join(f"{k} {n}" for k, n in sorted(tos_seen.items()))
          + (f"; {kernel_rejs} CM REJ(s) for a port with no listener, sent by the kernel with its default TOS"
             if kernel_rejs else ""))
    print("  directions: " + ", ".join(f"{s} -> {d} {n}" for (s, d), n in sorted(pairs.items())))
    print(f"  largest BTH payload {payload_max} B, {payload_at_mtu} packets at exactly {a.mtu} B; "
          f"RNR NAKs {rnr}, other NAKs {naks}")

    for key in ("not-roce", "dscp", "ecn", "gid", "opcode", "length", "mtu", "rnr"):
        if key in first_bad:
            failures.append(first_bad[key])
    if roce == 0:
        failures.append("no RoCEv2 packet on the wire")
    if (ip_a, ip_b) not in pairs or (ip_b, ip_a) not in pairs:
        failures.append(f"traffic in both directions between {ip_a} and {ip_b}: seen {dict(pairs)}")
    if payload_at_mtu == 0:
        failures.append(f"no packet carries exactly {a.mtu} payload bytes: the path MTU in use is not {a.mtu}")
    if not any(opcodes[k] for k in range(0, 6)):
        failures.append("no RC SEND on the wire")
    if opcodes[12] == 0:
        failures.append("no RDMA READ request on the wire (the zero-copy path)")
    if not any(opcodes[k] for k in (13, 14, 15, 16)):
        failures.append("no RDMA READ response on the wire")
    for f in failures:
        print(f"wire_check: FAILED: {f}")
    if not failures:
        print(f"wire_check: passed (TOS {a.tos} = DSCP {a.tos >> 2} ECN {a.tos & 3}, path MTU {a.mtu}, "
              f"GIDs ::ffff:{ip_a} <-> ::ffff:{ip_b})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
