#include "tools/bench/engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <unordered_map>
#include <vector>

#include "compat/admin.h"
#include "compat/factory.h"
#include "compat/keyring.h"
#include "msgr/base/error.h"
#include "msgr/transport/transport.h"
#include "tools/bench/auth.h"
#include "tools/bench/cpu.h"
#include "tools/bench/perf_delta.h"
#include "tools/bench/stack.h"
#include "tools/bench/bench_wire.h"

namespace siphon::bench {

std::string ms_type_origin(const RunSetup& s) {
  if (!s.ms_type_origin.empty()) return s.ms_type_origin;
  return s.cfg ? s.cfg->ms_type_choice().origin() : std::string("ms_type from default");
}

namespace {

std::atomic<bool> g_stop{false};

using SteadyClock = std::chrono::steady_clock;

std::uint64_t now_ns() noexcept {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(SteadyClock::now().time_since_epoch()).count());
}

SideCpu to_side(const CpuTimes& c) noexcept {
  return {static_cast<double>(c.user_ns) / 1e9, static_cast<double>(c.system_ns) / 1e9};
}

// Random bytes shared read-only by every payload. A payload of any size is a
// list of slices of this pool, so building one copies nothing.
class PayloadPool {
 public:
  static constexpr std::size_t kSize = 1u << 20;
  PayloadPool() {
    std::mt19937_64 rng(0x5eedbe7c4u);
    std::byte* p = pool_.append_uninitialized(kSize);
    for (std::size_t i = 0; i < kSize; i += 8) {
      const std::uint64_t v = rng();
      for (std::size_t j = 0; j < 8; ++j) p[i + j] = static_cast<std::byte>(v >> (8 * j));
    }
  }
  // `size` bytes starting at a position picked by `salt`.
  BufferList make(std::uint64_t size, std::uint64_t salt) const {
    BufferList bl;
    std::size_t off = static_cast<std::size_t>((salt * 4099u) % kSize);
    while (size > 0) {
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(size, kSize - off));
      bl.append(pool_.slice(off, n));
      size -= n;
      off = 0;
    }
    return bl;
  }

 private:
  BufferList pool_;
};

const PayloadPool& payload_pool() {
  static const PayloadPool pool;
  return pool;
}

std::uint32_t payload_crc(const BufferList& bl) noexcept { return bl.crc32c(0); }

// The test hook's damage: a private copy with one bit flipped in the middle.
BufferList damaged(const BufferList& src) {
  BufferList out;
  std::byte* p = out.append_uninitialized(src.length());
  src.copy_out(0, src.length(), p);
  p[src.length() / 2] ^= std::byte{0x01};
  return out;
}

std::optional<BenchHeader> read_header(const Message& m, BenchHeader::DecodeError& why) {
  if (m.front().length() < BenchHeader::kSize) {
    why = BenchHeader::DecodeError::short_buffer;
    return std::nullopt;
  }
  std::array<std::byte, BenchHeader::kSize> b{};
  m.front().copy_out(0, b.size(), b.data());
  return BenchHeader::decode(b, &why);
}

MessageRef make_bench_message(std::uint16_t type, const BenchHeader& h, BufferList data) {
  MessageRef m = make_message<Message>(type);
  m->set_tid(h.seq);
  const auto enc = h.encode();
  // Exactly 48 bytes: append() would take a ~4 KiB chunk for them, a
  // malloc and free of 4 KiB per message that is the benchmark's, not the
  // messenger's.
  m->front() = BufferList::copy_of(enc.data(), enc.size());
  m->set_data(std::move(data));
  return m;
}

void spin_us(std::uint32_t us) noexcept {
  if (us == 0) return;
  const auto until = SteadyClock::now() + std::chrono::microseconds(us);
  while (SteadyClock::now() < until) {
  }
}


// ---------------------------------------------------------------------------
// The server: answers each request as its header says. Stateless apart from
// the per-connection CPU snapshot between ctl_start and ctl_stop.

class BenchServer final : public Dispatcher {
 public:
  BenchServer(bool fast, std::function<CpuTimes()> cpu) : fast_(fast), cpu_(std::move(cpu)) {}

  bool ms_can_fast_dispatch(const Message& m) const override {
    return fast_ && m.get_type() == kMsgRequest;
  }
  void ms_fast_dispatch(MessageRef m) override { handle(std::move(m)); }
  bool ms_dispatch(MessageRef m) override {
    if (m->get_type() != kMsgRequest) return false;
    handle(std::move(m));
    return true;
  }
  void ms_handle_accept(ConnectionRef con) override {
    accepts_.fetch_add(1);
    // The first sessions' negotiated auth, for the server's report.
    std::lock_guard l(mu_);
    if (con && sessions_.size() < kMaxSessions) sessions_.push_back(session_auth(con->auth_info()));
  }
  bool ms_handle_reset(ConnectionRef) override { return true; }

  std::vector<SessionAuth> sessions() const {
    std::lock_guard l(mu_);
    return sessions_;
  }
  std::uint64_t served() const noexcept { return served_.load(); }
  std::uint64_t bytes() const noexcept { return bytes_in_.load() + bytes_out_.load(); }
  std::uint64_t bad_requests() const noexcept { return bad_.load(); }
  std::uint64_t runs_done() const noexcept { return runs_done_.load(); }
  std::uint64_t accepts() const noexcept { return accepts_.load(); }
  // The op the server saw most (for the server's own report).
  Pattern main_pattern() const noexcept {
    const std::uint64_t e = by_op_[0].load(), s = by_op_[1].load(), o = by_op_[2].load();
    if (s > e && s >= o) return Pattern::sink;
    if (o > e && o > s) return Pattern::source;
    return Pattern::echo;
  }

