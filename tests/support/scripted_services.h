// Handshake services whose "random" values are scripted, for tests that
// replay a capture: the captured challenges and nonces, in order (42 once
// they run out).
#pragma once

#include <cstdint>
#include <vector>

#include "msgr/session/handshake.h"

namespace siphon::test {

inline session::HandshakeServices scripted_services(std::vector<std::uint64_t>& randoms) {
  session::HandshakeServices s;
  s.next_global_seq = [](std::uint64_t a) { return a + 1; };
  s.random_cookie = [&randoms] {
    const std::uint64_t v = randoms.empty() ? 42 : randoms.front();
    if (!randoms.empty()) randoms.erase(randoms.begin());
    return v;
  };
  return s;
}

}  // namespace siphon::test
