#include "msgr/auth/crypto.h"

#include "msgr/auth/aes256k.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/params.h>
#include <openssl/rand.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <memory>

#include <fmt/format.h>

namespace siphon::auth {
namespace {

constexpr std::uint8_t kCephIv[16] = {'c', 'e', 'p', 'h', 's', 'a', 'g', 'e',
                                      'y', 'u', 'd', 'a', 'g', 'r', 'e', 'g'};
constexpr std::size_t kBlock = 16;

struct CtxFree {
  void operator()(EVP_CIPHER_CTX* c) const noexcept { EVP_CIPHER_CTX_free(c); }
};
using Ctx = std::unique_ptr<EVP_CIPHER_CTX, CtxFree>;

void put_u32(Bytes& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}
void put_u64(Bytes& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}
std::uint64_t get_u64(const std::uint8_t* p) noexcept {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// One CBC pass with padding done here, not by OpenSSL, so the padding rules
// are the ones cephx.md §2.1 states.
bool cbc(bool enc, ByteView secret, ByteView in, Bytes& out, std::string& why) {
  if (secret.size() < kAesKeySize) {
    why = fmt::format("AES key has {} bytes, needs at least {}", secret.size(), kAesKeySize);
    return false;
  }
  Ctx ctx(EVP_CIPHER_CTX_new());
  if (!ctx || EVP_CipherInit_ex(ctx.get(), EVP_aes_128_cbc(), nullptr, secret.data(), kCephIv, enc ? 1 : 0) != 1 ||
      EVP_CIPHER_CTX_set_padding(ctx.get(), 0) != 1) {
    why = "OpenSSL could not set up AES-128-CBC";
    return false;
  }
  out.resize(in.size() + kBlock);
  int n = 0;
  int fin = 0;
  if (EVP_CipherUpdate(ctx.get(), out.data(), &n, in.data(), static_cast<int>(in.size())) != 1 ||
      EVP_CipherFinal_ex(ctx.get(), out.data() + n, &fin) != 1) {
    why = "OpenSSL AES-128-CBC failed";
    return false;
  }
  out.resize(static_cast<std::size_t>(n + fin));
  return true;
}

}  // namespace

// --- keys -------------------------------------------------------------------------

Bytes CryptoKey::encode() const {
  Bytes out;
  out.push_back(static_cast<std::uint8_t>(type));
  out.push_back(static_cast<std::uint8_t>(type >> 8));
  put_u32(out, created_sec);
  put_u32(out, created_nsec);
  out.push_back(static_cast<std::uint8_t>(secret.size()));
  out.push_back(static_cast<std::uint8_t>(secret.size() >> 8));
  out.insert(out.end(), secret.begin(), secret.end());
  return out;
}

bool CryptoKey::decode(ByteView in, std::size_t& pos, CryptoKey& out, std::string& why) {
  if (in.size() < pos + 12) {
    why = "key truncated";
    return false;
  }
  const std::uint8_t* p = in.data() + pos;
  out.type = static_cast<std::uint16_t>(p[0] | p[1] << 8);
  out.created_sec = static_cast<std::uint32_t>(p[2] | p[3] << 8 | p[4] << 16 | static_cast<std::uint32_t>(p[5]) << 24);
  out.created_nsec = static_cast<std::uint32_t>(p[6] | p[7] << 8 | p[8] << 16 | static_cast<std::uint32_t>(p[9]) << 24);
  const std::size_t len = static_cast<std::size_t>(p[10] | p[11] << 8);
  if (in.size() - pos - 12 < len) {
    why = fmt::format("key says {} secret bytes, {} remain", len, in.size() - pos - 12);
    return false;
  }
  out.secret.assign(p + 12, p + 12 + len);
  pos += 12 + len;
  return true;
}

std::string CryptoKey::to_base64() const { return base64_encode(encode()); }

std::optional<CryptoKey> CryptoKey::from_base64(std::string_view text, std::string& why) {
  auto raw = base64_decode(text);
  if (!raw) {
    why = "not valid base64";
    return std::nullopt;
  }
  CryptoKey k;
  std::size_t pos = 0;
  if (!decode(*raw, pos, k, why)) return std::nullopt;
  if (pos != raw->size()) {
    why = fmt::format("{} bytes after the key", raw->size() - pos);
    return std::nullopt;
  }
  if (k.type == kCryptoAes) {
    if (k.secret.size() < kAesKeySize) {
      why = fmt::format("AES secret has {} bytes, needs at least {}", k.secret.size(), kAesKeySize);
      return std::nullopt;
    }
  } else if (k.type == kCryptoAes256k) {
    // Ceph 19.2.6+ / 20.2.4+ (CryptoAES256KRB5::validate_secret: 32 or more).
    if (k.secret.size() < kAes256kKeySize) {
      why = fmt::format("aes256k secret has {} bytes, needs at least {}", k.secret.size(), kAes256kKeySize);
      return std::nullopt;
    }
  } else {
    why = fmt::format("key type {} is neither AES (1) nor aes256k (2)", k.type);
    return std::nullopt;
  }
  return k;
}

std::string base64_encode(ByteView in) {
  std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), in.data(), static_cast<int>(in.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

std::optional<Bytes> base64_decode(std::string_view text) {
  if (text.empty() || text.size() % 4 != 0) return std::nullopt;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const bool alnum = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    const bool pad_ok = c == '=' && i >= text.size() - 2 && (i == text.size() - 1 || text.back() == '=');
    if (!alnum && c != '+' && c != '/' && !pad_ok) return std::nullopt;
  }
  Bytes out(text.size() / 4 * 3);
  const int n = EVP_DecodeBlock(out.data(), reinterpret_cast<const unsigned char*>(text.data()),
                                static_cast<int>(text.size()));
  if (n < 0) return std::nullopt;
  std::size_t pad = 0;
  if (text.back() == '=') ++pad;
  if (text.size() >= 2 && text[text.size() - 2] == '=') ++pad;
  out.resize(static_cast<std::size_t>(n) - pad);
  return out;
}

std::string hex(ByteView in) {
  std::string out;
  out.reserve(in.size() * 2);
  for (const std::uint8_t b : in) out += fmt::format("{:02x}", b);
  return out;
}

// --- CBC and the envelope ----------------------------------------------------------

std::optional<Bytes> aes_cbc_encrypt(ByteView secret, ByteView plain, std::string& why) {
  Bytes padded(plain.begin(), plain.end());
  const std::size_t pad = kBlock - plain.size() % kBlock;  // always 1..16
  padded.insert(padded.end(), pad, static_cast<std::uint8_t>(pad));
  Bytes out;
  if (!cbc(true, secret, padded, out, why)) return std::nullopt;
  return out;
}

std::optional<Bytes> aes_cbc_decrypt(ByteView secret, ByteView cipher, std::string& why) {
  if (cipher.empty() || cipher.size() % kBlock != 0) {
    why = fmt::format("ciphertext of {} bytes is not a non-zero multiple of 16", cipher.size());
    return std::nullopt;
  }
  Bytes out;
  if (!cbc(false, secret, cipher, out, why)) return std::nullopt;
  const std::uint8_t pad = out.back();
  bool ok = pad >= 1 && pad <= kBlock;
  for (std::size_t i = 0; ok && i < pad; ++i) ok = out[out.size() - 1 - i] == pad;
  if (!ok) {
    why = "bad padding (wrong key?)";
    return std::nullopt;
  }
  out.resize(out.size() - pad);
  return out;
}

std::optional<Bytes> seal(ByteView secret, ByteView body, std::string& why) {
  Bytes plain;
  plain.reserve(9 + body.size());
  plain.push_back(1);
  put_u64(plain, kAuthEncMagic);
  plain.insert(plain.end(), body.begin(), body.end());
  return aes_cbc_encrypt(secret, plain, why);
}

std::optional<Bytes> open(ByteView secret, ByteView cipher, std::string& why) {
  auto plain = aes_cbc_decrypt(secret, cipher, why);
  if (!plain) return std::nullopt;
  if (plain->size() < 9 || (*plain)[0] != 1 || get_u64(plain->data() + 1) != kAuthEncMagic) {
    why = "bad magic in decrypted envelope (wrong key?)";
    return std::nullopt;
  }
  plain->erase(plain->begin(), plain->begin() + 9);
  return plain;
}

std::optional<Bytes> seal_with_length(ByteView secret, ByteView body, std::string& why) {
  auto ct = seal(secret, body, why);
  if (!ct) return std::nullopt;
  Bytes out;
  put_u32(out, static_cast<std::uint32_t>(ct->size()));
  out.insert(out.end(), ct->begin(), ct->end());
  return out;
}

std::string key_type_name(std::uint16_t type) {
  if (type == kCryptoAes) return "aes";
  if (type == kCryptoAes256k) return "aes256k";
  return fmt::format("type {}", type);
}

namespace {

Bytes envelope(ByteView body) {
  Bytes plain;
  plain.reserve(9 + body.size());
  plain.push_back(1);
  put_u64(plain, kAuthEncMagic);
  plain.insert(plain.end(), body.begin(), body.end());
  return plain;
}

std::optional<Aes256kKeys> derive_for(KeyRef key, std::uint32_t usage, std::string& why) {
  auto k = aes256k_derive(key.secret, usage, why);
  if (!k) why = "aes256k key: " + why;
  return k;
}

}  // namespace

std::optional<Bytes> seal(KeyRef key, std::uint32_t usage, ByteView body, std::string& why) {
  if (key.type == kCryptoAes) return seal(key.secret, body, why);
  if (key.type != kCryptoAes256k) {
    why = fmt::format("cannot encrypt with a key of {}", key_type_name(key.type));
    return std::nullopt;
  }
  auto k = derive_for(key, usage, why);
  if (!k) return std::nullopt;
  return aes256k_seal(*k, envelope(body), {}, why);
}

std::optional<Bytes> open(KeyRef key, std::uint32_t usage, ByteView cipher, std::string& why) {
  if (key.type == kCryptoAes) return open(key.secret, cipher, why);
  if (key.type != kCryptoAes256k) {
    why = fmt::format("cannot decrypt with a key of {}", key_type_name(key.type));
    return std::nullopt;
  }
  auto k = derive_for(key, usage, why);
  if (!k) return std::nullopt;
  auto plain = aes256k_open(*k, cipher, why);
  if (!plain) return std::nullopt;
  if (plain->size() < 9 || (*plain)[0] != 1 || get_u64(plain->data() + 1) != kAuthEncMagic) {
    why = "bad magic in decrypted aes256k envelope";
    return std::nullopt;
  }
  plain->erase(plain->begin(), plain->begin() + 9);
  return plain;
}

std::optional<Bytes> seal_with_length(KeyRef key, std::uint32_t usage, ByteView body, std::string& why) {
  auto ct = seal(key, usage, body, why);
  if (!ct) return std::nullopt;
  Bytes out;
  put_u32(out, static_cast<std::uint32_t>(ct->size()));
  out.insert(out.end(), ct->begin(), ct->end());
  return out;
}

// --- HMAC ---------------------------------------------------------------------------------

Sha256 hmac_sha256(ByteView key, std::span<const ByteView> parts) {
  Sha256 out{};
  EVP_MAC* mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  EVP_MAC_CTX* ctx = mac ? EVP_MAC_CTX_new(mac) : nullptr;
  char digest[] = "SHA256";
  OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string("digest", digest, 0), OSSL_PARAM_construct_end()};
  std::size_t n = 0;
  bool ok = ctx && EVP_MAC_init(ctx, key.data(), key.size(), params) == 1;
  for (const ByteView p : parts)
    if (ok) ok = EVP_MAC_update(ctx, p.data(), p.size()) == 1;
  if (ok) ok = EVP_MAC_final(ctx, out.data(), &n, out.size()) == 1 && n == out.size();
  EVP_MAC_CTX_free(ctx);
  EVP_MAC_free(mac);
  // An OpenSSL failure here (no HMAC provider) leaves a zero MAC, which can
  // only fail the peer's verification: the connection faults, nothing else.
  if (!ok) out.fill(0);
  return out;
}

// --- GCM -----------------------------------------------------------------------------------

GcmStream::GcmStream(ByteView key16, ByteView nonce12, bool rev1) : rev1_(rev1) {
  std::memcpy(key_.data(), key16.data(), std::min(key16.size(), key_.size()));
  std::memcpy(nonce_.data(), nonce12.data(), std::min(nonce12.size(), nonce_.size()));
  initial_ = nonce_;
}

GcmStream::~GcmStream() = default;
GcmStream::GcmStream(GcmStream&&) noexcept = default;
GcmStream& GcmStream::operator=(GcmStream&&) noexcept = default;
GcmStream::GcmStream(const GcmStream& o)
    : key_(o.key_), nonce_(o.nonce_), initial_(o.initial_), rev1_(o.rev1_), exhausted_(o.exhausted_) {}
GcmStream& GcmStream::operator=(const GcmStream& o) {
  if (this == &o) return *this;
  ctx_.reset();
  dir_ = -1;
  key_ = o.key_;
  nonce_ = o.nonce_;
  initial_ = o.initial_;
  rev1_ = o.rev1_;
  exhausted_ = o.exhausted_;
  return *this;
}

void GcmStream::CtxFree::operator()(evp_cipher_ctx_st* c) const noexcept { EVP_CIPHER_CTX_free(c); }

bool GcmStream::begin(bool encrypt) noexcept {
  const int enc = encrypt ? 1 : 0;
  if (ctx_ && dir_ == enc) {
    // Same key and direction: only the nonce changes (GCM's state is reset
    // by a new IV).
    if (EVP_CipherInit_ex(ctx_.get(), nullptr, nullptr, nullptr, nonce_.data(), enc) == 1) return true;
    dir_ = -1;
    return false;
  }
  if (!ctx_) ctx_.reset(EVP_CIPHER_CTX_new());
  dir_ = -1;
  if (!ctx_ || EVP_CipherInit_ex(ctx_.get(), EVP_aes_128_gcm(), nullptr, nullptr, nullptr, enc) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx_.get(), EVP_CTRL_GCM_SET_IVLEN, kGcmNonceSize, nullptr) != 1 ||
      EVP_CipherInit_ex(ctx_.get(), nullptr, nullptr, key_.data(), nonce_.data(), enc) != 1)
    return false;
  dir_ = enc;
  return true;
}