 private:
  void handle(MessageRef m) {
    BenchHeader::DecodeError why{};
    const auto h = read_header(*m, why);
    const ConnectionRef con = m->get_connection();
    if (!h || !con) {
      if (bad_.fetch_add(1) == 0)
        fmt::print(stderr, "siphon-bench server: dropping a request: {}\n", to_string(why));
      return;
    }
    BenchHeader r = *h;
    BufferList data;
    const std::uint64_t in = m->data().length();
    switch (h->op) {
      case Op::echo:
        spin_us(h->think_us);
        data = std::move(m->data());
        break;
      case Op::sink:
        spin_us(h->think_us);
        if ((h->flags & flag::verify) != 0 &&
            (m->data().length() != h->payload_len || payload_crc(m->data()) != h->payload_crc))
          r.flags |= flag::payload_bad;
        break;
      case Op::source:
        spin_us(h->think_us);
        data = payload_pool().make(h->reply_size, h->seq * 131u + h->conn_id);
        r.payload_len = h->reply_size;
        r.payload_crc = (h->flags & flag::verify) != 0 ? payload_crc(data) : 0;
        if ((h->flags & flag::corrupt_reply) != 0 && !data.empty()) data = damaged(data);
        break;
      case Op::ctl_start: {
        std::lock_guard l(mu_);
        windows_[con.get()] = {con, cpu_()};
        break;
      }
      case Op::ctl_stop: {
        CpuTimes start{};
        {
          std::lock_guard l(mu_);
          if (auto it = windows_.find(con.get()); it != windows_.end()) {
            start = it->second.second;
            windows_.erase(it);
          }
        }
        const CpuTimes d = cpu_() - start;
        const auto enc = ServerStats{d.user_ns, d.system_ns}.encode();
        data.append(enc.data(), enc.size());
        break;
      }
      case Op::ctl_done:
        runs_done_.fetch_add(1);
        break;
    }
    if (h->op == Op::echo || h->op == Op::sink || h->op == Op::source) {
      served_.fetch_add(1, std::memory_order_relaxed);
      by_op_[static_cast<int>(h->op) - 1].fetch_add(1, std::memory_order_relaxed);
      bytes_in_.fetch_add(in, std::memory_order_relaxed);
      bytes_out_.fetch_add(data.length(), std::memory_order_relaxed);
    }
    con->send_message(make_bench_message(kMsgReply, r, std::move(data)));
  }

  const bool fast_;
  const std::function<CpuTimes()> cpu_;
  std::atomic<std::uint64_t> served_{0}, bytes_in_{0}, bytes_out_{0}, bad_{0}, runs_done_{0}, accepts_{0};
  std::array<std::atomic<std::uint64_t>, 3> by_op_{};
  mutable std::mutex mu_;
  std::unordered_map<const Connection*, std::pair<ConnectionRef, CpuTimes>> windows_;
  static constexpr std::size_t kMaxSessions = 1024;
  std::vector<SessionAuth> sessions_;  // mu_
};

// A server messenger on its own stack (loopback and server mode).
struct ServerSide {
  std::shared_ptr<transport::Stack> stack;
  std::shared_ptr<transport::Stack> fallback;  // siphon_ms_fallback_type (none: null)
  std::unique_ptr<BenchServer> logic;
  std::unique_ptr<Messenger> msgr;
  std::string auth;  // compat::describe() of its ServerAuth

  ~ServerSide() { stop(); }
  void stop() {
    if (!msgr) return;
    msgr->shutdown();
    msgr->wait();
    msgr.reset();
  }
};

// siphon_ms_fallback_type: the stack `msgr` fails over to, made on first use
// and then shared by the side's messengers like its primary stack.
bool attach_fallback(const RunSetup& s, Messenger& msgr, std::shared_ptr<transport::Stack>& fallback,
                     std::string& error) {
  try {
    if (!fallback) fallback = compat::create_fallback_stack(*s.cfg, s.ms_type);
  } catch (const SetupError& e) {
    error = fmt::format("cannot create the fallback stack: {}", e.what());
    return false;
  }
  if (fallback) msgr.set_fallback_stack(fallback);
  return true;
}

// --soft-link-down AT:FOR (test hook): the software fabric's links of this
// process are pulled AT seconds into the run and plugged back FOR seconds
// later; always plugged back when the run ends.
class LinkCutter {
 public:
  LinkCutter(double at, double len, std::function<void(const std::string&)> info) {
    if (at < 0) return;
    thread_ = std::thread([this, at, len, info = std::move(info)] {
      if (!sleep(at)) return;
      const std::size_t n = compat::set_soft_link_down(true);
      if (info) info(fmt::format("--soft-link-down: {} software fabric link(s) pulled for {} s", n, len));
      down_ = true;
      if (!sleep(len)) return;
      compat::set_soft_link_down(false);
      down_ = false;
      if (info) info("--soft-link-down: links plugged back in");
    });
  }
  ~LinkCutter() {
    if (!thread_.joinable()) return;
    {
      std::lock_guard l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
    if (down_) compat::set_soft_link_down(false);
  }

 private:
  bool sleep(double s) {
    std::unique_lock l(mu_);
    return !cv_.wait_for(l, std::chrono::duration<double>(s), [this] { return stop_; });
  }
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::atomic<bool> down_{false};
  std::thread thread_;
};

// Creates, binds and starts a server. On failure returns false with `error`
// (and `unavailable` when the stack cannot be created).
bool start_server(const RunSetup& s, const std::string& bind_text, std::optional<std::uint32_t> nonce,
                  std::function<CpuTimes()> cpu, ServerSide& out, std::string& error, bool& unavailable) {
  const auto addr = parse_bind(bind_text, error);
  if (!addr) return false;
  out.stack = create_run_stack(s, error, unavailable);
  if (!out.stack) return false;
  out.logic = std::make_unique<BenchServer>(!s.args.queue_dispatch, std::move(cpu));
  out.msgr = Messenger::create(out.stack, {entity_type::osd, 0}, s.options, nonce);
  if (!attach_fallback(s, *out.msgr, out.fallback, error)) {
    out.msgr.reset();
    return false;
  }
  out.msgr->set_policy(entity_type::client, s.args.lossy ? Policy::stateless_server() : Policy::stateful_server());
  out.msgr->add_dispatcher_tail(out.logic.get());
  try {
    const ServerAuth sa = bench_server_auth(*s.cfg);
    out.auth = compat::describe(sa);
    out.msgr->set_server_auth(sa);
  } catch (const SetupError& e) {
    error = e.what();
    out.msgr.reset();
    return false;
  }
  EntityAddr a = *addr;
  a.nonce = 0;
  try {
    if (auto ec = out.msgr->bind(EntityAddrVec(a))) {
      error = fmt::format("cannot listen on {}: {}", bind_text, ec.message());
      out.msgr.reset();
      return false;
    }
    out.msgr->start();
  } catch (const std::exception& e) {
    error = fmt::format("cannot start the server on {}: {}", bind_text, e.what());
    out.msgr.reset();
    return false;
  }
  return true;
}

// ---------------------------------------------------------------------------
// The client: one messenger per connection on one shared stack, load
// threads, and the measured window.

class BenchClient;

struct ClientConn {
  unsigned id = 0;
  std::unique_ptr<Dispatcher> dispatcher;
  std::unique_ptr<Messenger> msgr;
  ConnectionRef con;
  std::atomic<bool> ready{false};
  std::atomic<bool> dead{false};  // a lossy reset ended it
  std::atomic<std::uint64_t> completed{0};
  std::atomic<std::uint64_t> bytes{0};
  std::mutex mu;
  SeqTracker tracker;       // mu
  std::mt19937_64 rng;      // mu
  unsigned inflight = 0;    // mu
  std::uint64_t budget = 0;  // mu: requests left to send
  VerifyCounts verify;      // mu
};

class BenchClient {
 public:
  // `cpu`: this side's CPU time; `peer_stats`: the server's messenger
  // counters when it shares the process (else empty).
  BenchClient(const RunSetup& s, EntityAddrVec target, std::function<CpuTimes()> cpu,
              std::function<MessengerStats()> peer_stats = {}, const transport::Stack* peer_stack = nullptr)
      : s_(s), a_(s.args), target_(std::move(target)), cpu_(std::move(cpu)), peer_stats_(std::move(peer_stats)),
        peer_stack_(peer_stack) {}
  ~BenchClient() { stop(); }

