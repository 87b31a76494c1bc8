// Messenger: one endpoint of the msgr2 protocol (Ceph's Messenger): it binds
// and accepts, connects to peers, runs the sessions and dispatches messages.
//
//   auto stack = compat::create_stack(cfg, compat::Purpose::public_network);
//                                   // or any transport::Stack, e.g. in a test
//                                   // transport::make_tcp_stack(tcp_opts)
//   auto msgr = siphon::Messenger::create(stack, {entity_type::osd, 0}, opts);
//   msgr->set_default_policy(Policy::lossless_peer());
//   msgr->add_dispatcher_tail(&my_dispatcher);
//   msgr->bind(addrs);                             // servers
//   msgr->start();
//   auto con = msgr->connect_to(entity_type::osd, peer_addrs);
//   con->send_message(m);
//   ...
//   msgr->shutdown();
//   msgr->wait();
//
// Lifecycle: configure (policies, dispatchers, registry, bind) -> start() ->
// run -> shutdown() -> wait() -> destroy. shutdown() closes every connection
// (without reset callbacks) and stops the dispatch thread after the messages
// already queued for dispatch; wait() returns when everything has stopped.
// The stack is started by start() if it is not running; wait() stops it
// when no other messenger still uses it (messengers may share a stack).
// The messenger never builds a stack: which one, with which options, is the
// composition root's choice (compat/factory.h), and the transport's own
// settings (threads, water marks, TCP or RDMA options) live in the stack.
//
// Threads: every method may be called from any thread (configuration methods
// before start()). See dispatcher.h for the callback threads.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <system_error>

#include "msgr/api/connection.h"
#include "msgr/api/dispatcher.h"
#include "msgr/api/message.h"
#include "msgr/api/introspect.h"
#include "msgr/api/options.h"
#include "msgr/api/policy.h"
#include "msgr/api/types.h"
#include "msgr/session/client_auth.h"

namespace siphon {

using ClientAuth = session::ClientAuth;
using ServerAuth = session::ServerAuth;

namespace transport {
class Stack;
}

// Counters of one messenger (monotonic, readable from any thread).
struct MessengerStats {
  std::uint64_t messages_sent = 0;        // MESSAGE frames written (replays included)
  std::uint64_t messages_received = 0;    // messages accepted and dispatched
  std::uint64_t messages_replayed = 0;    // MESSAGE frames re-sent after a reconnect
  std::uint64_t duplicates_dropped = 0;   // received with seq <= in_seq (ignored)
  std::uint64_t faults = 0;               // connection faults (any cause)
  std::uint64_t reconnects = 0;           // SESSION_RECONNECT accepted (either side)
  std::uint64_t sessions_reset = 0;       // sessions discarded by SESSION_RESET / resetcheck
  std::uint64_t protocol_errors = 0;      // faults caused by malformed or out-of-state input
  std::uint64_t crc_errors = 0;           // faults caused by a frame failing its CRC check (preamble,
                                          // segment or epilogue): damaged bytes never dispatched
  std::uint64_t session_migrations = 0;   // sessions moved to another worker with a peer's new socket
  std::uint64_t connections_refused = 0;  // accepted sockets closed at once: ms_max_connections reached
  std::uint64_t send_queue_full = 0;      // send_message() calls refused: ms_max_queued_send_bytes_per_connection
  std::uint64_t auth_refused = 0;         // peers' auth attempts refused or failed (wrong or unknown key,
                                          // no common method or mode, bad AUTH_SIGNATURE), either side
  std::uint64_t auth_accepted = 0;        // peers this accepting side authenticated with cephx (key proven,
                                          // AUTH_SIGNATURE checked)
  std::uint64_t decrypt_errors = 0;       // secure-mode frames whose GCM tag failed (connection faulted)
  std::uint64_t fallback_switches = 0;    // sessions that moved from the primary stack to the fallback one
  std::uint64_t primary_switches = 0;     // sessions that moved back from the fallback stack to the primary
  std::uint64_t idle_timeouts = 0;        // connections faulted by ms_connection_idle_timeout (no traffic)
  // Gauges (current values, not monotonic):
  std::uint64_t connections = 0;          // connections open or closing (sessions and handshakes)
  std::uint64_t undispatched_bytes = 0;   // received message bytes queued for dispatch (what
                                          // ms_dispatch_throttle_bytes bounds)
};

class Messenger {
 public:
  // Creates a messenger named `name` (its type is our entity type; num is the
  // gid sent in CLIENT_IDENT/SERVER_IDENT, -1 for "unknown") over `stack`.
  // `nonce` distinguishes this process instance in our addresses (nullopt:
  // a random non-zero one; monitors use 0).
  static std::unique_ptr<Messenger> create(std::shared_ptr<transport::Stack> stack,
                                           entity_name_t name, MessengerOptions options,
                                           std::optional<std::uint32_t> nonce = std::nullopt);
  Messenger(const Messenger&) = delete;
  Messenger& operator=(const Messenger&) = delete;
  virtual ~Messenger() = default;

