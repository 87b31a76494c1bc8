// Writes fuzz_cephx's aes256k seeds into corpus/cephx: an AUTH_DONE payload
// (the key-based exchange's, secure mode), an authorizer with a ticket
// minted under an aes256k service key, and a keyring holding a type-2 key,
// all under the key fuzz_cephx.cc calls kK256. The ciphertexts carry random
// confounders, so each run writes other bytes; the committed files are one
// run's. Not part of the build (the fuzz targets need clang); run it by hand:
//
//   g++ -std=c++20 -I. tests/fuzz/make_cephx_aes256k_seeds.cc \
//     build/debug/msgr/auth/libsiphon_auth.a -lfmt -lcrypto -o /tmp/seeds
//   /tmp/seeds tests/fuzz/corpus/cephx
#include <cstdio>
#include <fstream>
#include <string>

#include "msgr/auth/cephx.h"

using namespace siphon::auth;

namespace {

bool write(const std::string& path, ByteView b) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  return static_cast<bool>(f);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const CryptoKey k256{kCryptoAes256k, 1700000000, 0,
                       Bytes{0x6d, 0x40, 0x4d, 0x37, 0xfa, 0xf7, 0x9f, 0x9d, 0xf0, 0xd3, 0x35, 0x68, 0xd3, 0x20, 0x66, 0x98,
                             0x00, 0xeb, 0x48, 0x36, 0x47, 0x2e, 0xa8, 0xa0, 0x26, 0xd1, 0x6b, 0x71, 0x82, 0x46, 0x0c, 0x52}};
  std::string why;
  CryptoKey session{kCryptoAes256k, 1700000000, 0, Bytes(kAes256kKeySize)};
  random_bytes(session.secret);
  Bytes secret(kConnectionSecretSize);
  random_bytes(secret);
  const auto done = mon_auth_done_payload(k256, session, 259200, secret, why);

  TicketInfo t;
  t.entity_type = 8;
  t.entity_id = "bench";
  t.global_id = 4096;
  t.created_sec = 1700000000;
  t.expires_sec = 1700003600;
  t.caps = "allow *";
  t.session_key = session;
  const auto blob = mint_ticket_blob(k256, kLongTermSecretId, t, why);
  std::optional<Bytes> authorizer;
  if (blob) {
    ServiceTicket st;
    st.service_id = kServiceOsd;
    st.session_key = session;
    st.ticket_blob = *blob;
    authorizer = authorizer_payload(4096, st, 0x1234, std::nullopt, why);
  }
  if (!done || !authorizer) {
    std::fprintf(stderr, "%s\n", why.c_str());
    return 1;
  }
  const std::string keyring = "[client.bench]\n\tkey = " + k256.to_base64() + "\n";
  const bool ok = write(dir + "/auth_done_aes256k", *done) && write(dir + "/authorizer_aes256k", *authorizer) &&
                  write(dir + "/keyring_aes256k", view(keyring));
  return ok ? 0 : 1;
}