  // Creates the stack and messengers and waits until every connection is READY.
  bool connect(std::string& error, bool& unavailable);
  // What each connection negotiated (after connect).
  const std::vector<SessionAuth>& sessions() const noexcept { return sessions_; }
  Result run();
  void stop();
  // The client's stack (shared by its messengers).
  const std::shared_ptr<transport::Stack>& stack() const noexcept { return stack_; }
  std::map<std::string, std::uint64_t> counters() const {
    return stack_ ? stack_counters(*stack_) : std::map<std::string, std::uint64_t>{};
  }

  // --- dispatcher callbacks (per connection) ---
  void on_message(ClientConn& c, MessageRef m);
  void on_connect(ClientConn& c) {
    c.ready.store(true);
    std::lock_guard l(mu_);
    cv_.notify_all();
  }
  void on_refused() {
    std::lock_guard l(mu_);
    last_event_ = "connection refused";
  }
  void on_reset(ClientConn& c, bool remote) {
    errors_.fetch_add(1);
    if (!remote) c.dead.store(true);
    std::lock_guard l(mu_);
    last_event_ = remote ? "the server reset the session (restarted?)" : "connection reset";
    cv_.notify_all();
  }

 private:
  struct Totals {
    std::uint64_t completed = 0, bytes = 0;
  };
  Totals totals() const {
    Totals t;
    for (const auto& c : conns_) {
      t.completed += c->completed.load(std::memory_order_relaxed);
      t.bytes += c->bytes.load(std::memory_order_relaxed);
    }
    return t;
  }
  // Faults, reconnects and CRC rejections of every messenger in this process.
  struct FaultTotals {
    std::uint64_t faults = 0, reconnects = 0, crc_errors = 0, fallback_switches = 0, primary_switches = 0;
  };
  FaultTotals faults() const {
    FaultTotals t;
    auto add = [&](const MessengerStats& st) {
      t.faults += st.faults;
      t.reconnects += st.reconnects;
      t.crc_errors += st.crc_errors;
      t.fallback_switches += st.fallback_switches;
      t.primary_switches += st.primary_switches;
    };
    for (const auto& c : conns_)
      if (c->msgr) add(c->msgr->stats());
    if (peer_stats_) add(peer_stats_());
    return t;
  }
  Op request_op() const noexcept {
    return a_.pattern == Pattern::echo ? Op::echo : a_.pattern == Pattern::sink ? Op::sink : Op::source;
  }
  void send_locked(ClientConn& c, std::uint64_t scheduled_ns);
  void load_thread(unsigned t, std::uint64_t start_ns);
  // Records what each READY connection negotiated; false (with `error`)
  // when one did not get the mode setup.require_con_mode asks for.
  bool check_sessions(std::string& error);
  void send_ctl(Op op);
  bool wait_ctl(Op op, double seconds, ServerStats* stats);
  std::uint64_t outstanding() {
    std::uint64_t n = 0;
    for (auto& c : conns_) {
      std::lock_guard l(c->mu);
      n += c->tracker.outstanding();
    }
    return n;
  }
  bool all_sent_and_answered() {
    for (auto& c : conns_) {
      if (c->dead.load()) continue;
      std::lock_guard l(c->mu);
      if (c->inflight != 0 || c->budget != 0) return false;
    }
    return true;
  }
  // Waits until `tp`, a stop request, or (until_done) every request answered;
  // returns true in the last case.
  bool wait_until(SteadyClock::time_point tp, bool until_done);
  void progress(double elapsed, double rate, double mib) {
    if (!s_.progress) return;
    unsigned inflight = 0;
    for (auto& c : conns_) {
      std::lock_guard l(c->mu);
      inflight += c->inflight;
    }
    s_.progress(fmt::format("{:6.1f} s {:>12.0f} msgs/s {:>10.1f} MiB/s {:>7} in flight", elapsed, rate, mib, inflight));
  }

  const RunSetup& s_;
  const BenchArgs& a_;
  EntityAddrVec target_;
  std::function<CpuTimes()> cpu_;
  std::function<MessengerStats()> peer_stats_;
  const transport::Stack* peer_stack_ = nullptr;  // loopback: the server's stack
  std::shared_ptr<transport::Stack> stack_;
  std::shared_ptr<transport::Stack> fallback_;  // siphon_ms_fallback_type (none: null)
  std::vector<std::unique_ptr<ClientConn>> conns_;
  std::vector<SessionAuth> sessions_;
  std::atomic<bool> sending_{false};
  std::atomic<bool> measuring_{false};
  std::atomic<std::uint64_t> errors_{0};
  std::atomic<std::uint64_t> injected_{0};
  std::atomic<std::uint64_t> corrupt_headers_{0};
  std::atomic<std::uint64_t> last_completion_ns_{0};
  // Latency histograms (58 KiB each) shared by connections id % kSlots.
  struct HistSlot {
    std::mutex mu;
    Histogram h;
  };
  static constexpr unsigned kSlots = 16;
  std::array<HistSlot, kSlots> latency_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::string last_event_;                          // mu_
  std::map<Op, std::optional<ServerStats>> ctl_;    // mu_: control replies received
};

class ConnDispatcher final : public Dispatcher {
 public:
  ConnDispatcher(BenchClient& owner, ClientConn& conn, bool fast) : owner_(owner), conn_(conn), fast_(fast) {}
  bool ms_can_fast_dispatch(const Message& m) const override { return fast_ && m.get_type() == kMsgReply; }
  void ms_fast_dispatch(MessageRef m) override { owner_.on_message(conn_, std::move(m)); }
  bool ms_dispatch(MessageRef m) override {
    if (m->get_type() != kMsgReply) return false;
    owner_.on_message(conn_, std::move(m));
    return true;
  }
  void ms_handle_connect(ConnectionRef) override { owner_.on_connect(conn_); }
  bool ms_handle_reset(ConnectionRef) override {
    owner_.on_reset(conn_, false);
    return true;
  }
  void ms_handle_remote_reset(ConnectionRef) override { owner_.on_reset(conn_, true); }
  bool ms_handle_refused(ConnectionRef) override {
    owner_.on_refused();
    return true;
  }

