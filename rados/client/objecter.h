// Objecter: the part of librados that talks to OSDs (Ceph's Objecter), over
// a Siphon messenger, the MonClient and the client's OSDMap:
//
//   mon::MonClient mc(stack, mon_opts);  mc.connect(10s);
//   rados::Objecter obj(mc, stack, opts);
//   if (auto err = obj.start(10s); !err.empty()) ...
//   auto c = obj.submit(pool, "obj", {rados::OsdOp::writefull(bl)});
//   rados::OpResult r = c->wait();        // r.result: 0 or -errno
//
// The map: one osdmap subscription at start (the newest full map), then the
// maps OSDs push and the incrementals asked for when an op is laggy or has
// no up primary, applied in order (rados-client.md §1.2, §4.4).
//
// An op: placed (§2) on the current map, sent as MOSDOp v8 to the acting
// primary (one lossy session per OSD), completed by the MOSDOpReply that
// matches its tid and latest attempt. Success is only ever reported for a
// reply the OSD sent after committing (ONDISK); an early ack is not a commit.
// Paused, as Ceph's Objecter pauses it, while the map says so: a write while
// the cluster has pausewr (or the old full flag) or its pool is full (FULL,
// FULL_QUOTA), a read while pauserd. A paused op is not sent; the client
// asks the mon for newer maps and sends it once a map clears the flag (or
// op_timeout fails it, naming the flag).
// Resent (same tid, attempt + 1, RETRY flag) when a new map changes the op's
// PG, acting set or primary, when its session resets (the OSD drops a dead
// client's ops), and when the OSD lifts a backoff (MOSDBackoff) covering it.
// The OSD answers a resent write it already applied with the original result
// (its duplicate detection keys on (client.<gid>, tid), so the messenger is
// named by the global_id the mon assigned).
//
// An OSD drops a misdirected op without a word, so a placement error would
// hang: an op with no reply within op_timeout fails with -ETIMEDOUT and a
// message naming the PG, the OSD it was sent to and the map epoch.
//
// Bad input: a reply, backoff or map an OSD sends that does not decode closes
// that OSD's session (logged with the reason); its ops are resent on a new one.
//
// Auth: OSD sessions authenticate with ObjecterOptions::auth (auth none's
// authorizer today; cephx's authorizer plugs in there when the messenger's
// client handshake supports it towards OSDs).
//
// Threads: every method may be called from any thread. Completion callbacks
// run on the thread that completed the op and must not block on other ops:
// a messenger worker for a reply (MOSDOpReply and MOSDBackoff take the fast
// path, as in Ceph's Objecter: no hand-over to the dispatch thread per op),
// the dispatch thread when a map fails an op, or the Objecter's timer thread.
// A callback may submit the next op: it goes out from that worker at once.
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
#include "msgr/mon/mon_client.h"
#include "rados/client/osd_messages.h"
#include "rados/osdmap/osdmap.h"
#include "rados/osdmap/placement.h"

namespace siphon::rados {

// Ceph's errno text (cpp_strerror): "(2) No such file or directory".
std::string errno_text(int r);

struct ObjecterOptions {
  MessengerOptions messenger;
  // How OSD sessions authenticate (compat::client_auth(cfg)); the same
  // object a MonClient gets.
  ClientAuth auth;
  EntityName auth_name{proto::kEntityTypeClient, "admin"};
  // rados_osd_op_timeout: an op without a reply after this long fails with
  // -ETIMEDOUT (0: wait forever, librados's default; tools set a bound).
  std::chrono::nanoseconds op_timeout = std::chrono::seconds(30);
  // objecter_timeout: an op unanswered this long makes the client ask the
  // mon for a newer map (its target may have moved without our knowing).
  std::chrono::nanoseconds laggy_after = std::chrono::seconds(10);
  // The timer's period (timeouts, laggy ops, delayed resends).
  std::chrono::nanoseconds tick = std::chrono::milliseconds(100);
  // A session that reset or was refused is redialled after this delay,
  // doubling up to reconnect_max while it keeps failing.
  std::chrono::nanoseconds reconnect_delay = std::chrono::milliseconds(50);
  std::chrono::nanoseconds reconnect_max = std::chrono::seconds(1);
};

struct OpResult {
  int result = 0;             // 0 or a negative errno (the OSD's, or -ETIMEDOUT, -ENOENT, ...)
  std::string message;        // for an error: a sentence for a user
  std::vector<OsdOp> ops;     // the OSD's echo: rval and outdata per op
  std::uint64_t user_version = 0;
  std::uint32_t epoch = 0;    // the OSD's map epoch in its reply
  std::int32_t osd = -1;      // who answered (or was waited for)
  osdmap::PgId pg;
  int attempts = 0;           // sends of this op (1 = never resent)
};

// The completion of one op: waited for, or a callback given at submit.
class Completion {
 public:
  bool is_complete() const;
  OpResult wait() const;
  std::optional<OpResult> wait_for(std::chrono::nanoseconds timeout) const;

