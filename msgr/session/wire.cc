#include "msgr/session/wire.h"

#include <chrono>

namespace siphon::session {

proto::UTime stamp_now() noexcept {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
  return {static_cast<std::uint32_t>(ns / 1000000000), static_cast<std::uint32_t>(ns % 1000000000)};
}

int compare_for_race(const EntityAddr& a, const EntityAddr& b) noexcept {
  EntityAddr la = a;
  EntityAddr lb = b;
  la.type = AddrType::legacy;
  lb.type = AddrType::legacy;
  const auto c = la <=> lb;
  return c < 0 ? -1 : c > 0 ? 1 : 0;
}

}  // namespace siphon::session