 private:
  BenchClient& owner_;
  ClientConn& conn_;
  const bool fast_;
};

bool BenchClient::connect(std::string& error, bool& unavailable) {
  stack_ = create_run_stack(s_, error, unavailable);
  if (!stack_) return false;
  const Policy policy = a_.lossy ? Policy::lossy_client() : Policy::lossless_client();
  std::uint64_t per = a_.count ? *a_.count / a_.conns : 0;
  std::uint64_t extra = a_.count ? *a_.count % a_.conns : 0;
  try {
    // Who we are and how we prove it (-n/--name, -k/--keyring,
    // auth_client_required, ms_client_mode): the bench server holds a
    // keyring, no monitor, so cephx is the key-based exchange.
    const BenchClientAuth auth = bench_client_auth(*s_.cfg, true);
    if (s_.info) s_.info(describe_client_auth(*s_.cfg, auth));
    for (unsigned i = 0; i < a_.conns; ++i) {
      auto c = std::make_unique<ClientConn>();
      c->id = i;
      c->rng.seed(a_.seed * 1000003u + i);
      c->budget = a_.count ? per + (i < extra ? 1 : 0) : UINT64_MAX;
      c->dispatcher = std::make_unique<ConnDispatcher>(*this, *c, !a_.queue_dispatch);
      // One messenger per connection (a messenger keeps one session per
      // peer), all on the one client stack as Ceph shares a process's stack.
      c->msgr = Messenger::create(stack_, {entity_type::client, -1}, s_.options);
      if (!attach_fallback(s_, *c->msgr, fallback_, error)) return false;
      c->msgr->set_policy(entity_type::osd, policy);
      if (auth.name) c->msgr->set_auth_name(*auth.name);
      c->msgr->set_client_auth(auth.auth);
      c->msgr->add_dispatcher_tail(c->dispatcher.get());
      c->msgr->start();
      conns_.push_back(std::move(c));
    }
    for (auto& c : conns_) c->con = c->msgr->connect_to(entity_type::osd, target_);
  } catch (const std::exception& e) {
    error = fmt::format("cannot start the client: {}", e.what());
    return false;
  }
  const auto deadline = SteadyClock::now() + std::chrono::duration<double>(a_.connect_timeout);
  std::unique_lock l(mu_);
  for (;;) {
    const auto ready = static_cast<unsigned>(
        std::count_if(conns_.begin(), conns_.end(), [](const auto& c) { return c->ready.load(); }));
    if (ready == conns_.size()) return check_sessions(error);
    // A refused authentication does not get better with time: end the run
    // with the reason (the key is wrong, missing, or the peer asks for a
    // method or mode we do not offer).
    for (auto& c : conns_) {
      if (c->ready.load() || !c->con) continue;
      const Connection::FaultInfo f = c->con->last_fault();
      if (f.code == make_error_code(errc::auth_failed) || f.code == make_error_code(errc::auth_unsupported) ||
          f.code == make_error_code(errc::bad_signature)) {
        error = fmt::format("authentication with {} failed: {}", target_.to_string(), f.reason);
        return false;
      }
    }
    // A lossy session that faulted before READY is gone: dial again.
    for (auto& c : conns_) {
      if (!c->ready.load() && c->dead.exchange(false)) {
        l.unlock();
        c->con = c->msgr->connect_to(entity_type::osd, target_);
        l.lock();
      }
    }
    if (stop_requested()) {
      error = "interrupted while connecting";
      return false;
    }
    if (SteadyClock::now() >= deadline) {
      error = fmt::format("{} of {} connection(s) to {} not ready after {} s{}", conns_.size() - ready,
                          conns_.size(), target_.to_string(), a_.connect_timeout,
                          last_event_.empty() ? "" : " (last event: " + last_event_ + ")");
      return false;
    }
    cv_.wait_for(l, std::chrono::milliseconds(100));
  }
}

bool BenchClient::check_sessions(std::string& error) {
  sessions_.clear();
  for (auto& c : conns_) sessions_.push_back(session_auth(c->con->auth_info()));
  if (s_.require_con_mode.empty()) return true;
  for (std::size_t i = 0; i < sessions_.size(); ++i) {
    if (sessions_[i].con_mode == s_.require_con_mode) continue;
    error = fmt::format("{} mode was asked for, but connection {} negotiated {} mode with auth {}{}",
                        s_.require_con_mode, i, sessions_[i].con_mode, sessions_[i].method,
                        s_.require_con_mode == "secure" && sessions_[i].method != "cephx"
                            ? " (secure mode needs cephx: give the keyring with -k/--keyring)"
                            : "");
    return false;
  }
  return true;
}

void BenchClient::stop() {
  sending_.store(false);
  // Shut every messenger down before waiting for any: they share one stack,
  // which the first wait() stops (docs/benchmarking.md, "one stack").
  for (auto& c : conns_)
    if (c->msgr) c->msgr->shutdown();
  for (auto& c : conns_)
    if (c->msgr) c->msgr->wait();
  for (auto& c : conns_) c->msgr.reset();
  if (stack_) stack_->stop();
}

void BenchClient::send_locked(ClientConn& c, std::uint64_t scheduled_ns) {
  const std::uint64_t size = a_.sizes.sample(c.rng);
  BenchHeader h;
  h.op = request_op();
  h.flags = a_.verify ? flag::verify : 0;
  h.conn_id = c.id;
  h.think_us = a_.think_us;
  h.seq = c.tracker.issue();
  h.send_ns = scheduled_ns != 0 ? scheduled_ns : now_ns();
  BufferList data;
  if (h.op == Op::source) {
    h.reply_size = static_cast<std::uint32_t>(size);
  } else {
    data = payload_pool().make(size, h.seq * 31u + c.id);
    h.payload_len = static_cast<std::uint32_t>(size);
    if (a_.verify) h.payload_crc = payload_crc(data);
  }
  if (a_.inject_corruption_every != 0 && (injected_.fetch_add(1) + 1) % a_.inject_corruption_every == 0) {
    // Test hook: damage after the checksum was taken, before the messenger.
    if (h.op == Op::source) h.flags |= flag::corrupt_reply;
    else data = damaged(data);
  }
  ++c.inflight;
  --c.budget;
  if (c.con->send_message(make_bench_message(kMsgRequest, h, std::move(data)))) errors_.fetch_add(1);
}

void BenchClient::on_message(ClientConn& c, MessageRef m) {
  const std::uint64_t now = now_ns();
  BenchHeader::DecodeError why{};
  const auto h = read_header(*m, why);
  if (!h || (h->op != Op::ctl_start && h->op != Op::ctl_stop && h->op != Op::ctl_done && h->conn_id != c.id)) {
    // Without a trustworthy header the request it answers cannot be
    // identified: it stays outstanding (and so counts as lost too).
    if (a_.verify) {
      std::lock_guard l(c.mu);
      ++c.verify.corrupted;
    } else {
      errors_.fetch_add(1);
    }
    if (corrupt_headers_.fetch_add(1) == 0)
      fmt::print(stderr, "siphon-bench: undecodable reply: {}\n", h ? "wrong connection id" : to_string(why));
    return;
  }
  if (h->op == Op::ctl_start || h->op == Op::ctl_stop || h->op == Op::ctl_done) {
    std::lock_guard l(mu_);
    ctl_[h->op] = h->op == Op::ctl_stop ? ServerStats::decode(m->data().contiguous()) : std::nullopt;
    if (h->op == Op::ctl_stop && !ctl_[h->op]) ctl_[h->op] = ServerStats{};
    cv_.notify_all();
    return;
  }
  bool bad = false;
  std::uint64_t bytes = 0;
  switch (h->op) {
    case Op::echo:
      bytes = 2 * std::uint64_t{h->payload_len};
      if (a_.verify) bad = m->data().length() != h->payload_len || payload_crc(m->data()) != h->payload_crc;
      break;
    case Op::sink:
      bytes = h->payload_len;
      bad = (h->flags & flag::payload_bad) != 0;
      break;
    default:
      bytes = m->data().length();
      if (a_.verify) bad = m->data().length() != h->payload_len || payload_crc(m->data()) != h->payload_crc;
      break;
  }
  bool finished = false;
  {
    std::lock_guard l(c.mu);
    const auto outcome = c.tracker.complete(h->seq);
    if (outcome == SeqTracker::Outcome::duplicate || outcome == SeqTracker::Outcome::unknown) {
      if (a_.verify) {
        ++c.verify.checked;
        if (outcome == SeqTracker::Outcome::duplicate) ++c.verify.duplicated;
        else ++c.verify.corrupted;
      } else {
        errors_.fetch_add(1);
      }
      return;
    }
    if (a_.verify) {
      ++c.verify.checked;
      if (outcome == SeqTracker::Outcome::reordered) ++c.verify.reordered;
      if (bad) ++c.verify.corrupted;
    }
    --c.inflight;
    if (measuring_.load(std::memory_order_relaxed)) {
      HistSlot& slot = latency_[c.id % kSlots];
      std::lock_guard hl(slot.mu);
      slot.h.record(now > h->send_ns ? now - h->send_ns : 0);
    }
    c.completed.fetch_add(1, std::memory_order_relaxed);
    c.bytes.fetch_add(bytes, std::memory_order_relaxed);
    last_completion_ns_.store(now, std::memory_order_relaxed);
    // Closed loop: the reply path refills the window (no thread hop).
    if (a_.rate == 0 && sending_.load(std::memory_order_relaxed))
      while (c.inflight < a_.inflight && c.budget > 0) send_locked(c, 0);
    finished = c.inflight == 0 && c.budget == 0;
  }
  if (finished) {
    std::lock_guard l(mu_);
    cv_.notify_all();
  }
}

void BenchClient::load_thread(unsigned t, std::uint64_t start_ns) {
  std::vector<ClientConn*> mine;
  for (unsigned i = t; i < conns_.size(); i += a_.threads) mine.push_back(conns_[i].get());
  if (a_.rate == 0) {
    // Closed loop: fill each window; replies keep it full.
    for (ClientConn* c : mine) {
      std::lock_guard l(c->mu);
      while (c->inflight < a_.inflight && c->budget > 0 && sending_.load()) send_locked(*c, 0);
    }
    return;
  }
  // Open loop: this thread's share of --rate, at fixed intervals from
  // start_ns; each request is stamped with its scheduled time.
  const double interval = 1e9 * a_.threads / a_.rate;
  std::uint64_t n = 0;
  std::size_t next_conn = 0;
  while (sending_.load(std::memory_order_relaxed) && !stop_requested()) {
    const auto due = start_ns + static_cast<std::uint64_t>(static_cast<double>(n) * interval);
    const std::uint64_t now = now_ns();
    if (now < due) {
      if (due - now > 200000) std::this_thread::sleep_for(std::chrono::nanoseconds(due - now - 100000));
      else if (due - now > 20000) std::this_thread::sleep_for(std::chrono::microseconds(10));
      continue;
    }
    bool any_budget = false, sent = false;
    for (std::size_t k = 0; k < mine.size() && !sent; ++k) {
      ClientConn* c = mine[(next_conn + k) % mine.size()];
      if (c->dead.load()) continue;
      std::lock_guard l(c->mu);
      if (c->budget == 0) continue;
      any_budget = true;
      if (c->inflight >= a_.inflight) continue;
      send_locked(*c, due);
      next_conn = (next_conn + k + 1) % mine.size();
      sent = true;
    }
    if (!any_budget) return;
    if (!sent) {
      // Every window is full: wait (the delay counts as latency, since the
      // request keeps its scheduled time).
      std::this_thread::sleep_for(std::chrono::microseconds(20));
      continue;
    }
    ++n;
  }
}

void BenchClient::send_ctl(Op op) {
  {
    std::lock_guard l(mu_);
    ctl_.erase(op);
  }
  BenchHeader h;
  h.op = op;
  h.conn_id = 0;
  h.send_ns = now_ns();
  if (conns_.front()->con->send_message(make_bench_message(kMsgRequest, h, {}))) errors_.fetch_add(1);
}

bool BenchClient::wait_ctl(Op op, double seconds, ServerStats* stats) {
  std::unique_lock l(mu_);
  const bool got = cv_.wait_for(l, std::chrono::duration<double>(seconds), [&] { return ctl_.count(op) != 0; });
  if (got && stats != nullptr && ctl_[op]) *stats = *ctl_[op];
  return got;
}

bool BenchClient::wait_until(SteadyClock::time_point tp, bool until_done) {
  for (;;) {
    if (until_done && all_sent_and_answered()) return true;
    if (stop_requested()) return false;
    const auto now = SteadyClock::now();
    if (now >= tp) return false;
    std::unique_lock l(mu_);
    cv_.wait_until(l, std::min(tp, now + std::chrono::milliseconds(50)));
  }
}

Result BenchClient::run() {
  Result r;
  r.resources.present = true;
  const bool timed = !a_.count.has_value();
  std::vector<std::thread> threads;
  auto start_load = [&] {
    sending_.store(true);
    const std::uint64_t start = now_ns();
    for (unsigned t = 0; t < a_.threads; ++t) threads.emplace_back([this, t, start] { load_thread(t, start); });
  };
  auto after = [](SteadyClock::time_point tp, double seconds) {
    return tp + std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(seconds));
  };