void GcmStream::advance() noexcept {
  // rev1: the u64 counter at [4..11] + 1; rev0: the u32 fixed part at [0..3] + 1.
  const std::size_t from = rev1_ ? 4 : 0;
  const std::size_t to = rev1_ ? 12 : 4;
  for (std::size_t i = from; i < to; ++i)
    if (++nonce_[i] != 0) break;
  if (nonce_ == initial_) exhausted_ = true;
}

bool GcmStream::seal(ByteView plain, Bytes& out, std::string& why) {
  if (exhausted_) {
    why = "out of nonces: the connection must be re-established";
    return false;
  }
  const std::size_t at = out.size();
  out.resize(at + plain.size() + kGcmTagSize);
  int n = 0;
  int fin = 0;
  EVP_CIPHER_CTX* ctx = begin(true) ? ctx_.get() : nullptr;
  if (ctx == nullptr ||
      EVP_EncryptUpdate(ctx, out.data() + at, &n, plain.data(), static_cast<int>(plain.size())) != 1 ||
      EVP_EncryptFinal_ex(ctx, out.data() + at + n, &fin) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, kGcmTagSize, out.data() + at + plain.size()) != 1) {
    dir_ = -1;
    out.resize(at);
    why = "OpenSSL AES-128-GCM encryption failed";
    return false;
  }
  advance();
  return true;
}

