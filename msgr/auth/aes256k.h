// Ceph's key type 2, "aes256k": aes256-cts-hmac-sha384-192 of RFC 8009
// (Kerberos), added by Ceph 19.2.6 / 20.2.4 after CVE-2025-30156.
//
//   derive   Ke (32 bytes) and Ki (24 bytes) from the entity's secret and
//            a key usage: KDF-HMAC-SHA2 of RFC 8009 §3, one HMAC-SHA384 of
//            00000001 | usage (u32 BE) | 0xAA or 0x55 | 00 | bits (u32 BE),
//            truncated. As in Ceph, all of the secret keys the HMAC
//            (Ceph accepts secrets of 32 bytes or more).
//   seal     C = AES-256-CBC-CTS (CS3, Kerberos's ciphertext stealing, zero
//            IV) of confounder | plaintext, then H = HMAC-SHA384(Ki,
//            zero IV | C) truncated to 24 bytes; the output is C | H, 40
//            bytes longer than the plaintext.
//   open     checks H (constant time) before decrypting, then drops the
//            confounder.
//
// Tested against RFC 8009's published vectors (Appendix A). cephx uses it
// through crypto.h's seal/open with a key usage per structure (cephx.h;
// which usage, and where the layout comes from: docs/security.md §5e).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "msgr/auth/crypto.h"

namespace siphon::auth {

inline constexpr std::uint16_t kCryptoAes256k = 2;
inline constexpr std::size_t kAes256kKeySize = 32;
inline constexpr std::size_t kAes256kConfounderSize = 16;
inline constexpr std::size_t kAes256kHmacSize = 24;

struct Aes256kKeys {
  std::array<std::uint8_t, 32> ke{};  // encryption key
  std::array<std::uint8_t, 24> ki{};  // integrity key
};

// RFC 8009 §3's KDF-HMAC-SHA2 with SHA-384 for outputs of up to 48 bytes:
// the first `bytes` bytes of HMAC-SHA384(key, 00000001 | label | 00 | bits).
Bytes krb5_kdf_sha384(ByteView key, ByteView label, std::size_t bytes);

// Ke and Ki for `usage`; nullopt (with why) for a secret under 32 bytes.
std::optional<Aes256kKeys> aes256k_derive(ByteView secret, std::uint32_t usage, std::string& why);

// confounder: 16 bytes, or empty for 16 random bytes (tests pass the RFC's).
std::optional<Bytes> aes256k_seal(const Aes256kKeys& k, ByteView plain, ByteView confounder, std::string& why);
// nullopt on a short input or a failed integrity check, with why.
std::optional<Bytes> aes256k_open(const Aes256kKeys& k, ByteView sealed, std::string& why);

}  // namespace siphon::auth