  const LinkCutter cutter(a_.soft_link_down_at, a_.soft_link_down_for, s_.info);
  // Warm-up (timed runs), then the measured window.
  if (timed) {
    start_load();
    wait_until(after(SteadyClock::now(), a_.warmup), false);
  }
  send_ctl(Op::ctl_start);
  const CpuTimes cpu0 = cpu_();
  const Totals w0 = totals();
  const auto faults0 = faults();
  const auto win_start = SteadyClock::now();
  measuring_.store(true);
  if (!timed) start_load();
  const auto planned_end = after(win_start, a_.duration);
  Totals last = w0;
  auto last_tp = win_start;
  std::uint64_t progress_mark = w0.completed;
  auto progress_tp = win_start;
  std::string stall_error;
  SteadyClock::time_point win_end;
  Totals w1;
  CpuTimes cpu1;
  FaultTotals faults1;
  for (unsigned k = 1;; ++k) {
    auto tick = win_start + std::chrono::seconds(k);
    if (timed) tick = std::min(tick, planned_end);
    const bool done = wait_until(tick, !timed);
    const auto now = SteadyClock::now();
    const Totals cur = totals();
    bool ending = stop_requested() || done || (timed && now >= planned_end);
    if (!timed && !ending) {
      if (cur.completed != progress_mark) {
        progress_mark = cur.completed;
        progress_tp = now;
      } else if (now - progress_tp > std::chrono::duration<double>(a_.drain_timeout)) {
        stall_error = fmt::format("no reply for {} s with requests outstanding; stopping", a_.drain_timeout);
        ending = true;
      }
    }
    if (ending) {
      // The window closes here: snapshot before anything else.
      measuring_.store(false);
      win_end = now;
      w1 = cur;
      cpu1 = cpu_();
      faults1 = faults();
    }
    const double dt = std::chrono::duration<double>(now - last_tp).count();
    // One entry per whole second of the window: each wake-up at a whole
    // second counts, even when the previous one came late and this interval
    // is a little short (comparing the interval alone dropped seconds from
    // the series on a loaded machine).
    const bool on_tick = now >= win_start + std::chrono::seconds(k);
    if ((on_tick || now - last_tp >= std::chrono::milliseconds(999)) && dt > 0) {
      r.msgs_per_second.push_back(static_cast<double>(cur.completed - last.completed) / dt);
      ResourceSample rs = sample_resources({stack_.get(), peer_stack_});
      rs.t = std::chrono::duration<double>(now - win_start).count();
      r.resources.per_second.push_back(std::move(rs));
    }
    if (ending) break;
    progress(std::chrono::duration<double>(now - win_start).count(),
             dt > 0 ? static_cast<double>(cur.completed - last.completed) / dt : 0,
             dt > 0 ? static_cast<double>(cur.bytes - last.bytes) / dt / (1024.0 * 1024.0) : 0);
    last = cur;
    last_tp = now;
  }
  if (!timed && last_completion_ns_.load() != 0) {
    // A --count run ends with its last reply, not when this thread noticed.
    const auto last_reply = SteadyClock::time_point(std::chrono::nanoseconds(last_completion_ns_.load()));
    win_end = std::max(win_start, std::min(win_end, last_reply));
  }
  sending_.store(false);
  for (auto& t : threads) t.join();
  if (s_.progress) s_.progress("");

