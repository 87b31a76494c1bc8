// MessengerCore: the state a messenger's connections share. Connections hold
// it by shared_ptr, so a ConnectionRef stays safe to use after the Messenger
// object is gone.
//
// Locks (none on the per-message path unless a throttle is full):
//   table_mtx_   the session table (peer addresses -> connection) and the set
//                of live connections; taken at connect_to, accept, handshake
//                decisions, close.
//   ident_mtx_   our addresses (learned or bound).
//   waiters_mtx_ connections paused by a full throttle.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "msgr/api/dispatch_queue.h"
#include "msgr/api/messenger.h"
#include "msgr/api/messenger_perf.h"
#include "msgr/session/handshake.h"
#include "msgr/transport/transport.h"

namespace siphon::detail {

class ConnectionImpl;
using ConnectionImplRef = boost::intrusive_ptr<ConnectionImpl>;

// Orders addresses for the session table.
struct AddrKey {
  std::uint32_t type = 0;
  std::uint32_t nonce = 0;
  std::string sockaddr;
  static AddrKey of(const EntityAddr& a);
  static AddrKey of(const EntityAddrVec& v);
  friend auto operator<=>(const AddrKey&, const AddrKey&) = default;
};

// messages_sent/received are per messenger for MessengerStats; the perf
// counters count messages per worker (msgr_send_messages, ...), so these two
// are plain atomics. The rest also move the messenger's logger.
struct Counters {
  explicit Counters(perf::Logger& l) noexcept
      : messages_replayed(l, l_siphon_msgr_messages_replayed),
        duplicates_dropped(l, l_siphon_msgr_duplicates_dropped),
        faults(l, l_siphon_msgr_faults),
        reconnects(l, l_siphon_msgr_reconnects),
        sessions_reset(l, l_siphon_msgr_sessions_reset),
        protocol_errors(l, l_siphon_msgr_protocol_errors),
        crc_errors(l, l_siphon_msgr_crc_errors),
        session_migrations(l, l_siphon_msgr_session_migrations),
        connections_refused(l, l_siphon_msgr_connections_refused),
        send_queue_full(l, l_siphon_msgr_send_queue_full),
        auth_refused(l, l_siphon_msgr_auth_refused),
        auth_accepted(l, l_siphon_msgr_auth_accepted),
        decrypt_errors(l, l_siphon_msgr_decrypt_errors),
        fallback_switches(l, l_siphon_msgr_fallback_switches),
        primary_switches(l, l_siphon_msgr_primary_switches),
        idle_timeouts(l, l_siphon_msgr_idle_timeouts) {}
  std::atomic<std::uint64_t> messages_sent{0};
  std::atomic<std::uint64_t> messages_received{0};
  MessengerCounter messages_replayed;
  MessengerCounter duplicates_dropped;
  MessengerCounter faults;
  MessengerCounter reconnects;
  MessengerCounter sessions_reset;
  MessengerCounter protocol_errors;
  MessengerCounter crc_errors;
  MessengerCounter session_migrations;
  MessengerCounter connections_refused;
  MessengerCounter send_queue_full;
  MessengerCounter auth_refused;
  MessengerCounter auth_accepted;
  MessengerCounter decrypt_errors;
  MessengerCounter fallback_switches;
  MessengerCounter primary_switches;
  MessengerCounter idle_timeouts;
};

class MessengerCore : public std::enable_shared_from_this<MessengerCore> {
 public:
  MessengerCore(std::shared_ptr<transport::Stack> stack, entity_name_t name, MessengerOptions options,
                std::uint32_t nonce);
  ~MessengerCore();

