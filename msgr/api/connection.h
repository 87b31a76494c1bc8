// Connection: a session with one peer (Ceph's Connection), refcounted.
//
// An outgoing connection is made by Messenger::connect_to(); an incoming one
// is first seen in Dispatcher::ms_handle_accept() or on a received message
// (Message::get_connection()). The object stays valid as long as it is
// referenced, even after the session ends or the messenger shuts down; then
// its calls are no-ops (send_message returns errc::not_connected).
//
// Threads: every method may be called from any thread. send_message() and
// send_keepalive() post to the connection's worker and never block.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <system_error>

#include <boost/smart_ptr/intrusive_ptr.hpp>
#include <boost/smart_ptr/intrusive_ref_counter.hpp>

#include "msgr/api/message.h"
#include "msgr/api/types.h"

namespace siphon {

class Connection : public boost::intrusive_ref_counter<Connection, boost::thread_safe_counter> {
 public:
  Connection() = default;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  virtual ~Connection() = default;

  // Queues `m` for the peer. Lossless policies deliver it exactly once and in
  // order across faults; lossy ones at most once. Errors: not_connected (marked down or reset);
  // queue_full (ms_max_queued_send_bytes_per_connection reached: not queued, the caller keeps m).
  virtual std::error_code send_message(MessageRef m) = 0;
  // Sends a KEEPALIVE2 once the session is READY (the peer answers with
  // KEEPALIVE2_ACK; see last_keepalive_ack()).
  virtual void send_keepalive() = 0;
  // Closes the connection and discards its session: queued and
  // unacknowledged messages are dropped. No reset callback is made for a
  // connection the application marked down. Idempotent.
  virtual void mark_down() = 0;

  // READY now (the handshake finished and no fault has happened since).
  virtual bool is_connected() const = 0;
  // Lossy policy.
  virtual bool is_lossy() const = 0;
  // The peer's addresses (from its SERVER_IDENT/CLIENT_IDENT; for an outgoing
  // connection before READY, the address dialled).
  virtual EntityAddrVec get_peer_addrs() const = 0;
  // CEPH_ENTITY_TYPE_* of the peer.
  virtual std::uint8_t get_peer_type() const = 0;
  // (peer type, peer gid) once identified; num -1 before.
  virtual entity_name_t get_peer_name() const = 0;
  // Negotiated CEPH_FEATURE_* mask (ours & the peer's); 0 before READY.
  virtual std::uint64_t get_features() const = 0;
  // The auth global_id of the session once READY (0 before): on a client's
  // connection to a monitor, the id the mon assigned us (our gid towards
  // OSDs, where it names us and keys the OSD's duplicate-op detection).
  virtual std::uint64_t get_global_id() const { return 0; }
  bool has_feature(std::uint64_t f) const { return (get_features() & f) == f; }
  // Wall time of the last KEEPALIVE2_ACK received (0 if none).
  virtual std::uint64_t last_keepalive_ack_ns() const = 0;
  // Why this connection last faulted (code empty: it never did). Recorded
  // before the ms_handle_refused/ms_handle_reset callbacks are queued, so a
  // dispatcher can tell "connection refused" from "the peer requires cephx"
  // (errc::auth_unsupported) or "the peer speaks msgr1" (errc::bad_banner).
  struct FaultInfo {
    std::error_code code;
    std::string reason;
  };
  virtual FaultInfo last_fault() const = 0;
  // How the current session authenticated (valid once READY; after a
  // reconnect, the newest transport connection's): the auth method (0 none,
  // 2 cephx), the connection mode (1 crc, 2 secure: AES-GCM), and on the
  // accepting side the entity the peer proved it is ("client.admin"), and,
  // when it presented a ticket from a monitor, the caps that monitor holds
  // for it on our service type ("allow *"; enforcing them is the
  // application's business, cephx.md §8.1).
  struct AuthInfo {
    std::uint32_t method = 0;
    std::uint32_t con_mode = 0;
    std::string name;
    std::uint64_t global_id = 0;
    std::string caps;
  };
  virtual AuthInfo auth_info() const { return {}; }

  // Application data attached to the connection (Ceph's priv).
  void set_priv(std::shared_ptr<void> p);
  std::shared_ptr<void> get_priv() const;

 private:
  std::shared_ptr<void> priv_;  // guarded by std::atomic_load/store
};

}  // namespace siphon
