#include "msgr/api/message.h"

#include "msgr/api/connection.h"
#include "msgr/api/policy.h"

namespace siphon {

Message::Message(std::uint16_t type, std::uint16_t version, std::uint16_t compat_version) noexcept {
  header_.type = type;
  header_.version = version;
  header_.compat_version = compat_version == 0 ? version : compat_version;
}

Message::~Message() = default;

void Message::encode_payload(std::uint64_t /*features*/) {}
void Message::decode_payload() {}
std::string_view Message::type_name() const noexcept { return "message"; }

MessageRef MessageRegistry::create(std::uint16_t type) const {
  const auto it = factories_.find(type);
  return it == factories_.end() ? MessageRef() : it->second();
}

void Connection::set_priv(std::shared_ptr<void> p) { std::atomic_store(&priv_, std::move(p)); }
std::shared_ptr<void> Connection::get_priv() const { return std::atomic_load(&priv_); }

bool Throttle::try_take(std::uint64_t n) noexcept {
  std::uint64_t cur = current_.load(std::memory_order_relaxed);
  for (;;) {
    if (cur != 0 && cur + n > max_) return false;
    if (current_.compare_exchange_weak(cur, cur + n, std::memory_order_acq_rel)) break;
  }
  std::uint64_t peak = peak_.load(std::memory_order_relaxed);
  while (cur + n > peak && !peak_.compare_exchange_weak(peak, cur + n, std::memory_order_relaxed)) {
  }
  return true;
}

bool Throttle::take(std::uint64_t n) noexcept {
  const std::uint64_t prev = current_.fetch_add(n, std::memory_order_acq_rel);
  std::uint64_t peak = peak_.load(std::memory_order_relaxed);
  while (prev + n > peak && !peak_.compare_exchange_weak(peak, prev + n, std::memory_order_relaxed)) {
  }
  return prev == 0 || prev + n <= max_;
}

void Throttle::put(std::uint64_t n) noexcept { current_.fetch_sub(n, std::memory_order_acq_rel); }

}  // namespace siphon