 private:
  friend class Objecter;
  void complete(OpResult r);
  mutable std::mutex m_;
  mutable std::condition_variable cv_;
  std::optional<OpResult> result_;
  std::function<void(const OpResult&)> callback_;
};
using CompletionRef = std::shared_ptr<Completion>;

struct ObjecterStats {
  std::uint64_t ops_sent = 0;       // MOSDOp messages sent (first sends and resends)
  std::uint64_t resends = 0;        // of which resends
  std::uint64_t map_epochs = 0;     // epochs applied
  std::uint64_t session_resets = 0; // OSD sessions that faulted or were refused
  std::uint64_t backoffs = 0;       // MOSDBackoff BLOCKs received
  std::uint64_t timeouts = 0;       // ops failed by op_timeout
  std::uint64_t decode_errors = 0;  // OSD messages that did not decode (session closed)
};

class Objecter final : private Dispatcher {
 public:
  // `mc` must be connected (its global_id names this client) and outlive
  // the Objecter; `stack` may be the one the MonClient runs on.
  Objecter(mon::MonClient& mc, std::shared_ptr<transport::Stack> stack, ObjecterOptions options);
  ~Objecter() override;
  Objecter(const Objecter&) = delete;
  Objecter& operator=(const Objecter&) = delete;

  // Starts the messenger and waits for the first OSDMap. Returns "" or why
  // not (no global_id, no map in time, a map that does not decode).
  std::string start(std::chrono::nanoseconds timeout);
  // Fails the ops still in flight with -ESHUTDOWN and stops.
  void shutdown();

  // The pool's id, or -1 after asking the mon whether a newer map has it
  // (a pool just created) and waiting up to `timeout` for that map.
  std::int64_t lookup_pool(const std::string& name, std::chrono::nanoseconds timeout);
  std::uint32_t epoch() const;
  std::optional<osdmap::OsdMap> osdmap() const;

  // Sends `ops` on object `oid` of `pool` (namespace `nspace`). The ops
  // execute in order, atomically; a write op among them makes it a write.
  CompletionRef submit(std::int64_t pool, std::string oid, std::vector<OsdOp> ops,
                       std::string nspace = {}, std::function<void(const OpResult&)> callback = {});

  ObjecterStats stats() const;
  Messenger* messenger() { return msgr_.get(); }

 private:
  struct Op;
  struct Session;
  struct Done {
    CompletionRef completion;
    OpResult result;
  };

  bool ms_dispatch(MessageRef m) override;
  bool ms_can_fast_dispatch(const Message& m) const override;
  void ms_handle_connect(ConnectionRef con) override;
  bool ms_handle_reset(ConnectionRef con) override;
  bool ms_handle_refused(ConnectionRef con) override;

  void handle_map_message(const Message& m, const ConnectionRef& from);
  void handle_reply(const Message& m, std::vector<Done>& done);
  void handle_backoff(const Message& m);
  void close_session_locked(Session& s, const std::string& why, bool delay);
  void session_failed(const ConnectionRef& con, const std::string& why);
  void apply_maps_locked(const Message& m, const ConnectionRef& from, std::vector<Done>& done);
  void scan_ops_locked(std::vector<Done>& done);
  bool calc_target_locked(Op& op);
  void send_op_locked(Op& op, std::vector<Done>& done);
  Session* session_locked(std::int32_t osd);
  bool blocked_locked(const Session& s, const Op& op) const;
  const char* paused_by_locked(const Op& op) const;
  void finish_locked(std::uint64_t tid, OpResult r, std::vector<Done>& done);
  void want_map_locked(const char* why);
  void tick_loop();
  static void run(std::vector<Done>& done);

  // The mon client's handler reaches us through this, so shutdown() can
  // wait out a call in progress and then cut the link.
  struct MonLink {
    std::mutex m;
    Objecter* self = nullptr;
  };
  std::shared_ptr<MonLink> mon_link_ = std::make_shared<MonLink>();
  void on_mon_message(const Message& m);

  mon::MonClient& mc_;
  std::shared_ptr<transport::Stack> stack_;
  ObjecterOptions opts_;
  std::unique_ptr<Messenger> msgr_;

  mutable std::mutex mtx_;
  std::condition_variable cv_;
  bool started_ = false;
  bool stopping_ = false;
  std::optional<osdmap::OsdMap> map_;
  std::string map_error_;  // why the last map did not decode
  std::uint64_t last_tid_ = 0;
  std::map<std::uint64_t, std::unique_ptr<Op>> ops_;
  std::map<std::int32_t, std::unique_ptr<Session>> sessions_;
  std::chrono::steady_clock::time_point last_map_request_{};
  ObjecterStats stats_;
  std::thread ticker_;
};

}  // namespace siphon::rados
