#include "msgr/auth/aes256k.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/params.h>

#include <algorithm>
#include <memory>
#include <span>

#include <fmt/format.h>

namespace siphon::auth {
namespace {

struct CipherFree {
  void operator()(EVP_CIPHER* c) const noexcept { EVP_CIPHER_free(c); }
};
struct CtxFree {
  void operator()(EVP_CIPHER_CTX* c) const noexcept { EVP_CIPHER_CTX_free(c); }
};

void put_be32(Bytes& out, std::uint32_t v) {
  for (int i = 3; i >= 0; --i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}

constexpr std::uint8_t kZeroIv[16] = {};

// HMAC-SHA384 over the zero IV and `data` (RFC 8009 §5: H = HMAC(Ki, IV | C)),
// truncated to 24 bytes.
std::array<std::uint8_t, kAes256kHmacSize> integrity(const Aes256kKeys& k, ByteView data) {
  std::array<std::uint8_t, 48> full{};
  EVP_MAC* mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  EVP_MAC_CTX* ctx = mac ? EVP_MAC_CTX_new(mac) : nullptr;
  char digest[] = "SHA384";
  const OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                               OSSL_PARAM_construct_end()};
  std::size_t out_len = 0;
  const bool ok = ctx && EVP_MAC_init(ctx, k.ki.data(), k.ki.size(), params) == 1 &&
                  EVP_MAC_update(ctx, kZeroIv, sizeof kZeroIv) == 1 &&
                  EVP_MAC_update(ctx, data.data(), data.size()) == 1 &&
                  EVP_MAC_final(ctx, full.data(), &out_len, full.size()) == 1;
  EVP_MAC_CTX_free(ctx);
  EVP_MAC_free(mac);
  // On an OpenSSL failure (none expected) the value stays zero: open()
  // then refuses every input, seal()'s output fails the peer's check.
  std::array<std::uint8_t, kAes256kHmacSize> h{};
  if (ok) std::copy_n(full.begin(), h.size(), h.begin());
  return h;
}

// One AES-256-CBC-CTS pass (CS3: the last two blocks always swapped, as
// Kerberos does), zero IV. `in` must hold at least one block.
bool cts(bool enc, const Aes256kKeys& k, ByteView in, Bytes& out, std::string& why) {
  std::unique_ptr<EVP_CIPHER, CipherFree> cipher(EVP_CIPHER_fetch(nullptr, "AES-256-CBC-CTS", nullptr));
  std::unique_ptr<EVP_CIPHER_CTX, CtxFree> ctx(EVP_CIPHER_CTX_new());
  char mode[] = "CS3";
  const OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_CIPHER_PARAM_CTS_MODE, mode, 0),
                               OSSL_PARAM_construct_end()};
  if (!cipher || !ctx || EVP_CipherInit_ex2(ctx.get(), cipher.get(), k.ke.data(), kZeroIv, enc ? 1 : 0, params) != 1) {
    why = "OpenSSL could not set up AES-256-CBC-CTS (OpenSSL 3's default provider has it)";
    return false;
  }
  out.resize(in.size() + 16);
  int n = 0;
  int fin = 0;
  if (EVP_CipherUpdate(ctx.get(), out.data(), &n, in.data(), static_cast<int>(in.size())) != 1 ||
      EVP_CipherFinal_ex(ctx.get(), out.data() + n, &fin) != 1) {
    why = "OpenSSL AES-256-CBC-CTS failed";
    return false;
  }
  out.resize(static_cast<std::size_t>(n + fin));
  return true;
}

}  // namespace

Bytes krb5_kdf_sha384(ByteView key, ByteView label, std::size_t bytes) {
  Bytes msg;
  put_be32(msg, 1);
  msg.insert(msg.end(), label.begin(), label.end());
  msg.push_back(0);
  put_be32(msg, static_cast<std::uint32_t>(bytes * 8));
  std::array<std::uint8_t, 48> full{};
  unsigned len = 0;
  HMAC(EVP_sha384(), key.data(), static_cast<int>(key.size()), msg.data(), msg.size(), full.data(), &len);
  return Bytes(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(std::min<std::size_t>(bytes, len)));
}

std::optional<Aes256kKeys> aes256k_derive(ByteView secret, std::uint32_t usage, std::string& why) {
  if (secret.size() < kAes256kKeySize) {
    why = fmt::format("aes256k secret has {} bytes, needs at least {}", secret.size(), kAes256kKeySize);
    return std::nullopt;
  }
  Aes256kKeys k;
  for (const auto& [type, dst] : {std::pair{std::uint8_t{0xAA}, std::span<std::uint8_t>(k.ke)},
                                  std::pair{std::uint8_t{0x55}, std::span<std::uint8_t>(k.ki)}}) {
    Bytes label;
    put_be32(label, usage);
    label.push_back(type);
    const Bytes out = krb5_kdf_sha384(secret, label, dst.size());
    std::copy(out.begin(), out.end(), dst.begin());
  }
  return k;
}

std::optional<Bytes> aes256k_seal(const Aes256kKeys& k, ByteView plain, ByteView confounder, std::string& why) {
  Bytes in(kAes256kConfounderSize);
  if (confounder.empty()) {
    random_bytes(in);
  } else if (confounder.size() == kAes256kConfounderSize) {
    std::copy(confounder.begin(), confounder.end(), in.begin());
  } else {
    why = fmt::format("aes256k confounder has {} bytes, needs {}", confounder.size(), kAes256kConfounderSize);
    return std::nullopt;
  }
  in.insert(in.end(), plain.begin(), plain.end());
  Bytes out;
  if (!cts(true, k, in, out, why)) return std::nullopt;
  const auto h = integrity(k, out);
  out.insert(out.end(), h.begin(), h.end());
  return out;
}

std::optional<Bytes> aes256k_open(const Aes256kKeys& k, ByteView sealed, std::string& why) {
  if (sealed.size() < kAes256kConfounderSize + kAes256kHmacSize) {
    why = fmt::format("aes256k ciphertext of {} bytes is shorter than confounder and HMAC ({})", sealed.size(),
                      kAes256kConfounderSize + kAes256kHmacSize);
    return std::nullopt;
  }
  const ByteView c = sealed.first(sealed.size() - kAes256kHmacSize);
  const auto h = integrity(k, c);
  if (CRYPTO_memcmp(h.data(), sealed.data() + c.size(), h.size()) != 0) {
    why = "aes256k integrity check failed (wrong key, wrong key usage or damaged ciphertext)";
    return std::nullopt;
  }
  Bytes plain;
  if (!cts(false, k, c, plain, why)) return std::nullopt;
  plain.erase(plain.begin(), plain.begin() + kAes256kConfounderSize);
  return plain;
}

}  // namespace siphon::auth
