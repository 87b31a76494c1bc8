#include "tools/bench/objd_run.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <random>
#include <tuple>
#include <unordered_map>

#include "compat/factory.h"
#include "compat/keyring.h"
#include "msgr/api/messenger.h"
#include "msgr/mon/mon_client.h"
#include "msgr/transport/transport.h"
#include "tools/bench/auth.h"
#include "tools/bench/cpu.h"
#include "tools/bench/perf_delta.h"
#include "tools/bench/stack.h"
#include "tools/objd/proto.h"

namespace siphon::bench {
namespace {

using Clock = std::chrono::steady_clock;
using objd::MObjdOp;
using objd::MObjdReply;
using objd::OpCode;

struct Object {
  std::string name;
  std::uint64_t size = 0;
  std::uint64_t seed = 0;  // of its bytes
  std::uint32_t crc = 0;   // crc32c(-1) of its bytes
  bool stored = false;     // the put succeeded
};

// The object's bytes: a splitmix64 stream from its seed (regenerated for the
// put; only the crc is kept).
BufferList make_data(const Object& o) {
  BufferList bl;
  if (o.size == 0) return bl;
  std::byte* p = bl.append_uninitialized(o.size);
  std::uint64_t x = o.seed;
  for (std::uint64_t i = 0; i < o.size; i += 8) {
    x += 0x9e3779b97f4a7c15ull;
    std::uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    std::memcpy(p + i, &z, std::min<std::uint64_t>(8, o.size - i));
  }
  return bl;
}

class Driver;

class ReplyDispatcher final : public Dispatcher {
 public:
  ReplyDispatcher(Driver& d, unsigned conn) : d_(d), conn_(conn) {}
  bool ms_can_fast_dispatch(const Message& m) const override { return m.get_type() == objd::kMsgObjdReply; }
  void ms_fast_dispatch(MessageRef m) override { ms_dispatch(std::move(m)); }
  bool ms_dispatch(MessageRef m) override;
  void ms_handle_connect(ConnectionRef) override;
  bool ms_handle_reset(ConnectionRef) override;

 private:
  Driver& d_;
  unsigned conn_;
};

class Driver {
 public:
  explicit Driver(const RunSetup& s) : s_(s), a_(s.args) {}

  bool connect(const EntityAddrVec& target, std::string& error, bool& unavailable) {
    stack_ = create_run_stack(s_, error, unavailable);
    if (!stack_) return false;
    auto registry = std::make_shared<MessageRegistry>();
    registry->add<MObjdReply>();
    try {
      // Who we are and how we prove it: -n/--name, and cephx when
      // auth_client_required lists it and a key is found (-k/--keyring).
      // With mon_host set, cephx towards siphon-objd is what a Ceph client
      // does towards an OSD: a session with the monitors first, then their
      // OSD ticket as the authorizer (docs/security.md 5d). Without, the
      // daemon holds a keyring and no monitor, and cephx is the key-based
      // exchange (5b).
      const std::string mon_host = s_.cfg->get<compat::Opt::mon_host>();
      const BenchClientAuth ba = bench_client_auth(*s_.cfg, mon_host.empty());
      const ClientAuth& auth = ba.auth;
      const bool cephx = ba.cephx;
      const auto& auth_name = ba.name;
      if (cephx && !mon_host.empty() && !connect_mon(mon_host, auth, auth_name, error)) return false;
      if (s_.info)
        s_.info(fmt::format("authenticating as {} with {}", s_.cfg->name().to_string(),
                            !cephx                      ? std::string("auth none")
                            : auth.key_based_everywhere ? "cephx (" + auth.key_source + ")"
                                                        : "a cephx ticket from the monitors at " + mon_host));
      for (unsigned i = 0; i < a_.conns; ++i) {
        Conn c;
        c.dispatcher = std::make_unique<ReplyDispatcher>(*this, i);
        // One messenger per connection, all on one stack (as bench client).
        c.msgr = Messenger::create(stack_, {entity_type::client, -1}, s_.options);
        c.msgr->set_policy(entity_type::osd, Policy::lossy_client());
        if (auth_name) c.msgr->set_auth_name(*auth_name);
        c.msgr->set_client_auth(auth);
        c.msgr->set_message_registry(registry);
        c.msgr->add_dispatcher_tail(c.dispatcher.get());
        c.msgr->start();
        conns_.push_back(std::move(c));
      }
      for (auto& c : conns_) c.con = c.msgr->connect_to(entity_type::osd, target);
    } catch (const std::exception& e) {
      error = fmt::format("cannot start the client: {}", e.what());
      return false;
    }
    const auto deadline = Clock::now() + std::chrono::duration<double>(a_.connect_timeout);
    std::unique_lock l(mu_);
    while (ready_ < conns_.size()) {
      if (stop_requested()) {
        error = "interrupted while connecting";
        return false;
      }
      if (!auth_error_.empty()) {
        error = fmt::format("authentication with {} failed: {}", target.to_string(), auth_error_);
        return false;
      }
      if (cv_.wait_until(l, deadline) == std::cv_status::timeout && ready_ < conns_.size()) {
        error = fmt::format("{} of {} connection(s) to {} not ready after {} s (is siphon-objd running there, on "
                            "the same ms_type?)",
                            conns_.size() - ready_, conns_.size(), target.to_string(), a_.connect_timeout);
        return false;
      }
    }
    return true;
  }

