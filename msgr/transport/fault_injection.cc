// The registry of running stacks' injection settings (fault_injection.h).
#include "msgr/transport/fault_injection.h"

#include <mutex>
#include <vector>

namespace siphon::transport {

namespace {

std::mutex g_mu;
std::vector<std::weak_ptr<LiveInjection>>& registry() {
  static std::vector<std::weak_ptr<LiveInjection>> r;
  return r;
}

}  // namespace

void register_live_injection(const std::shared_ptr<LiveInjection>& live) {
  std::lock_guard lk(g_mu);
  auto& r = registry();
  std::erase_if(r, [](const std::weak_ptr<LiveInjection>& w) { return w.expired(); });
  r.push_back(live);
}

void unregister_live_injection(const LiveInjection* live) {
  std::lock_guard lk(g_mu);
  std::erase_if(registry(), [&](const std::weak_ptr<LiveInjection>& w) {
    const auto l = w.lock();
    return !l || l.get() == live;
  });
}

std::size_t for_each_live_injection(const std::function<void(LiveInjection&)>& change) {
  std::lock_guard lk(g_mu);
  std::size_t n = 0;
  for (const auto& w : registry())
    if (const auto live = w.lock()) {
      change(*live);
      ++n;
    }
  return n;
}

}  // namespace siphon::transport