  // --- configuration (before start()) ---
  virtual void set_default_policy(const Policy& p) = 0;
  virtual void set_policy(std::uint8_t peer_type, const Policy& p) = 0;
  virtual Policy get_policy(std::uint8_t peer_type) const = 0;
  // Typed messages to decode on receipt (default: none; everything is
  // delivered as a generic Message).
  virtual void set_message_registry(std::shared_ptr<const MessageRegistry> registry) = 0;
  // The auth identity sent in AUTH_REQUEST (auth "none"); default:
  // {name.type, "admin"} for clients, {name.type, to_string(name.num)} else.
  virtual void set_auth_name(const EntityName& name) = 0;
  // How connections this messenger dials authenticate (default: auth none,
  // crc). compat::client_auth() builds it from the configuration.
  virtual void set_client_auth(const ClientAuth& auth) = 0;
  // How connections this messenger accepts authenticate their peers
  // (default: auth none, crc). cephx here is the key-based exchange with
  // the entities of a keyring (docs/security.md).
  virtual void set_server_auth(const ServerAuth& auth) = 0;
  // A second stack (say async+posix beside an async+rdma primary) that
  // lossless sessions fail over to when the primary path to a peer keeps
  // failing, and move back from when it works again (docs/rdma-transport.md,
  // Failover; MessengerOptions::siphon_ms_fallback_*). With one, bind() also
  // listens on the fallback stack and advertises those addresses after the
  // primary ones. Default: none (every session stays on the one stack).
  // Call it before bind() and start(): later it is refused (logged).
  virtual void set_fallback_stack(std::shared_ptr<transport::Stack> stack) = 0;
  virtual void add_dispatcher_head(Dispatcher* d) = 0;
  virtual void add_dispatcher_tail(Dispatcher* d) = 0;
  // Listens on every address of `addrs` (port 0: a free port). Each address
  // is advertised as type MSGR2 with our nonce. With a fallback stack, each
  // address is listened on there too, on a free port, and advertised after
  // all the primary ones.
  virtual std::error_code bind(const EntityAddrVec& addrs) = 0;

  // --- running ---
  virtual void start() = 0;
  virtual void shutdown() = 0;
  virtual void wait() = 0;

  // The connection to `addrs` (the first address is dialled), creating it
  // if needed; lossless policies reuse the existing session to that peer.
  virtual ConnectionRef connect_to(std::uint8_t peer_type, const EntityAddrVec& addrs) = 0;
  // Marks down every connection (no reset callbacks).
  virtual void mark_down_all() = 0;
  // Marks down the connection(s) to `addrs`, if any.
  virtual void mark_down_addrs(const EntityAddrVec& addrs) = 0;

  // --- identity ---
  virtual entity_name_t get_myname() const = 0;
  // Bound addresses (after bind()), or the address peers see us as.
  virtual EntityAddrVec get_myaddrs() const = 0;
  virtual std::uint32_t get_nonce() const = 0;
  virtual const MessengerOptions& options() const = 0;
  virtual MessengerStats stats() const = 0;
  // A snapshot of the messenger and every live connection (for operators:
  // `messenger dump`). Each connection is copied on its worker; one whose
  // worker does not answer within `timeout` is listed with state "unknown"
  // and the fields readable from any thread. Blocks the caller up to
  // `timeout`; never call it from a worker.
  virtual MessengerInfo introspect(std::chrono::milliseconds timeout) const = 0;

 protected:
  Messenger() = default;
};

}  // namespace siphon