  // A session with the monitors as our entity, whose service tickets
  // (shared through auth.tickets) the connections to the daemon present.
  bool connect_mon(const std::string& mon_host, const ClientAuth& auth,
                   const std::optional<proto::EntityName>& name, std::string& error) {
    const auto mons = proto::parse_mon_host(mon_host);
    if (!mons) {
      error = fmt::format("cannot parse mon_host '{}'", mon_host);
      return false;
    }
    mon::MonClientOptions mo;
    mo.mon_addrs = *mons;
    mo.messenger = s_.options;
    if (name) mo.auth_name = *name;
    mo.auth = auth;
    mon_ = std::make_unique<mon::MonClient>(compat::create_tcp_stack(*s_.cfg), mo);
    if (const mon::MonError e = mon_->connect(std::chrono::duration_cast<std::chrono::nanoseconds>(
            std::chrono::duration<double>(a_.connect_timeout)))) {
      error = "cannot get a ticket from the monitors: " + e.message;
      return false;
    }
    return true;
  }

  void shutdown() {
    for (auto& c : conns_) c.msgr->shutdown();
    for (auto& c : conns_) c.msgr->wait();
    if (mon_) mon_->shutdown();
    if (stack_) stack_->stop();
  }

  // One phase: `op` on every object (those stored, except for put).
  PhaseResult run_phase(OpCode op, std::vector<Object>& objects) {
    PhaseResult ph;
    ph.name = std::string(objd::to_string(op));
    const auto t0 = Clock::now();
    std::size_t next = 0;
    std::unique_lock l(mu_);
    while (next < objects.size() && !stop_requested()) {
      Object& o = objects[next];
      if (op != OpCode::put && !o.stored) {
        ++next;
        continue;
      }
      const unsigned c = static_cast<unsigned>(next % conns_.size());
      if (conns_[c].inflight >= a_.inflight) {
        if (cv_.wait_for(l, std::chrono::duration<double>(a_.drain_timeout)) == std::cv_status::timeout &&
            conns_[c].inflight >= a_.inflight) {
          note(fmt::format("{}: no reply on connection {} for {} s", ph.name, c, a_.drain_timeout));
          break;
        }
        continue;
      }
      auto m = boost::intrusive_ptr<MObjdOp>(new MObjdOp(op, o.name));
      const std::uint64_t tid = ++tid_;
      m->set_tid(tid);
      if (op == OpCode::put) {
        // Generated without the lock (replies keep flowing); only this
        // thread sends, so the window check above still holds.
        const Object copy = o;
        l.unlock();
        m->set_data(make_data(copy));
        m->crc = copy.crc;
        l.lock();
      }
      pending_[tid] = {op, next, c, Clock::now()};
      ++conns_[c].inflight;
      ++next;
      ConnectionRef con = conns_[c].con;
      l.unlock();
      const auto ec = con->send_message(m);
      l.lock();
      if (ec) {
        const auto it = pending_.find(tid);
        if (it != pending_.end()) {
          pending_.erase(it);
          --conns_[c].inflight;
          ++errors_;
          note(fmt::format("{} {}: send failed: {}", ph.name, o.name, ec.message()));
        }
      }
    }
    // Drain.
    const auto deadline = Clock::now() + std::chrono::duration<double>(a_.drain_timeout);
    while (!pending_.empty()) {
      if (cv_.wait_until(l, deadline) == std::cv_status::timeout && !pending_.empty()) {
        note(fmt::format("{}: {} request(s) unanswered after {} s", ph.name, pending_.size(), a_.drain_timeout));
        for (const auto& [tid, p] : pending_) {
          (void)tid;
          if (op == OpCode::get) ++verified_.lost;
          ++errors_;
          --conns_[p.conn].inflight;
        }
        pending_.clear();
      }
    }
    ph.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    ph.latency = phase_latency_;
    ph.ops = phase_ops_;
    ph.bytes = phase_bytes_;
    ph.errors = phase_errors_;
    phase_latency_.reset();
    phase_ops_ = phase_bytes_ = phase_errors_ = 0;
    objects_ = nullptr;
    return ph;
  }

