// The cryptography cephx and msgr2 secure mode use (shared/reference/cephx.md
// §1-§2, §6), over OpenSSL: no cipher is written here.
//
//   CryptoKey        Ceph's key encoding (u16 type, utime created, u16 len,
//                    secret) and its base64 form in keyrings ("AQ...").
//   aes_cbc_*        Ceph's AES "cipher": AES-128-CBC, fixed IV
//                    "cephsageyudagreg", PKCS#7 padding always added.
//   envelope         u8 1 | u64 AUTH_ENC_MAGIC | T, then AES: the wrapper of
//                    every encrypted cephx structure, raw (enc_bl) or with a
//                    u32 length in front (encode_encrypt).
//   KeyRef           a key's type and secret: the envelope dispatches on
//                    the type (AES, or aes256k with a key usage per cephx
//                    structure, aes256k.h).
//   hmac_sha256      AUTH_SIGNATURE.
//   GcmStream        one direction of a secure-mode connection: AES-128-GCM,
//                    16-byte tag, no AAD, the nonce advancing per message.
//
// Nothing here throws on bad input: decryption failures come back as an
// empty optional with a reason.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

struct evp_cipher_ctx_st;  // OpenSSL's EVP_CIPHER_CTX

namespace siphon::auth {

using Bytes = std::vector<std::uint8_t>;
using ByteView = std::span<const std::uint8_t>;

inline ByteView view(std::string_view s) noexcept {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

// --- keys -----------------------------------------------------------------------

inline constexpr std::uint16_t kCryptoNone = 0;
inline constexpr std::uint16_t kCryptoAes = 1;
inline constexpr std::size_t kAesKeySize = 16;

struct CryptoKey {
  std::uint16_t type = kCryptoAes;
  std::uint32_t created_sec = 0;
  std::uint32_t created_nsec = 0;
  Bytes secret;

  bool empty() const noexcept { return secret.empty(); }
  // The 28-byte encoding of a 16-byte key (no struct header).
  Bytes encode() const;
  // Decodes `in` starting at `pos` (advanced past the key); false with `why`.
  static bool decode(ByteView in, std::size_t& pos, CryptoKey& out, std::string& why);
  // Keyring form: base64 of encode(). from_base64 accepts Ceph's keys only:
  // type AES (1) with at least 16 secret bytes, or aes256k (2, Ceph 19.2.6 /
  // 20.2.4 and later) with at least 32.
  std::string to_base64() const;
  static std::optional<CryptoKey> from_base64(std::string_view text, std::string& why);
  friend bool operator==(const CryptoKey&, const CryptoKey&) = default;
};

// A key as the envelope needs it: its type and its secret (not owned). From
// a CryptoKey, or from bare secret bytes, which mean an AES key (every key
// of Ceph up to 19.2.5 / 20.2.3, and every key of the tests' golden
// vectors).
struct KeyRef {
  std::uint16_t type = kCryptoAes;
  ByteView secret;
  KeyRef(const CryptoKey& k) noexcept : type(k.type), secret(k.secret) {}  // NOLINT: implicit on purpose
  template <class R>
    requires std::is_convertible_v<const R&, ByteView>
  KeyRef(const R& secret_bytes) noexcept : secret(secret_bytes) {}  // NOLINT: implicit on purpose
  KeyRef(std::uint16_t t, ByteView s) noexcept : type(t), secret(s) {}
};

// The key usages cephx passes to aes256k's key derivation, one per
// structure (Ceph's CEPHX_KEY_USAGE_*, CephxProtocol.h; docs/security.md
// §5e). AES ignores them.
inline constexpr std::uint32_t kUsageNone = 0x00;                // plain CryptoKey::encrypt
inline constexpr std::uint32_t kUsageAuthConnectionSecret = 0x03;  // AUTH_DONE's connection secret
inline constexpr std::uint32_t kUsageTicketSessionKey = 0x04;      // CephXServiceTicket
inline constexpr std::uint32_t kUsageTicketBlob = 0x05;            // an AUTH ticket blob re-sealed (ticket_enc 1)
inline constexpr std::uint32_t kUsageAuthorize = 0x10;             // CephXAuthorize
inline constexpr std::uint32_t kUsageAuthorizeChallenge = 0x11;    // CephXAuthorizeChallenge
inline constexpr std::uint32_t kUsageAuthorizeReply = 0x12;        // CephXAuthorizeReply
inline constexpr std::uint32_t kUsageRotatingSecret = 0x20;        // RotatingSecrets
inline constexpr std::uint32_t kUsageTicketInfo = 0x30;            // CephXServiceTicketInfo (the ticket blob)

// The name of a key type for messages ("aes", "aes256k", "type 7").
std::string key_type_name(std::uint16_t type);

std::string base64_encode(ByteView in);
std::optional<Bytes> base64_decode(std::string_view text);  // strict, padding required
std::string hex(ByteView in);

// --- Ceph's AES-CBC and the envelope -------------------------------------------------

inline constexpr std::uint64_t kAuthEncMagic = 0xff009cad8826aa55ull;

// AES-128-CBC with Ceph's IV; the key is secret[0..15] (16 bytes needed).
std::optional<Bytes> aes_cbc_encrypt(ByteView secret, ByteView plain, std::string& why);
// Decrypts and strips the PKCS#7 padding (checked strictly: Ceph always
// writes correct padding).
std::optional<Bytes> aes_cbc_decrypt(ByteView secret, ByteView cipher, std::string& why);

// enc_bl: AES(01 | magic | body), no length prefix.
std::optional<Bytes> seal(ByteView secret, ByteView body, std::string& why);
// The inverse: decrypts, checks the version byte and the magic, returns body.
std::optional<Bytes> open(ByteView secret, ByteView cipher, std::string& why);
// encode_encrypt: u32 ct_len | seal(body).
std::optional<Bytes> seal_with_length(ByteView secret, ByteView body, std::string& why);

// The same three for a key of either type: AES as above (`usage` unused);
// aes256k seals 01 | magic | body with the keys derived for `usage`
// (aes256k.h: confounder, AES-256-CTS, HMAC-SHA384-192), and opens by
// checking the integrity tag, then the version byte and the magic. Any
// other type is refused with the reason.
std::optional<Bytes> seal(KeyRef key, std::uint32_t usage, ByteView body, std::string& why);
std::optional<Bytes> open(KeyRef key, std::uint32_t usage, ByteView cipher, std::string& why);
std::optional<Bytes> seal_with_length(KeyRef key, std::uint32_t usage, ByteView body, std::string& why);

// --- HMAC ----------------------------------------------------------------------------

using Sha256 = std::array<std::uint8_t, 32>;
// HMAC-SHA256 over the concatenation of `parts`, keyed with all of `key`.
Sha256 hmac_sha256(ByteView key, std::span<const ByteView> parts);
inline Sha256 hmac_sha256(ByteView key, ByteView data) { return hmac_sha256(key, std::span(&data, 1)); }

// --- AES-128-GCM for secure mode ----------------------------------------------------------

inline constexpr std::size_t kGcmTagSize = 16;
inline constexpr std::size_t kGcmNonceSize = 12;

// One direction of a secure connection (cephx.md §6.1). The nonce is
// u32 fixed | u64 counter (LE); after each message rev1 adds 1 to the
// counter, rev0 to the fixed part. Encrypting refuses once the nonce would
// come back to its initial value ("out of nonces").
//
// The OpenSSL context is made and keyed once, on the first message, and
// only re-initialised with the next nonce per message: setting it up per
// message (fetching the cipher, expanding the key, the GHASH table) cost
// about as much as encrypting 8 KiB (docs/performance.md, issue 15 item 7).
// A copy starts with no context and makes its own.
class GcmStream {
 public:
  GcmStream(ByteView key16, ByteView nonce12, bool rev1);
  ~GcmStream();
  GcmStream(const GcmStream& o);
  GcmStream& operator=(const GcmStream& o);
  GcmStream(GcmStream&&) noexcept;
  GcmStream& operator=(GcmStream&&) noexcept;
  // `plain` -> ciphertext | tag, appended to `out`.
  bool seal(ByteView plain, Bytes& out, std::string& why);
  // `cipher_and_tag` -> plaintext appended to `out`; false on a tag failure.
  bool open(ByteView cipher_and_tag, Bytes& out, std::string& why);
  // Scatter/gather forms for secure frames: the plaintext in `parts`
  // -> ciphertext | tag at `out` (sum of parts + 16 bytes); and the
  // ciphertext in `parts` with its `tag` -> plaintext at `out`.
  bool seal(std::span<const ByteView> parts, std::uint8_t* out, std::string& why);
  bool open(std::span<const ByteView> parts, ByteView tag, std::uint8_t* out, std::string& why);
  // The first bytes of the next message's plaintext, from the first bytes
  // of its ciphertext, NOT authenticated and without taking the nonce
  // (GCM is counter mode: a prefix decrypts alone). Only for msgr2 rev0,
  // whose receiver needs the preamble's lengths before it can read the
  // whole message and check its tag (cephx.md §6.3); open() then checks
  // the tag over the same bytes.
  bool peek(ByteView cipher_prefix, std::uint8_t* out, std::string& why) const;
  std::array<std::uint8_t, kGcmNonceSize> nonce() const noexcept { return nonce_; }

 private:
  void advance() noexcept;
  // The context ready for the current nonce in this direction (keyed on
  // first use, or when the direction changes); false when OpenSSL fails.
  bool begin(bool encrypt) noexcept;
  struct CtxFree {
    void operator()(evp_cipher_ctx_st* c) const noexcept;
  };
  std::unique_ptr<evp_cipher_ctx_st, CtxFree> ctx_;
  int dir_ = -1;  // what ctx_ is keyed for: 1 encrypt, 0 decrypt, -1 nothing
  std::array<std::uint8_t, kAesKeySize> key_{};
  std::array<std::uint8_t, kGcmNonceSize> nonce_{};
  std::array<std::uint8_t, kGcmNonceSize> initial_{};
  bool rev1_;
  bool exhausted_ = false;
};

// Cryptographically random bytes (OpenSSL RAND_bytes).
void random_bytes(std::span<std::uint8_t> out);
std::uint64_t random_u64();

}  // namespace siphon::auth