  // The server's CPU over the window; then the replies still on their way.
  send_ctl(Op::ctl_stop);
  ServerStats server{};
  if (!wait_ctl(Op::ctl_stop, a_.drain_timeout, &server)) {
    errors_.fetch_add(1);
    if (s_.info) s_.info("the server did not report its CPU time (no reply to ctl_stop)");
  }
  const auto drain_deadline = after(SteadyClock::now(), a_.drain_timeout);
  while (SteadyClock::now() < drain_deadline && !stop_requested()) {
    bool idle = true;
    for (auto& c : conns_) {
      std::lock_guard l(c->mu);
      if (c->inflight != 0 && !c->dead.load()) idle = false;
    }
    if (idle) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  send_ctl(Op::ctl_done);
  wait_ctl(Op::ctl_done, 2, nullptr);

  r.seconds = std::chrono::duration<double>(win_end - win_start).count();
  r.messages = w1.completed - w0.completed;
  r.bytes = w1.bytes - w0.bytes;
  r.faults = faults1.faults - faults0.faults;
  r.reconnects = faults1.reconnects - faults0.reconnects;
  r.crc_errors = faults1.crc_errors - faults0.crc_errors;
  r.fallback_switches = faults1.fallback_switches - faults0.fallback_switches;
  r.primary_switches = faults1.primary_switches - faults0.primary_switches;
  r.client_cpu = to_side(cpu1 - cpu0);
  r.server_cpu = to_side(CpuTimes{server.user_ns, server.system_ns});
  r.verify = a_.verify;
  std::uint64_t unanswered = 0;
  for (auto& c : conns_) {
    std::lock_guard l(c->mu);
    unanswered += c->tracker.outstanding();
    r.verified.checked += c->verify.checked;
    r.verified.duplicated += c->verify.duplicated;
    r.verified.reordered += c->verify.reordered;
    r.verified.corrupted += c->verify.corrupted;
  }
  for (HistSlot& slot : latency_) {
    std::lock_guard l(slot.mu);
    r.latency.merge(slot.h);
  }
  if (a_.verify) r.verified.lost = unanswered;
  r.errors = errors_.load() + (a_.verify ? 0 : unanswered);
  if (!stall_error.empty() && s_.info) s_.info(stall_error);
  if (unanswered != 0 && s_.info) s_.info(fmt::format("{} request(s) never answered", unanswered));
  return r;
}

// A finished run's result `r` takes the place of `out`, keeping what
// describe() filled in.
// --perf-dump: the counters this process moved since `before`.
void keep_perf_delta(const RunSetup& s, const PerfSnapshot& before, Result& r) {
  if (!s.args.perf_dump) return;
  r.perf_dump = true;
  r.perf_delta = PerfSnapshot::take().delta_since(before);
}

void keep_description(Result& out, Result&& r) {
  r.mode = out.mode;
  r.pattern = out.pattern;
  r.ms_type = out.ms_type;
  r.config = out.config;
  r.options = out.options;
  out = std::move(r);
}

// Fills the configuration part of a result.
void describe(const RunSetup& s, Result& r) {
  const BenchArgs& a = s.args;
  r.mode = std::string(to_string(a.mode == Mode::compare ? Mode::loopback : a.mode));
  r.ms_type = s.ms_type.to_string();
  r.config["ms_type_source"] = a.mode == Mode::compare ? std::string("--ms-types") : ms_type_origin(s);
  r.config["policy"] = a.lossy ? "lossy" : "lossless";
  r.config["dispatch"] = a.queue_dispatch ? "queue" : "fast";
  if (a.mode != Mode::server) {
    r.pattern = std::string(to_string(a.pattern));
    r.config["conns"] = std::to_string(a.conns);
    r.config["threads"] = std::to_string(a.threads);
    r.config["inflight"] = std::to_string(a.inflight);
    r.config["size"] = a.size_spec;
    if (a.count) {
      r.config["count"] = std::to_string(*a.count);
    } else {
      r.config["duration"] = fmt::format("{}", a.duration);
      r.config["warmup"] = fmt::format("{}", a.warmup);
    }
    r.config["think_us"] = std::to_string(a.think_us);
    r.config["rate"] = a.rate > 0 ? fmt::format("{}", a.rate) : "closed loop";
    r.config["verify"] = a.verify ? "true" : "false";
    if (!a.target.empty()) r.config["target"] = a.target;
    if (a.inject_corruption_every != 0)
      r.config["inject_corruption_every"] = std::to_string(a.inject_corruption_every);
  }
  if (!a.bind.empty()) r.config["bind"] = a.bind;
  // The options that matter for a messenger benchmark, and any that differ
  // from their defaults.
  static const compat::Opt kAlways[] = {compat::Opt::ms_type, compat::Opt::ms_async_op_threads,
                                        compat::Opt::ms_tcp_nodelay, compat::Opt::ms_tcp_rcvbuf,
                                        compat::Opt::ms_dispatch_throttle_bytes};
  static const compat::Opt kRdma[] = {compat::Opt::ms_async_rdma_buffer_size, compat::Opt::ms_async_rdma_credits,
                                      compat::Opt::ms_async_rdma_polling_us,
                                      compat::Opt::ms_async_rdma_zero_copy_threshold,
                                      compat::Opt::ms_async_rdma_support_srq};
  for (compat::Opt o : kAlways) r.options[std::string(compat::schema(o).name)] = s.cfg->value_string(o);
  if (s.ms_type.stack == compat::MsType::Stack::rdma)
    for (compat::Opt o : kRdma) r.options[std::string(compat::schema(o).name)] = s.cfg->value_string(o);
  for (std::size_t i = 0; i < compat::kOptionCount; ++i) {
    const auto o = static_cast<compat::Opt>(i);
    if (s.cfg->source(o).kind != compat::ValueSource::Kind::default_value)
      r.options[std::string(compat::schema(o).name)] = s.cfg->value_string(o);
  }
  // The stack that ran, not the schema default: without a configured ms_type
  // siphon-bench runs the embedded default (async+rdma), see ms_type_source.
  r.options["ms_type"] = r.ms_type;
}

// Left at its default, ms_async_rdma_polling_us is decided by the stack
// (docs/rdma-transport.md §1): report what it chose, not Ceph's 1000.
void note_polling(const RunSetup& s, const transport::Stack* stack, Result& r) {
  if (stack == nullptr) return;
  const auto p = rdma_polling(*stack);
  if (!p || s.cfg->source(compat::Opt::ms_async_rdma_polling_us).kind != compat::ValueSource::Kind::default_value)
    return;
  r.options[std::string(compat::schema(compat::Opt::ms_async_rdma_polling_us).name)] =
      fmt::format("{} (auto)", p->count());
}

}  // namespace