  void begin(std::vector<Object>& objects) {
    std::lock_guard l(mu_);
    objects_ = &objects;
  }

  // --- dispatcher callbacks ---
  void on_reply(unsigned /*conn*/, const MessageRef& m) {
    const auto* r = dynamic_cast<const MObjdReply*>(m.get());
    std::lock_guard l(mu_);
    const auto it = pending_.find(m->get_tid());
    if (r == nullptr || it == pending_.end()) {
      ++errors_;
      note(fmt::format("unexpected message type {:#06x} tid {}", m->get_type(), m->get_tid()));
      return;
    }
    const Pending p = it->second;
    pending_.erase(it);
    --conns_[p.conn].inflight;
    cv_.notify_all();
    phase_latency_.record(static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - p.sent).count()));
    ++phase_ops_;
    if (objects_ == nullptr) return;
    Object& o = (*objects_)[p.index];
    auto fail = [&](std::string why) {
      ++errors_;
      ++phase_errors_;
      note(std::move(why));
    };
    if (r->name != o.name || r->op != p.op)
      return fail(fmt::format("reply tid {} is for {} {}, expected {} {}", m->get_tid(), objd::to_string(r->op),
                              r->name, objd::to_string(p.op), o.name));
    switch (p.op) {
      case OpCode::put:
        if (r->result < 0) return fail(fmt::format("put {}: {}", o.name, r->error));
        o.stored = true;
        phase_bytes_ += o.size;
        break;
      case OpCode::stat:
        if (r->result < 0) return fail(fmt::format("stat {}: {}", o.name, r->error));
        if (r->size != o.size) return fail(fmt::format("stat {}: size {}, put {}", o.name, r->size, o.size));
        break;
      case OpCode::get: {
        if (r->result < 0) {
          if (a_.verify) ++verified_.lost;
          return fail(fmt::format("get {}: {}", o.name, r->error));
        }
        phase_bytes_ += m->data().length();
        if (a_.verify) {
          ++verified_.checked;
          const std::uint32_t crc = objd::data_crc(m->data());
          if (m->data().length() != o.size || crc != o.crc || r->crc != o.crc) {
            ++verified_.corrupted;
            note(fmt::format("get {}: {} bytes crc32c {:#010x} (reply says {:#010x}); put {} bytes crc32c {:#010x}",
                             o.name, m->data().length(), crc, r->crc, o.size, o.crc));
          }
        } else if (m->data().length() != o.size) {
          return fail(fmt::format("get {}: {} bytes, put {}", o.name, m->data().length(), o.size));
        }
        break;
      }
      case OpCode::remove:
        if (r->result < 0) return fail(fmt::format("delete {}: {}", o.name, r->error));
        o.stored = false;
        break;
    }
  }
  void on_connect() {
    std::lock_guard l(mu_);
    ++ready_;
    cv_.notify_all();
  }
  void on_reset(const ConnectionRef& con) {
    const Connection::FaultInfo f = con->last_fault();
    std::lock_guard l(mu_);
    // A refused authentication ends the run at once (the lossy session is
    // gone, and retrying with the same key cannot help).
    if (f.code == make_error_code(errc::auth_failed) || f.code == make_error_code(errc::auth_unsupported) ||
        f.code == make_error_code(errc::bad_signature)) {
      if (auth_error_.empty()) auth_error_ = f.reason;
      cv_.notify_all();
      return;
    }
    note("a connection to siphon-objd was reset (unanswered requests count as errors)");
  }

