#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_proto_payloads from the golden payloads of
shared/reference/msgr2-wire.md (§4.6, §6, §10). Run from anywhere:

  tests/fuzz/make_proto_payload_seeds.py

The seeds are committed; rerun only when adding one."""
import os

MON_ADDR = ("01 01 01 1c 00 00 00 02 00 00 00 00 00 00 00 10 00 00 00 02 00 0c e4 7f 00 00 01"
            " 00 00 00 00 00 00 00 00")
V1_ADDR = ("01 01 01 1c 00 00 00 01 00 00 00 00 00 00 00 10 00 00 00 02 00 1a 85 7f 00 00 01"
           " 00 00 00 00 00 00 00 00")
V6_ADDR = ("01 01 01 28 00 00 00 02 00 00 00 4d 00 00 00 1c 00 00 00 0a 00 1a 90 00 00 00 00"
           " fe 80 00 00 00 00 00 00 00 00 00 00 00 01 00 02 00 00 00 00")
LEGACY_ADDR = "00 00 00 00 09 00 00 00 00 02 1a 85 7f 00 00 01" + " 00" * 120
CLIENT_ADDR = ("01 01 01 1c 00 00 00 03 00 00 00 78 56 34 12 10 00 00 00 02 00 00 00 7f 00 00 01"
               " 00 00 00 00 00 00 00 00")

SEEDS = {
    "hello_client": "08 " + MON_ADDR,
    "hello_mon": "01 01 01 01 1c 00 00 00 02 00 00 00 00 00 00 00 10 00 00 00 02 00 d7 dc"
                 " 7f 00 00 01 00 00 00 00 00 00 00 00",
    "auth_request": "01 00 00 00 01 00 00 00 01 00 00 00 16 00 00 00 0a 08 00 00 00 05 00 00 00"
                    " 61 64 6d 69 6e 00 00 00 00 00 00 00 00",
    "auth_bad_method": "02 00 00 00 a1 ff ff ff 01 00 00 00 01 00 00 00 02 00 00 00 02 00 00 00"
                       " 01 00 00 00",
    "auth_done": "04 10 00 00 00 00 00 00 01 00 00 00 00 00 00 00",
    "auth_signature": " 00" * 32,
    "auth_none_authorizer": "01 08 00 00 00 05 00 00 00 61 64 6d 69 6e 04 10 00 00 00 00 00 00",
    "client_ident": "02 01 00 00 00 " + CLIENT_ADDR + " " + MON_ADDR +
                    " 03 10 00 00 00 00 00 00 01 00 00 00 00 00 00 00 ff ff fd ff bd cf 01 3f"
                    " 00 00 00 00 00 00 00 00 01 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00",
    "server_ident": "02 01 00 00 00 01 01 01 1c 00 00 00 02 00 00 00 00 00 00 00 10 00 00 00"
                    " 02 00 33 f5 7f 00 00 01 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00"
                    " 04 00 00 00 00 00 00 00 ff ff fd ff bd cf 01 3f 00 00 04 02 00 02 01 0c"
                    " 01 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00",
    "session_reconnect": "02 02 00 00 00 " + MON_ADDR + " " + V1_ADDR +
                         " 01 00 00 00 00 00 00 00 02 00 00 00 00 00 00 00"
                         " 03 00 00 00 00 00 00 00 04 00 00 00 00 00 00 00"
                         " 05 00 00 00 00 00 00 00",
    "ident_missing_features": "00 00 04 02 00 02 01 0c",
    "keepalive2": "dc dc 0c 6b 00 00 00 00",
    "ack": "05 00 00 00 00 00 00 00",
    "session_reset": "01",
    "header2_get_version": "01 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 13 00 7f 00 01 00"
                           " 00 00 00 00 00 00 00 00 00 00 00 00 00 00 03 01 00 00 00",
    "header2_get_version_reply": "01 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 14 00 c4 00"
                                 " 02 00 00 00 00 00 00 00 01 00 00 00 00 00 00 00 03 02 00 00"
                                 " 00",
    "addr_mon": MON_ADDR,
    "addr_ipv6": V6_ADDR,
    "addr_legacy": LEGACY_ADDR,
    "addrvec_two": "02 02 00 00 00 " + MON_ADDR + " " + V1_ADDR,
    "entity_name": "08 00 00 00 05 00 00 00 61 64 6d 69 6e",
}


def main():
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "proto_payloads")
    os.makedirs(out, exist_ok=True)
    for name, hexstr in SEEDS.items():
        data = bytes.fromhex(hexstr.replace(" ", ""))
        with open(os.path.join(out, name + ".bin"), "wb") as f:
            f.write(data)
        print(f"{name}.bin {len(data)} bytes")


if __name__ == "__main__":
    main()