bool GcmStream::open(ByteView cipher_and_tag, Bytes& out, std::string& why) {
  if (cipher_and_tag.size() < kGcmTagSize) {
    why = "secure-mode message shorter than its tag";
    return false;
  }
  const std::size_t len = cipher_and_tag.size() - kGcmTagSize;
  const std::size_t at = out.size();
  out.resize(at + len + kBlock);
  int n = 0;
  int fin = 0;
  Bytes tag(cipher_and_tag.begin() + static_cast<std::ptrdiff_t>(len), cipher_and_tag.end());
  EVP_CIPHER_CTX* ctx = begin(false) ? ctx_.get() : nullptr;
  const bool ok =
      ctx != nullptr &&
      EVP_DecryptUpdate(ctx, out.data() + at, &n, cipher_and_tag.data(), static_cast<int>(len)) == 1 &&
      EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, kGcmTagSize, tag.data()) == 1 &&
      EVP_DecryptFinal_ex(ctx, out.data() + at + n, &fin) == 1;
  if (!ok) {
    dir_ = -1;
    out.resize(at);
    why = "bad secure-mode authentication tag";
    return false;
  }
  out.resize(at + static_cast<std::size_t>(n + fin));
  advance();
  return true;
}

bool GcmStream::seal(std::span<const ByteView> parts, std::uint8_t* out, std::string& why) {
  if (exhausted_) {
    why = "out of nonces: the connection must be re-established";
    return false;
  }
  EVP_CIPHER_CTX* ctx = begin(true) ? ctx_.get() : nullptr;
  bool ok = ctx != nullptr;
  std::size_t at = 0;
  for (const ByteView& p : parts) {
    if (!ok) break;
    if (p.empty()) continue;
    int n = 0;
    ok = EVP_EncryptUpdate(ctx, out + at, &n, p.data(), static_cast<int>(p.size())) == 1;
    at += static_cast<std::size_t>(n);
  }
  int fin = 0;
  ok = ok && EVP_EncryptFinal_ex(ctx, out + at, &fin) == 1;
  at += static_cast<std::size_t>(fin);
  ok = ok && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, kGcmTagSize, out + at) == 1;
  if (!ok) {
    dir_ = -1;
    why = "OpenSSL AES-128-GCM encryption failed";
    return false;
  }
  advance();
  return true;
}

