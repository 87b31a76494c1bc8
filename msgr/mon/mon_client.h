// MonClient: a small client of Ceph monitors over a Siphon messenger (the
// part of Ceph's MonClient a command-line tool needs): it hunts for a mon,
// sends mon commands, version queries and subscriptions, and keeps the
// session alive with KEEPALIVE2.
//
//   MonClientOptions o;
//   o.mon_addrs = *proto::parse_mon_host("v2:127.0.0.1:3300");
//   MonClient mc(compat::create_tcp_stack(cfg), o);  // or transport::make_tcp_stack()
//   if (auto err = mc.connect(5s)) { print(err.message); }
//   CommandResult r = mc.command({R"({"prefix": "status"})"}, {}, 30s);
//
// Sessions: the mon connection is lossy (as Ceph's). When it resets (the mon
// restarted, the network failed, the mon dropped an idle session) the client
// reconnects on its own, to the next mon of the list, with a backoff, and
// then resends its subscriptions and every command and version query still
// waiting for an answer (as Ceph's MonClient does). A mon that does not
// answer KEEPALIVE2 within keepalive_timeout is abandoned the same way.
//
// Errors a caller can act on are classified (MonError::Kind): connection
// refused, timeout, the cluster requires cephx and we have no key, the key
// was refused, the address speaks msgr1 only, no msgr2 address given.
// Permanent ones (cephx, auth_failed, msgr1) end connect()
// at once instead of waiting for its timeout.
//
// The stack: the client runs its messenger on the stack its caller passes
// (the client does not choose a transport; compat/ builds stacks from the
// configuration). Monitors listen on TCP, so that is normally a TCP stack.
// The stack is started with the messenger and stopped by shutdown() unless
// another messenger still uses it.
//
// Threads: every method may be called from any thread; results are waited
// for on the caller's thread. Messages that are not for the client (config,
// mgrmap, ...) are logged and dropped.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "msgr/api/messenger.h"
#include "msgr/mon/messages.h"
#include "msgr/mon/monmap.h"

namespace siphon::mon {

struct MonClientOptions {
  // Monitors to try, in order (each one address vector, from mon_host).
  std::vector<EntityAddrVec> mon_addrs;
  // The messenger's options (ms_*). ms_keepalive_interval 0 is replaced by
  // keepalive_interval below.
  MessengerOptions messenger;
  // KEEPALIVE2 on an idle mon session (Ceph: mon_client_ping_interval).
  std::chrono::nanoseconds keepalive_interval = std::chrono::seconds(10);
  // No KEEPALIVE2_ACK for this long: the mon is dead, hunt for another one
  // (Ceph: mon_client_ping_timeout). 0: never.
  std::chrono::nanoseconds keepalive_timeout = std::chrono::seconds(30);
  // Reconnect delays: start here, double up to max.
  std::chrono::nanoseconds hunt_backoff = std::chrono::milliseconds(100);
  std::chrono::nanoseconds hunt_backoff_max = std::chrono::seconds(2);
  EntityName auth_name{proto::kEntityTypeClient, "admin"};
  // Auth methods, key and connection modes (default: auth none, crc);
  // compat::client_auth() builds it from the configuration and keyring.
  ClientAuth auth;
  // A daemon's rotating service keys (cephx.md §3.8, §8.2): when set, the
  // client fetches them with CEPHX_GET_ROTATING_KEY on its cephx session as
  // soon as it is READY and again whenever the store says so
  // (RotatingKeys::refresh_due), checking on every tick. The mon sends the
  // keys of our own entity type, sealed with our key (auth.secret).
  std::shared_ptr<session::RotatingKeys> rotating;
  std::string hostname;  // sent in MMonSubscribe (default: this host's name)
};

struct MonError {
  enum class Kind {
    none,
    no_msgr2_addr,     // every mon address is msgr1 (v1) only
    refused,           // TCP connection refused
    timed_out,         // nothing answered in time
    cephx_required,    // the mon requires cephx and we have no key (or cephx is not in our list)
    auth_failed,       // the mon refused our cephx key (wrong key) or its reply did not check
    msgr1_only,        // the peer answered with the msgr1 banner
    protocol,          // any other handshake or session failure
    shut_down,
  };
  Kind kind = Kind::none;
  std::string message;  // one line for a user
  explicit operator bool() const noexcept { return kind != Kind::none; }
};
std::string_view to_string(MonError::Kind k) noexcept;

struct CommandResult {
  int r = 0;            // the mon's return code (negative errno), or -ETIMEDOUT
  std::string rs;       // status string
  BufferList outbl;     // output
  MonError error;       // set when no ack arrived (r is then -ETIMEDOUT/-ENOTCONN)
};

struct VersionResult {
  std::uint64_t version = 0;
  std::uint64_t oldest_version = 0;
  MonError error;
};

class MonClient final : private Dispatcher {
 public:
  // Runs its messenger on `stack` (not null: throws std::invalid_argument).
  MonClient(std::shared_ptr<transport::Stack> stack, MonClientOptions options);
  ~MonClient() override;
  MonClient(const MonClient&) = delete;
  MonClient& operator=(const MonClient&) = delete;

  // Starts the messenger and hunts until a mon session is READY, a permanent
  // error occurs, or `timeout` passes. Later resets reconnect on their own.
  MonError connect(std::chrono::nanoseconds timeout);
  bool is_connected() const;