std::shared_ptr<transport::Stack> create_run_stack(const RunSetup& s, std::string& error,
                                                   bool& unavailable) {
  std::string why;
  auto stack = create_stack(s.ms_type, *s.cfg, why);
  if (!stack) {
    unavailable = true;
    error = fmt::format("cannot create the {} stack: {}", s.ms_type.to_string(), why);
  }
  return stack;
}

namespace {

// An msgr2 address given to `option`; nullopt with `error` set otherwise.
// `form` describes what is expected.
std::optional<EntityAddr> parse_msgr2_addr(const std::string& text, std::string_view option,
                                           std::string_view form, std::string& error) {
  auto a = EntityAddr::parse(text, AddrType::msgr2);
  if (!a || a->is_blank()) {
    error = fmt::format("{} '{}' is not an address ({})", option, text, form);
    return std::nullopt;
  }
  if (a->type != AddrType::msgr2) {
    error = fmt::format("{} '{}': siphon-bench speaks msgr2 only (use a v2: address or none)", option,
                        text);
    return std::nullopt;
  }
  return a;
}

}  // namespace

std::optional<EntityAddrVec> parse_target(const std::string& text, std::string& error) {
  const auto a = parse_msgr2_addr(text, "--target", "IP:PORT, e.g. 192.0.2.1:6800", error);
  if (!a) return std::nullopt;
  if (a->port() == 0) {
    error = fmt::format("--target '{}' needs a port (the one `siphon-bench server` printed)", text);
    return std::nullopt;
  }
  return EntityAddrVec(*a);
}