  // --- fixed after start() ---
  std::shared_ptr<transport::Stack> stack;
  // Lossless sessions fail over to it (Messenger::set_fallback_stack); null: none.
  std::shared_ptr<transport::Stack> fallback;
  const entity_name_t name;
  const MessengerOptions options;
  const std::uint32_t nonce;
  EntityName auth_name;
  session::ClientAuth client_auth;
  session::ServerAuth server_auth;
  Policy default_policy = Policy::lossless_peer();
  std::map<std::uint8_t, Policy> policies;
  std::vector<Dispatcher*> dispatchers;
  std::shared_ptr<const MessageRegistry> registry;
  bool any_fast_dispatch = true;

  // `siphon-messenger-<entity>` (messenger_perf.h): in the process
  // collection from Messenger::start() until the Messenger is destroyed.
  const std::shared_ptr<perf::Logger> perf;
  Counters counters{*perf};
  std::atomic<bool> stopping{false};
  // Set by Messenger::start(): the configuration above is complete and
  // published to the workers (accept() and connect_to() check it).
  std::atomic<bool> started{false};
  DispatchQueue dispatch_queue;

  Policy policy_for(std::uint8_t peer_type) const;
  session::PolicyView policy_view(std::uint8_t peer_type) const;
  session::LocalIdentity local_identity() const;
  session::HandshakeServices services();

  EntityAddrVec my_addrs() const;
  void set_my_addrs(const EntityAddrVec& v);
  // Fills in our address from a peer's HELLO when we are not bound.
  void learned_addr(const EntityAddrVec& v);

  std::uint64_t next_global_seq(std::uint64_t at_least);
  std::uint64_t random_u64();

  // --- the session table ---
  ConnectionImplRef lookup(const AddrKey& k);
  // Registers `c` under `k` unless another live connection holds it;
  // returns the holder (== c on success).
  ConnectionImplRef register_session(const AddrKey& k, const ConnectionImplRef& c);
  void replace_session(const AddrKey& k, const ConnectionImplRef& c);
  void unregister_session(const AddrKey& k, const ConnectionImpl* c);
  // False (and not added) once shutdown has begun.
  bool add_live(const ConnectionImplRef& c);
  void remove_live(const ConnectionImpl* c);
  std::vector<ConnectionImplRef> live_connections();
  std::size_t live_count();
  void wait_all_closed();

  // --- throttles: a connection over budget waits here ---
  // Waiters are woken in the order they first began to wait: a connection
  // that is woken but finds the budget full again keeps its `ticket` (its
  // place in line); one that resumed and overfilled the budget comes back
  // with a new one (0 = none yet). Returns the ticket. Without this, a
  // connection with a backlog of frames (a flood) won every wake-up and a
  // well-behaved peer on the same throttle waited seconds per message.
  std::uint64_t add_waiter(const ConnectionImplRef& c, std::uint64_t ticket = 0);
  void wake_waiters();
  std::atomic<std::uint64_t> dispatch_bytes{0};
  std::atomic<bool> has_waiters{false};

  // ms_max_connections: a slot for one accepted transport connection, held
  // while that socket (or QP) is attached to a session; nullptr when the
  // limit is reached.
  std::shared_ptr<void> take_accept_slot();
  std::atomic<std::uint64_t> accepted_open{0};

  // Message budget for policy throttles, released when the message dies.
  static std::shared_ptr<void> take_budget(const std::shared_ptr<MessengerCore>& core,
                                           const Policy& p, std::uint64_t bytes, bool& over);

 private:
  mutable std::mutex ident_mtx_;
  EntityAddrVec my_addrs_;
  std::atomic<std::uint64_t> global_seq_{0};
  std::atomic<std::uint64_t> global_id_{0};
  std::mutex rng_mtx_;
  std::mt19937_64 rng_;

  std::mutex table_mtx_;
  std::condition_variable table_cv_;
  std::map<AddrKey, ConnectionImplRef> sessions_;
  std::set<ConnectionImplRef> live_;

  std::mutex waiters_mtx_;
  std::map<std::uint64_t, ConnectionImplRef> waiters_;  // by ticket
  std::uint64_t next_ticket_ = 1;
};

}  // namespace siphon::detail
