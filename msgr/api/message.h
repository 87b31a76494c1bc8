// Message: the unit a Messenger carries (Ceph's Message), refcounted and
// shared between threads by MessageRef.
//
//   header    the ceph_msg_header2 fields an application sees (type, priority,
//             version, compat_version, tid, seq); seq is assigned by the
//             session when the message is first sent on a session, and is the
//             peer's seq on a received message.
//   front, middle, data
//             the three payload BufferLists (MESSAGE segments 1..3). A typed
//             subclass fills them in encode_payload() and reads them back in
//             decode_payload(); a generic Message just carries them.
//
// Ownership and threads: once passed to Connection::send_message() a message
// belongs to the messenger until it is acknowledged (lossless) or written
// (lossy); the sender must not modify it. A received message is handed to one
// dispatcher and is then the application's.
//
// Typed messages and the registry: a MessageRegistry maps a type number to a
// factory. On receipt the messenger asks the registry for an instance, checks
// that its version (the newest encoding it understands) is at least the
// sender's compat_version, moves the payloads in and calls decode_payload().
// A type the registry does not know is delivered as a plain Message (never a
// fault); a compat_version it cannot read, or a decode_payload() that throws,
// faults that connection (as Ceph does) and never the process.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string_view>
#include <unordered_map>

#include <boost/smart_ptr/intrusive_ptr.hpp>
#include <boost/smart_ptr/intrusive_ref_counter.hpp>

#include "msgr/api/types.h"
#include "msgr/base/buffer.h"

namespace siphon {

class Connection;
using ConnectionRef = boost::intrusive_ptr<Connection>;

// CEPH_MSG_PRIO_* (msgr2-wire.md §1.2).
namespace msg_priority {
inline constexpr std::uint16_t low = 64;
inline constexpr std::uint16_t normal = 127;  // CEPH_MSG_PRIO_DEFAULT
inline constexpr std::uint16_t high = 196;
inline constexpr std::uint16_t highest = 255;
}  // namespace msg_priority

// The application-visible fields of ceph_msg_header2 (msgr2-wire.md §9.1).
// ack_seq, flags and data_pre_padding_len belong to the session and are not
// exposed.
struct MessageHeader {
  std::uint64_t seq = 0;
  std::uint64_t tid = 0;
  std::uint16_t type = 0;
  std::uint16_t priority = msg_priority::normal;
  std::uint16_t version = 1;
  std::uint16_t compat_version = 1;
  std::uint16_t data_off = 0;
};

class Message : public boost::intrusive_ref_counter<Message, boost::thread_safe_counter> {
 public:
  // A generic message of `type`. compat_version 0 means "= version" (Ceph's
  // rule when a message class does not set one).
  explicit Message(std::uint16_t type = 0, std::uint16_t version = 1,
                   std::uint16_t compat_version = 0) noexcept;
  Message(const Message&) = delete;
  Message& operator=(const Message&) = delete;
  virtual ~Message();

  // --- header ---
  const MessageHeader& header() const noexcept { return header_; }
  MessageHeader& header() noexcept { return header_; }
  std::uint16_t get_type() const noexcept { return header_.type; }
  std::uint64_t get_tid() const noexcept { return header_.tid; }
  void set_tid(std::uint64_t tid) noexcept { header_.tid = tid; }
  std::uint64_t get_seq() const noexcept { return header_.seq; }
  std::uint16_t get_priority() const noexcept { return header_.priority; }
  void set_priority(std::uint16_t p) noexcept { header_.priority = p; }
  std::uint16_t get_version() const noexcept { return header_.version; }
  std::uint16_t get_compat_version() const noexcept { return header_.compat_version; }

  // --- payloads (MESSAGE segments 1, 2, 3) ---
  BufferList& front() noexcept { return front_; }
  const BufferList& front() const noexcept { return front_; }
  BufferList& middle() noexcept { return middle_; }
  const BufferList& middle() const noexcept { return middle_; }
  BufferList& data() noexcept { return data_; }
  const BufferList& data() const noexcept { return data_; }
  void set_data(BufferList bl) noexcept { data_ = std::move(bl); }
  std::size_t payload_length() const noexcept {
    return front_.length() + middle_.length() + data_.length();
  }

  // --- typed messages ---
  // Fills front/middle/data from the typed fields, using only encodings the
  // peer understands (`features` = the connection's negotiated features).
  // Called once, on the connection's worker, before the first transmission.
  virtual void encode_payload(std::uint64_t features);
  // Parses front/middle/data into the typed fields. Throws (any
  // std::exception) on malformed input; the messenger then faults the
  // connection. Called on the receiving worker.
  virtual void decode_payload();
  // A short name for logs ("ping", "osd_op", ...).
  virtual std::string_view type_name() const noexcept;

  // --- receive-side context (set by the messenger on received messages) ---
  // The connection it arrived on (null for a message never received).
  const ConnectionRef& get_connection() const noexcept { return connection_; }
  // The sender: (peer entity type, peer gid).
  entity_name_t get_source() const noexcept { return source_; }
  // When the whole frame had been read.
  std::chrono::steady_clock::time_point get_recv_stamp() const noexcept { return recv_stamp_; }

 private:
  friend class MessageAccess;  // the messenger's internals
  MessageHeader header_;
  BufferList front_;
  BufferList middle_;
  BufferList data_;
  bool encoded_ = false;  // encode_payload() already ran
  entity_name_t source_{};
  std::chrono::steady_clock::time_point recv_stamp_{};
  // send_message() time, for msgr_send_messages_queue_lat (zero once
  // measured, and when counters are compiled out).
  std::chrono::steady_clock::time_point send_stamp_{};
  ConnectionRef connection_;  // (ctor/dtor out of line: Connection is incomplete here)
  std::shared_ptr<void> budget_;               // throttle budget, released with the message
};

using MessageRef = boost::intrusive_ptr<Message>;

// Creates `M` with `new` (messages are refcounted, never on the stack).
template <typename M, typename... Args>
boost::intrusive_ptr<M> make_message(Args&&... args) {
  return boost::intrusive_ptr<M>(new M(std::forward<Args>(args)...));
}

// Type number -> factory for typed messages. Fill it before Messenger::start();
// it is read-only (and so thread-safe) afterwards.
class MessageRegistry {
 public:
  using Factory = MessageRef (*)();
  // Registers `factory` for `type`; a later add() for the same type replaces it.
  void add(std::uint16_t type, Factory factory) { factories_[type] = factory; }
  // Registers a default-constructible typed message that declares
  // `static constexpr std::uint16_t kType`.
  template <typename M>
  void add() {
    add(M::kType, []() -> MessageRef { return MessageRef(new M()); });
  }
  // A fresh typed instance, or null when `type` is not registered.
  MessageRef create(std::uint16_t type) const;
  bool contains(std::uint16_t type) const noexcept { return factories_.count(type) != 0; }

 private:
  std::unordered_map<std::uint16_t, Factory> factories_;
};

}  // namespace siphon