std::optional<EntityAddr> parse_bind(const std::string& text, std::string& error) {
  return parse_msgr2_addr(text, "--bind", "IP[:PORT], e.g. 0.0.0.0:6800", error);
}

void request_stop() noexcept { g_stop.store(true, std::memory_order_relaxed); }
bool stop_requested() noexcept { return g_stop.load(std::memory_order_relaxed); }

int RunOutcome::exit_code() const noexcept {
  if (!ran) return 1;
  if (result.verify && !result.verified.clean()) return 3;
  return result.errors != 0 ? 1 : 0;
}

RunOutcome run_loopback(const RunSetup& s) {
  RunOutcome out;
  describe(s, out.result);
  const PerfSnapshot perf0 = PerfSnapshot::take();
  // The server's threads are the ones its stack and messenger start.
  auto server_tids = std::make_shared<std::vector<pid_t>>();
  const ResourceSample resources_before = sample_resources({});
  settle_runtime_threads();
  const auto before = list_threads();
  ServerSide server;
  const std::string bind = s.args.bind.empty() ? "127.0.0.1:0" : s.args.bind;
  if (!start_server(s, bind, std::nullopt, [server_tids] { return threads_cpu(*server_tids); }, server,
                    out.error, out.unavailable))
    return out;
  *server_tids = new_threads(before, list_threads());
  EntityAddrVec target = server.msgr->get_myaddrs();
  std::shared_ptr<transport::Stack> client_stack;
  if (s.info)
    s.info(fmt::format("loopback over {} ({}): server {} ({} threads), {} client connection(s)",
                       s.ms_type.to_string(), ms_type_origin(s),
                       target.to_string(), server_tids->size(), s.args.conns));
  if (s.info) s.info("server " + server.auth);
  {
    Messenger* server_msgr = server.msgr.get();
    BenchClient client(s, target, [server_tids] { return process_cpu() - threads_cpu(*server_tids); },
                       [server_msgr] { return server_msgr->stats(); }, server.stack.get());
    if (!client.connect(out.error, out.unavailable)) return out;
    Result r = client.run();
    r.sessions = client.sessions();
    // Both stacks of this process, summed (async+rdma only; empty for TCP).
    r.stack_counters = client.counters();
    for (const auto& [name, value] : stack_counters(*server.stack)) r.stack_counters[name] += value;
    // While the loggers still exist (they go with their messengers/stacks).
    keep_perf_delta(s, perf0, r);
    client_stack = client.stack();
    keep_description(out.result, std::move(r));
    note_polling(s, client_stack.get(), out.result);
    out.ran = true;
  }
  server.stop();
  // Every messenger is gone and both stacks are stopped: what is still held
  // now is held for good (tests/soak checks it against `before`).
  Resources& res = out.result.resources;
  res.before = resources_before;
  res.before.t = -1;
  res.have_before = true;
  res.after = sample_resources({client_stack.get(), server.stack.get()});
  res.after.t = out.result.seconds;
  res.have_after = true;
  return out;
}

RunOutcome run_client(const RunSetup& s) {
  RunOutcome out;
  describe(s, out.result);
  const auto target = parse_target(s.args.target, out.error);
  if (!target) return out;
  if (s.info)
    s.info(fmt::format("client over {} ({}) to {}, {} connection(s)", s.ms_type.to_string(),
                       ms_type_origin(s), target->to_string(), s.args.conns));
  const PerfSnapshot perf0 = PerfSnapshot::take();
  BenchClient client(s, *target, [] { return process_cpu(); });
  if (!client.connect(out.error, out.unavailable)) return out;
  Result r = client.run();
  r.sessions = client.sessions();
  r.stack_counters = client.counters();
  keep_perf_delta(s, perf0, r);
  keep_description(out.result, std::move(r));
  note_polling(s, client.stack().get(), out.result);
  out.ran = true;
  return out;
}

RunOutcome run_server(const RunSetup& s) {
  RunOutcome out;
  describe(s, out.result);
  ServerSide server;
  const std::string bind = s.args.bind.empty() ? "0.0.0.0:0" : s.args.bind;
  // Nonce 0: clients can name the server by IP:PORT alone.
  if (!start_server(s, bind, 0u, [] { return process_cpu(); }, server, out.error, out.unavailable)) return out;
  if (s.info)
    s.info(fmt::format("server listening on {} over {} ({}); {}", server.msgr->get_myaddrs().to_string(),
                       s.ms_type.to_string(), ms_type_origin(s),
                       s.args.once ? "exits after the first client run" : "stop with Ctrl-C"));
  if (s.info) s.info("server " + server.auth);
  // The admin socket (admin_socket; empty: none), as a daemon's: `ceph
  // --admin-daemon PATH messenger dump` shows the server's connections.
  std::string admin_error;
  std::unique_ptr<compat::DaemonAdmin> admin = compat::DaemonAdmin::open(*s.cfg, admin_error);
  if (admin) {
    admin->messengers->add("server", server.msgr.get());
    if (s.info) s.info(fmt::format("admin socket {}", admin->socket->path()));
  } else if (!admin_error.empty() && s.info) {
    s.info(admin_error + " (continuing without an admin socket)");
  }
  const CpuTimes cpu0 = process_cpu();
  const auto t0 = SteadyClock::now();
  const auto limit = std::chrono::duration<double>(s.args.duration);
  while (!stop_requested()) {
    if (s.args.duration > 0 && SteadyClock::now() - t0 >= limit) break;
    if (s.args.once && server.logic->runs_done() > 0) {
      // Let the reply to ctl_done go out before the connections close.
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  Result& r = out.result;
  r.seconds = std::chrono::duration<double>(SteadyClock::now() - t0).count();
  r.pattern = std::string(to_string(server.logic->main_pattern()));
  r.messages = server.logic->served();
  r.bytes = server.logic->bytes();
  r.errors = server.logic->bad_requests();
  r.server_cpu = to_side(process_cpu() - cpu0);
  r.config["clients_accepted"] = std::to_string(server.logic->accepts());
  r.config["client_runs"] = std::to_string(server.logic->runs_done());
  r.sessions = server.logic->sessions();
  r.stack_counters = stack_counters(*server.stack);
  note_polling(s, server.stack.get(), r);
  admin.reset();  // before the messenger it shows goes away
  server.stop();
  out.ran = true;
  return out;
}

}  // namespace siphon::bench
