#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_mon from the captured `ceph -s` session
(tests/interop/data/msgr2-ceph-s.pcap, ceph 16.2.15, mon on port 3310): every
MESSAGE frame of a type fuzz_mon decodes, as <selector byte><version byte>
<front>[<data>], and the MonMap blob alone (selector 0). Run from anywhere:

  tests/fuzz/make_mon_seeds.py

The seeds are committed; rerun only when the capture changes."""
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PCAP = os.path.join(HERE, "..", "interop", "data", "msgr2-ceph-s.pcap")
OUT = os.path.join(HERE, "corpus", "mon")
# The offline decoder of the reference lab reads the pcap's TCP streams.
sys.path.insert(0, os.environ.get("SIPHON_CEPH_LAB", "/work/shared/reference/ceph-lab"))
import msgr2_decode  # noqa: E402

# message type -> fuzz_mon selector (see fuzz_mon.cc)
SELECTOR = {4: 1, 2: 2, 15: 3, 20: 4, 50: 5, 51: 6}
NAMES = {4: "mon_map", 2: "ping", 15: "mon_subscribe", 20: "get_version_reply",
         50: "mon_command", 51: "mon_command_ack"}


def frames(buf):
    """rev1 crc-mode frames after the banner: (tag, [segments])."""
    off = 10 + struct.unpack_from("<H", buf, 8)[0]
    while off + 32 <= len(buf):
        tag, nseg = buf[off], buf[off + 1]
        lens = [struct.unpack_from("<IH", buf, off + 2 + 6 * i)[0] for i in range(4)]
        off += 32
        segs = []
        for i in range(nseg):
            segs.append(buf[off:off + lens[i]])
            off += lens[i]
            if i == 0:
                off += 4  # crc of segment 0 (rev1)
        if nseg > 1:
            off += 13  # rev1 epilogue
        yield tag, segs + [b""] * (4 - len(segs))


def main():
    os.makedirs(OUT, exist_ok=True)
    written = 0
    seen = set()

    def write(name, blob):
        nonlocal written
        if blob in seen or len(blob) > 4096:  # duplicates; the 70 KiB status reply
            return
        seen.add(blob)
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(blob)
        written += 1
    conns = msgr2_decode.streams(PCAP, 3310)
    for ci, dirs in enumerate(conns.values()):
        for dirn, buf in dirs.items():
            if not buf.startswith(b"ceph v2\n"):
                continue
            for fi, (tag, segs) in enumerate(frames(buf)):
                if tag != 17:  # MESSAGE
                    continue
                mtype = struct.unpack_from("<H", segs[0], 16)[0]
                version = struct.unpack_from("<H", segs[0], 20)[0]
                if mtype not in SELECTOR:
                    continue
                front, data = segs[1], segs[3]
                name = f"{NAMES[mtype]}_c{ci}_{dirn}_{fi}"
                # fuzz_mon hands MMonCommand(Ack) the last quarter as data:
                # keep the seed's front whole when there is no data.
                body = front + data
                write(name, bytes([SELECTOR[mtype], version]) + body)
                if mtype == 4:  # the MonMap blob itself: u32 length + map
                    (n,) = struct.unpack_from("<I", front, 0)
                    write(f"monmap_v9_c{ci}_{fi}", b"\x00" + front[4:4 + n])
    print(f"wrote {written} seeds to {OUT}")


if __name__ == "__main__":
    main()
