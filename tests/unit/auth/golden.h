// Golden values from shared/reference/cephx.md §12 (the lab capture
// reference/ceph-lab/cephx-known-key.pcap, keys known).
#pragma once

#include <string>
#include <string_view>

#include "msgr/auth/crypto.h"

namespace siphon::auth::golden {

inline Bytes unhex(std::string_view h) {
  Bytes out;
  std::string digits;
  for (const char c : h)
    if (c != ' ' && c != '\n') digits += c;
  for (std::size_t i = 0; i + 1 < digits.size(); i += 2)
    out.push_back(static_cast<std::uint8_t>(std::stoul(digits.substr(i, 2), nullptr, 16)));
  return out;
}

inline const Bytes kAdminSecret = unhex("00112233445566778899aabbccddeeff");
inline constexpr std::string_view kAdminBase64 = "AQAA8VNlAAAAABAAABEiM0RVZneImaq7zN3u/w==";
inline constexpr std::uint64_t kServerChallenge = 0xd5151602625f0f48ull;
inline constexpr std::uint64_t kClientChallenge = 0x1cd2479cef6e6998ull;

// Connection A (§12.2): everything each side sent before AUTH_SIGNATURE.
inline const Bytes kClientSent = unhex(
    "636570682076320a100001000000000000000000000000000000010124000000"
    "080000000000000000000000000000000000000000003fbd6b06080101011c00"
    "000002000000000000001000000002000d497f00000100000000000000008d61"
    "483d02012a000000080000000000000000000000000000000000000000003918"
    "c66002000000020000000200000001000000160000000a080000000500000061"
    "646d696e00000000000000008a3c912e05012800000008000000000000000000"
    "000000000000000000000000b83ac75b2400000000010398696eef9c47d21cfd"
    "fb76da1ee78a1901000000000000000000000000200000006c4a5ff3");
inline const Bytes kServerSent = unhex(
    "636570682076320a100001000000000000000000000000000000010124000000"
    "080000000000000000000000000000000000000000003fbd6b06010101011c00"
    "00000200000000000000100000000200e9b47f000001000000000000000075c0"
    "47d204010d000000080000000000000000000000000000000000000000006a09"
    "4bc50900000001480f5f62021615d59a59e1e106012201000008000000000000"
    "0000000000000000000000000000001f44e4a51c100000000000000200000012"
    "010000000100000000010100000020000000013000000021b5893a7456b127f3"
    "f3aab56cdaa02a2fe547807a7eb4c883e9c586f3c641533e3c5b0393fe6bafdb"
    "d58c80b3ff4e33006d00000001020000000000000060000000c15ccdf8d03a47"
    "05ca254c9dd30f7385497ee869f60feb21f6631b8997a5c20d5c92eaf4c6ae94"
    "53ddb826e41e1e93c5a8bd72715ea2059a698256a978a32a464519bb14e8d299"
    "d17e8d894971db1932b8e12076967989cfdd6798d3017781df54000000500000"
    "003def0a01e29475a768ee0bb0fe85f246968b1fa9b5426f371c945e8e1a0fff"
    "5c427c4032936efafee357acb8634350a70bcca303540eb2325514a5cb2125a3"
    "f238e92b85945175aebe2c0a770d01ea5600000000fd96fe14");
inline const Bytes kSessionKey = unhex("7d3321d8050a4a0cb679314eed660b91");
inline const Bytes kConnectionSecret = unhex(
    "1d9bc3882434a7e7d856f3ec0f5f36228ef31decffb7aae48a230f6e8c004dcfee6f132b1d375cf7"
    "e41d55b3d8bde8d471401bada460e49f3354bc5e0e5d4e9f");
inline const Bytes kClientSignature = unhex("38e5ee569ce12ed2ebe6e35103e4e21deae436acc5b885532e0c46e430e8f999");
inline const Bytes kServerSignature = unhex("8fa7b059c0892b619b890d9aeca10da4e4320cd3556e84b333a44cbcf81e43a8");
// Byte offsets of the frames in kServerSent: banner 26, HELLO 72, AUTH_REPLY_MORE 49, AUTH_DONE 326.
inline constexpr std::size_t kAuthDoneOffset = 26 + 72 + 49;
inline constexpr std::size_t kAuthDonePayloadOffset = kAuthDoneOffset + 32 + 8 + 4 + 4;  // preamble, gid, mode, len
inline constexpr std::size_t kAuthDonePayloadSize = 274;

}  // namespace siphon::auth::golden