bool GcmStream::open(std::span<const ByteView> parts, ByteView tag, std::uint8_t* out, std::string& why) {
  if (tag.size() != kGcmTagSize) {
    why = "secure-mode message shorter than its tag";
    return false;
  }
  std::array<std::uint8_t, kGcmTagSize> t{};
  std::copy(tag.begin(), tag.end(), t.begin());
  EVP_CIPHER_CTX* ctx = begin(false) ? ctx_.get() : nullptr;
  bool ok = ctx != nullptr;
  std::size_t at = 0;
  for (const ByteView& p : parts) {
    if (!ok) break;
    if (p.empty()) continue;
    int n = 0;
    ok = EVP_DecryptUpdate(ctx, out + at, &n, p.data(), static_cast<int>(p.size())) == 1;
    at += static_cast<std::size_t>(n);
  }
  // GCM has no padding: Final writes nothing, it only checks the tag.
  std::uint8_t scratch[kBlock];
  int fin = 0;
  ok = ok && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, kGcmTagSize, t.data()) == 1 &&
       EVP_DecryptFinal_ex(ctx, scratch, &fin) == 1;
  if (!ok) {
    dir_ = -1;
    why = "bad secure-mode authentication tag";
    return false;
  }
  advance();
  return true;
}

bool GcmStream::peek(ByteView cipher_prefix, std::uint8_t* out, std::string& why) const {
  Ctx ctx(EVP_CIPHER_CTX_new());
  int n = 0;
  // Decrypting without the tag and never calling Final: the keystream only.
  const bool ok =
      ctx && EVP_DecryptInit_ex(ctx.get(), EVP_aes_128_gcm(), nullptr, nullptr, nullptr) == 1 &&
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_IVLEN, kGcmNonceSize, nullptr) == 1 &&
      EVP_DecryptInit_ex(ctx.get(), nullptr, nullptr, key_.data(), nonce_.data()) == 1 &&
      EVP_DecryptUpdate(ctx.get(), out, &n, cipher_prefix.data(), static_cast<int>(cipher_prefix.size())) == 1 &&
      static_cast<std::size_t>(n) == cipher_prefix.size();
  if (!ok) why = "OpenSSL AES-128-GCM decryption failed";
  return ok;
}

void random_bytes(std::span<std::uint8_t> out) {
  if (RAND_bytes(out.data(), static_cast<int>(out.size())) != 1) {
    // OpenSSL's DRBG failing means the process has no entropy source at
    // all; there is no safe fallback for key material.
    throw std::runtime_error("OpenSSL RAND_bytes failed: no entropy source");
  }
}

std::uint64_t random_u64() {
  std::uint8_t b[8];
  random_bytes(b);
  return get_u64(b);
}

}  // namespace siphon::auth