  // A final stat of an object the run deleted: siphon-objd must answer ENOENT.
  bool check_gone(const std::string& name) {
    auto m = boost::intrusive_ptr<MObjdOp>(new MObjdOp(OpCode::stat, name));
    std::unique_lock l(mu_);
    const std::uint64_t tid = ++tid_;
    m->set_tid(tid);
    probe_tid_ = tid;
    probe_result_.reset();
    ConnectionRef con = conns_[0].con;
    l.unlock();
    if (con->send_message(m)) return false;
    l.lock();
    cv_.wait_for(l, std::chrono::duration<double>(a_.drain_timeout), [&] { return probe_result_.has_value(); });
    return probe_result_ && *probe_result_ == -ENOENT;
  }
  bool take_probe(const MessageRef& m) {
    std::lock_guard l(mu_);
    if (probe_tid_ == 0 || m->get_tid() != probe_tid_) return false;
    const auto* r = dynamic_cast<const MObjdReply*>(m.get());
    probe_result_ = r != nullptr ? r->result : 0;
    probe_tid_ = 0;
    cv_.notify_all();
    return true;
  }

  std::vector<SessionAuth> sessions() const {
    std::vector<SessionAuth> out;
    for (const auto& c : conns_) out.push_back(session_auth(c.con->auth_info()));
    return out;
  }
  std::uint64_t errors() const { return errors_; }
  const VerifyCounts& verified() const { return verified_; }
  std::vector<std::string> notes() const { return notes_; }
  std::uint64_t notes_dropped() const { return notes_dropped_; }
  std::tuple<std::uint64_t, std::uint64_t, std::uint64_t> faults() const {
    std::uint64_t f = 0, r = 0, crc = 0;
    for (const auto& c : conns_) {
      const auto st = c.msgr->stats();
      f += st.faults;
      r += st.reconnects;
      crc += st.crc_errors;
    }
    return {f, r, crc};
  }

 private:
  struct Pending {
    OpCode op;
    std::size_t index;
    unsigned conn;
    Clock::time_point sent;
  };
  struct Conn {
    std::unique_ptr<ReplyDispatcher> dispatcher;
    std::unique_ptr<Messenger> msgr;
    ConnectionRef con;
    unsigned inflight = 0;
  };
  // Under mu_. The first few problems are kept for the report.
  void note(std::string s) {
    if (notes_.size() < 10) notes_.push_back(std::move(s));
    else ++notes_dropped_;
  }

  const RunSetup& s_;
  const BenchArgs& a_;
  std::shared_ptr<transport::Stack> stack_;
  std::unique_ptr<mon::MonClient> mon_;
  std::vector<Conn> conns_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::size_t ready_ = 0;
  std::string auth_error_;  // why the peer refused us (or we it), first one
  std::uint64_t tid_ = 0;
  std::unordered_map<std::uint64_t, Pending> pending_;
  std::vector<Object>* objects_ = nullptr;
  Histogram phase_latency_;
  std::uint64_t phase_ops_ = 0, phase_bytes_ = 0, phase_errors_ = 0;
  std::uint64_t errors_ = 0;
  VerifyCounts verified_;
  std::vector<std::string> notes_;
  std::uint64_t notes_dropped_ = 0;
  std::uint64_t probe_tid_ = 0;
  std::optional<std::int32_t> probe_result_;
};

