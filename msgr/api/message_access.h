// The messenger's access to Message internals (receive-side context and the
// encode-once flag). Not part of the public API.
#pragma once

#include "msgr/api/connection.h"
#include "msgr/api/message.h"

namespace siphon {

class MessageAccess {
 public:
  static bool& encoded(Message& m) noexcept { return m.encoded_; }
  static void set_received(Message& m, ConnectionRef con, entity_name_t source,
                           std::chrono::steady_clock::time_point stamp) noexcept {
    m.connection_ = std::move(con);
    m.source_ = source;
    m.recv_stamp_ = stamp;
  }
  static std::chrono::steady_clock::time_point& send_stamp(Message& m) noexcept { return m.send_stamp_; }
  static void set_budget(Message& m, std::shared_ptr<void> b) noexcept { m.budget_ = std::move(b); }
};

}  // namespace siphon
