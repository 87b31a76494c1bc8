#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_secure_frames (see its header for the input
layout) from the lab capture tests/interop/data/cephx-known-key.pcap, whose
connection secrets are known (shared/reference/cephx.md 12.2, 12.3):

  - receive seeds: the secure-mode bytes each side of connections A (mon,
    port 3401) and B (osd.0, port 3410) received, as captured (msgr2.1);
  - the same frames decrypted and sealed again in the msgr2.0 layout with the
    same keys (the lab has no rev0 capture; the decoder must take them);
  - seal-and-mutate seeds: each decrypted frame as a plaintext frame, alone
    and with a few mutations.

Run from anywhere (python3-cryptography, Debian's, does the AES-GCM):

  tests/fuzz/make_secure_frame_seeds.py

The seeds are committed; rerun only when the capture or the input layout of
fuzz_secure_frames changes."""
import os
import struct
import sys

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

HERE = os.path.dirname(os.path.abspath(__file__))
PCAP = os.path.join(HERE, "..", "interop", "data", "cephx-known-key.pcap")
OUT = os.path.join(HERE, "corpus", "secure_frames")
sys.path.insert(0, os.environ.get("SIPHON_CEPH_LAB", "/work/shared/reference/ceph-lab"))
import msgr2_decode  # noqa: E402

# (port, client port, connection secret, pre-auth bytes c2s, s2c); keyset
# 2*i is "the connecting side receives" (s2c), 2*i+1 "the accepting side".
CONNS = [
    (3401, 59828, bytes.fromhex(
        "1d9bc3882434a7e7d856f3ec0f5f36228ef31decffb7aae48a230f6e8c004dcfee6f132b1d375cf7"
        "e41d55b3d8bde8d471401bada460e49f3354bc5e0e5d4e9f"), 252, 473),
    (3410, 33322, bytes.fromhex(
        "f170b3730f470002523044f458d2ec6068cbd326d078c802782f37e2ab32db83dc5e8289d73c0392"
        "4ccc61768835ec0cb135f7d667121c207f9d6c2b1e017476"), 538, 322),
]
MAX_SEG = 0x7FF  # fuzz_secure_frames caps each segment length


def pad16(n):
    return (n + 15) & ~15


class Nonce:
    def __init__(self, n, rev1):
        self.n = bytearray(n)
        self.rev1 = rev1

    def take(self):
        cur = bytes(self.n)
        lo, hi = (4, 12) if self.rev1 else (0, 4)
        for i in range(lo, hi):
            self.n[i] = (self.n[i] + 1) & 0xFF
            if self.n[i]:
                break
        return cur


def open_rev1(key, nonce, wire):
    """Decrypts a msgr2.1 secure stream -> [(tag, [seg0..seg3], aligns)]."""
    g, n, off, frames = AESGCM(key), Nonce(nonce, True), 0, []
    while off + 96 <= len(wire):
        m1 = g.decrypt(n.take(), wire[off:off + 96], None)
        off += 96
        pre = m1[:32]
        tag, nseg = pre[0], pre[1]
        lens = [struct.unpack_from("<I", pre, 2 + 6 * i)[0] for i in range(4)]
        aligns = [struct.unpack_from("<H", pre, 6 + 6 * i)[0] for i in range(4)]
        seg0 = m1[32:]
        p0 = pad16(lens[0])
        if p0 > 48:
            seg0 += g.decrypt(n.take(), wire[off:off + p0 - 48 + 16], None)
            off += p0 - 48 + 16
        segs = [seg0[:lens[0]]]
        if nseg > 1:
            m3 = sum(pad16(x) for x in lens[1:nseg]) + 16
            body = g.decrypt(n.take(), wire[off:off + m3 + 16], None)
            off += m3 + 16
            at = 0
            for i in range(1, nseg):
                segs.append(body[at:at + lens[i]])
                at += pad16(lens[i])
        frames.append((tag, segs + [b""] * (4 - len(segs)), pre))
    return frames


def seal_rev0(key, nonce, frames):
    g, n, out = AESGCM(key), Nonce(nonce, False), b""
    for _, segs, pre in frames:
        nseg = pre[1]
        plain = pre + b"".join(s + b"\0" * (pad16(len(s)) - len(s)) for s in segs[:nseg]) + b"\0" * 16
        out += g.encrypt(n.take(), plain, None)
    return out


def plain_seed(keyset, rev0, chunk, tag, segs, copies=1, ops=b""):
    lens = [min(len(s), MAX_SEG) for s in segs]
    mode = 3 if rev0 else 2
    b3 = (copies - 1) | ((len(ops) // 4) << 2)
    head = bytes([mode | keyset << 2, chunk, tag - 1, b3]) + struct.pack("<4H", *lens)
    return head + b"".join(s[:MAX_SEG] for s in segs) + ops


def main():
    os.makedirs(OUT, exist_ok=True)
    written = 0

    def write(name, blob):
        nonlocal written
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(blob)
        written += 1
    for ci, (port, cport, secret, pre_c2s, pre_s2c) in enumerate(CONNS):
        conn = next(v for k, v in msgr2_decode.streams(PCAP, port).items() if k[0][1] == cport)
        key, nonce_a, nonce_b = secret[:16], secret[16:28], secret[28:40]
        # s2c is received by the connecting side with nonce A, c2s by the
        # accepting side with nonce B (cephx.md 6.1).
        for side, (dirn, pre, nonce) in enumerate([("s2c", pre_s2c, nonce_a), ("c2s", pre_c2s, nonce_b)]):
            keyset = 2 * ci + side
            wire = conn[dirn][pre:]
            frames = open_rev1(key, nonce, wire)
            name = f"conn{'AB'[ci]}_{dirn}"
            write(f"rev1_{name}_whole", bytes([0 | keyset << 2, 0]) + wire)
            write(f"rev1_{name}_chunk7", bytes([0 | keyset << 2, 7]) + wire)
            rev0 = seal_rev0(key, nonce, frames)
            write(f"rev0_{name}_whole", bytes([1 | keyset << 2, 0]) + rev0)
            write(f"rev0_{name}_chunk13", bytes([1 | keyset << 2, 13]) + rev0)
            for fi, (tag, segs, _) in enumerate(frames):
                write(f"plain_rev1_{name}_{fi}", plain_seed(keyset, False, 0, tag, segs))
                write(f"plain_rev0_{name}_{fi}", plain_seed(keyset, True, 5, tag, segs))
            tag, segs, _ = frames[-1]
            # Two copies, one bit flipped in the second (offset 200), and a truncation.
            write(f"plain_rev1_{name}_flip", plain_seed(keyset, False, 3, tag, segs, 2, b"\x00\xc8\x00\x04"))
            write(f"plain_rev0_{name}_cut", plain_seed(keyset, True, 0, tag, segs, 2, b"\x01\x64\x00\x00"))
    print(f"wrote {written} seeds to {OUT}")


if __name__ == "__main__":
    main()