bool ReplyDispatcher::ms_dispatch(MessageRef m) {
  if (d_.take_probe(m)) return true;
  d_.on_reply(conn_, m);
  return true;
}
void ReplyDispatcher::ms_handle_connect(ConnectionRef) { d_.on_connect(); }
bool ReplyDispatcher::ms_handle_reset(ConnectionRef con) {
  d_.on_reset(con);
  return true;
}

}  // namespace

RunOutcome run_objd(const RunSetup& s) {
  RunOutcome out;
  const BenchArgs& a = s.args;
  Result& r = out.result;
  r.mode = "objd";
  r.pattern = "put-get";
  r.ms_type = s.ms_type.to_string();
  r.config["ms_type_source"] = ms_type_origin(s);
  r.config["conns"] = std::to_string(a.conns);
  r.config["inflight"] = std::to_string(a.inflight);
  r.config["size"] = a.size_spec;
  const std::uint64_t count = a.count.value_or(1000);
  r.config["count"] = std::to_string(count);
  r.config["verify"] = a.verify ? "true" : "false";
  r.config["target"] = a.target;
  r.options["ms_async_op_threads"] = std::to_string(compat::transport_options(*s.cfg).async_op_threads);
  const auto target = parse_target(a.target, out.error);
  if (!target) return out;
  if (s.info)
    s.info(fmt::format("objd workload over {} (ms_type from {}) against {}: {} object(s) of {}, {} connection(s)",
                       s.ms_type.to_string(), r.config["ms_type_source"], target->to_string(), count, a.size_spec,
                       a.conns));

  // The objects: names unique to this run, sizes from the distribution.
  std::vector<Object> objects(count);
  std::mt19937_64 rng(a.seed);
  const std::string prefix = fmt::format("bench.{}.{}", a.seed, ::getpid());
  for (std::uint64_t i = 0; i < count; ++i) {
    Object& o = objects[i];
    o.name = fmt::format("{}.{}", prefix, i);
    o.size = a.sizes.sample(rng);
    o.seed = rng();
    o.crc = objd::data_crc(make_data(o));
  }

  const PerfSnapshot perf0 = PerfSnapshot::take();
  Driver d(s);
  if (!d.connect(*target, out.error, out.unavailable)) {
    d.shutdown();
    return out;
  }
  r.sessions = d.sessions();
  const CpuTimes cpu0 = process_cpu();
  const auto t0 = Clock::now();
  for (OpCode op : {OpCode::put, OpCode::stat, OpCode::get, OpCode::remove}) {
    d.begin(objects);
    PhaseResult ph = d.run_phase(op, objects);
    r.latency.merge(ph.latency);
    r.messages += ph.ops;
    r.bytes += ph.bytes;
    r.phases.push_back(std::move(ph));
    if (stop_requested()) break;
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  const CpuTimes cpu = process_cpu() - cpu0;
  r.client_cpu = SideCpu{static_cast<double>(cpu.user_ns) / 1e9, static_cast<double>(cpu.system_ns) / 1e9};
  r.errors = d.errors();
  if (!objects.empty() && !stop_requested() && !d.check_gone(objects.front().name)) {
    ++r.errors;
    if (s.info) s.info(fmt::format("stat {} after its delete did not answer ENOENT", objects.front().name));
  }
  std::tie(r.faults, r.reconnects, r.crc_errors) = d.faults();
  r.verify = a.verify;
  r.verified = d.verified();
  if (s.info) {
    for (const auto& n : d.notes()) s.info(n);
    if (d.notes_dropped() > 0) s.info(fmt::format("... and {} more problem(s)", d.notes_dropped()));
  }
  if (a.perf_dump) {  // before shutdown: the loggers go with the messengers
    r.perf_dump = true;
    r.perf_delta = PerfSnapshot::take().delta_since(perf0);
  }
  d.shutdown();
  out.ran = true;
  return out;
}

}  // namespace siphon::bench