  // Sends a mon command (`cmd`: JSON documents, as Ceph's MMonCommand) and
  // waits for its ack. Resent after a reconnect while not answered.
  CommandResult command(std::vector<std::string> cmd, BufferList inbl,
                        std::chrono::nanoseconds timeout);
  // MMonGetVersion: the newest and oldest committed epochs of a map
  // ("osdmap", "monmap", "mdsmap", "fsmap").
  VersionResult get_version(const std::string& what, std::chrono::nanoseconds timeout);
  // Subscribes to a map (kept across reconnects unless kOneTime).
  void subscribe(const std::string& what, std::uint64_t start, std::uint8_t flags = 0);
  // The newest MonMap received with epoch >= min_epoch, waiting up to
  // `timeout` for it (subscribe to "monmap" first).
  std::optional<MonMap> wait_for_monmap(std::uint32_t min_epoch, std::chrono::nanoseconds timeout);
  // The newest MonMap received so far, if any.
  std::optional<MonMap> monmap() const;
  // Sends MPing and waits for the mon's JSON reply.
  std::optional<std::string> ping(std::chrono::nanoseconds timeout);
  // Raw messages of other types are handed here (on the dispatch thread)
  // before being dropped; for subscriptions this client does not decode.
  void set_other_message_handler(std::function<void(const Message&)> fn);

  void shutdown();

  // --- observability (tests, tools) ---
  // The current mon session's connection (null when not connected).
  ConnectionRef connection() const;
  // Sessions that ended (reset, refused, keepalive timeout) since start.
  std::uint64_t session_resets() const;
  // Sessions that reached READY since start.
  std::uint64_t sessions_opened() const;
  // The error that ended the last session attempt.
  MonError last_error() const;
  // Service ticket renewals the mon granted on this client's sessions.
  std::uint64_t ticket_renewals() const;
  // Rotating key fetches the mon answered with keys, and the reason the
  // last one failed ("" when none failed since the last success).
  std::uint64_t rotating_fetches() const;
  std::string rotating_error() const;
  // Waits until the rotating keys were fetched (true) or `timeout` passed.
  bool wait_for_rotating(std::chrono::nanoseconds timeout);
  Messenger* messenger() { return msgr_.get(); }
  // The global_id the mon assigned to this client's current session (0
  // when not connected): an OSD client's gid.
  std::uint64_t global_id() const;

 private:
  struct PendingCommand {
    std::vector<std::string> cmd;
    BufferList inbl;
    bool done = false;
    CommandResult result;
  };
  struct PendingVersion {
    std::string what;
    bool done = false;
    VersionResult result;
  };

  // Dispatcher
  bool ms_dispatch(MessageRef m) override;
  void ms_handle_connect(ConnectionRef con) override;
  bool ms_handle_reset(ConnectionRef con) override;
  bool ms_handle_refused(ConnectionRef con) override;
  void ms_handle_remote_reset(ConnectionRef con) override;

  void start_locked();
  void hunter_loop();
  void dial_locked();
  void session_ended_locked(const ConnectionRef& con, MonError why);
  void send_locked(MessageRef m);
  void resend_locked();
  MonError classify(const Connection::FaultInfo& f, const EntityAddrVec& addrs) const;
  template <class Pred>
  bool wait_until(std::unique_lock<std::mutex>& l, std::chrono::steady_clock::time_point deadline,
                  Pred pred);

  std::shared_ptr<transport::Stack> stack_;  // handed to msgr_ when it is created
  MonClientOptions opts_;
  std::vector<EntityAddrVec> targets_;  // msgr2 address of each usable mon
  std::unique_ptr<Messenger> msgr_;
  std::function<void(const Message&)> other_handler_;

  mutable std::mutex mtx_;
  std::condition_variable cv_;
  bool started_ = false;
  bool stopping_ = false;
  bool want_dial_ = false;
  std::chrono::steady_clock::time_point dial_at_{};
  std::chrono::nanoseconds backoff_{0};
  std::size_t next_target_ = 0;
  ConnectionRef con_;       // the attempt or session in progress
  bool connected_ = false;  // con_ is READY
  bool session_has_map_ = false;  // this session delivered a MonMap (fsid known)
  std::uint64_t connected_wall_ns_ = 0;
  std::chrono::steady_clock::time_point connected_at_{};
  std::uint64_t resets_ = 0;
  std::uint64_t opened_ = 0;
  // Service ticket renewal (cephx.md §3.8): the next time an MAuth may go
  // out (one at a time; retried if the mon does not answer), and how many
  // renewals the mon granted.
  std::chrono::steady_clock::time_point renew_not_before_{};
  std::uint64_t renewals_ = 0;
  void maybe_renew_tickets_locked(std::chrono::steady_clock::time_point now);
  void handle_auth_reply_locked(const MAuthReply& r);
  void maybe_fetch_rotating_locked(std::chrono::steady_clock::time_point now);
  void handle_rotating_reply_locked(const MAuthReply& r, const auth::Bytes& bl);
  std::uint64_t rotating_fetches_ = 0;
  std::string rotating_error_;
  MonError last_error_;
  bool fatal_ = false;      // last_error_ is permanent
  std::uint64_t last_tid_ = 0;
  std::map<std::uint64_t, PendingCommand> commands_;
  std::map<std::uint64_t, PendingVersion> versions_;
  std::map<std::string, MMonSubscribe::Item> subs_;
  std::optional<MonMap> monmap_;
  std::optional<std::string> pong_;
  std::thread hunter_;
};

}  // namespace siphon::mon
