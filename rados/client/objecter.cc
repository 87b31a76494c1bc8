#include "objecter.h"

#include <algorithm>
#include <cerrno>
#include <system_error>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "msgr/base/log.h"
#include "rados/osdmap/incremental.h"
#include "rados/osdmap/mosdmap.h"

namespace siphon::rados {

using Clock = std::chrono::steady_clock;

namespace {

double seconds(std::chrono::nanoseconds d) { return std::chrono::duration<double>(d).count(); }

proto::UTime wall_now() {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
  return {static_cast<std::uint32_t>(ns / 1000000000), static_cast<std::uint32_t>(ns % 1000000000)};
}

// The msgr2 address of an OSD's client address vector (typed MSGR2, as
// CLIENT_IDENT's target must be), or an empty vector.
EntityAddrVec msgr2_addrs(const EntityAddrVec& v) {
  for (const EntityAddr& a : v.addrs)
    if (a.type == AddrType::msgr2) return EntityAddrVec(a);
  return {};
}

}  // namespace

std::string errno_text(int r) {
  const int e = r < 0 ? -r : r;
  return fmt::format("({}) {}", e, std::generic_category().message(e));
}

struct Objecter::Op {
  std::uint64_t tid = 0;
  std::int64_t pool = -1;
  std::string oid, nspace;
  std::vector<OsdOp> ops;
  bool write = false;
  proto::UTime mtime;
  CompletionRef completion;
  // The target, from the map of target_epoch.
  osdmap::PgId pg;
  std::int8_t shard = -1;
  std::uint32_t hash = 0;
  std::int32_t osd = -1;
  std::vector<std::int32_t> acting;
  std::uint32_t target_epoch = 0;
  int attempts = 0;
  bool in_flight = false;  // sent on the current session of `osd`, reply awaited
  bool blocked = false;    // held by a backoff of that session
  Clock::time_point submitted, last_sent, resend_at{};
  std::string note;        // why it waits, for the timeout message
};

struct Objecter::Session {
  struct Backoff {
    osdmap::PgId pg;
    std::uint64_t id = 0;
    HObject begin, end;
  };
  std::int32_t osd = -1;
  ConnectionRef con;  // null: waiting for reconnect_at
  EntityAddrVec addrs;
  std::vector<Backoff> backoffs;
  std::chrono::nanoseconds delay{0};
  Clock::time_point reconnect_at{};
  std::string last_error;
};

// --- Completion -----------------------------------------------------------

bool Completion::is_complete() const {
  std::lock_guard l(m_);
  return result_.has_value();
}

OpResult Completion::wait() const {
  std::unique_lock l(m_);
  cv_.wait(l, [&] { return result_.has_value(); });
  return *result_;
}

std::optional<OpResult> Completion::wait_for(std::chrono::nanoseconds timeout) const {
  std::unique_lock l(m_);
  if (!cv_.wait_for(l, timeout, [&] { return result_.has_value(); })) return std::nullopt;
  return *result_;
}

void Completion::complete(OpResult r) {
  std::function<void(const OpResult&)> cb;
  {
    std::lock_guard l(m_);
    if (result_) return;
    result_ = std::move(r);
    cb = std::move(callback_);
    cv_.notify_all();
  }
  if (cb) cb(*result_);  // result_ is never written again
}

// --- lifecycle ------------------------------------------------------------

Objecter::Objecter(mon::MonClient& mc, std::shared_ptr<transport::Stack> stack, ObjecterOptions options)
    : mc_(mc), stack_(std::move(stack)), opts_(std::move(options)) {
  if (!stack_) throw std::invalid_argument("Objecter: no transport stack given");
}

Objecter::~Objecter() { shutdown(); }

std::string Objecter::start(std::chrono::nanoseconds timeout) {
  const std::uint64_t gid = mc_.global_id();
  if (gid == 0)
    return "no global_id: the mon client is not connected (connect it before starting the OSD client)";
  {
    std::lock_guard l(mtx_);
    if (started_) return {};
    started_ = true;
    msgr_ = Messenger::create(stack_, {entity_type::client, static_cast<std::int64_t>(gid)}, opts_.messenger);
    // One lossy session per OSD (as Ceph's client): a fault loses what was
    // in flight, and the ops are resent on a new session.
    msgr_->set_default_policy(Policy::lossy_client());
    msgr_->set_auth_name(opts_.auth_name);
    msgr_->set_client_auth(opts_.auth);
    msgr_->add_dispatcher_tail(this);
    msgr_->start();
  }
  mon_link_->self = this;
  mc_.set_other_message_handler([link = mon_link_](const Message& m) {
    std::lock_guard l(link->m);
    if (link->self) link->self->on_mon_message(m);
  });
  mc_.subscribe("osdmap", 0, mon::MMonSubscribe::kOneTime);
  ticker_ = std::thread([this] { tick_loop(); });
  std::unique_lock l(mtx_);
  if (!cv_.wait_for(l, timeout, [&] { return map_.has_value() || !map_error_.empty(); }))
    return "no OSDMap from the monitor within the timeout";
  if (!map_) return "the monitor's OSDMap does not decode: " + map_error_;
  return {};
}

void Objecter::shutdown() {
  std::vector<Done> done;
  {
    std::lock_guard l(mtx_);
    if (!started_ || stopping_) return;
    stopping_ = true;
    for (auto& [tid, op] : ops_) {
      OpResult r;
      r.result = -ESHUTDOWN;
      r.message = "the client shut down before the OSD answered";
      r.attempts = op->attempts;
      done.push_back({op->completion, std::move(r)});
    }
    ops_.clear();
    cv_.notify_all();
  }
  {
    std::lock_guard l(mon_link_->m);  // waits for a map being applied
    mon_link_->self = nullptr;
  }
  mc_.set_other_message_handler({});
  if (ticker_.joinable()) ticker_.join();
  msgr_->shutdown();
  msgr_->wait();
  run(done);
}

void Objecter::on_mon_message(const Message& m) {
  if (m.get_type() != osdmap::kMsgOsdMap) return;
  std::vector<Done> done;
  {
    std::lock_guard l(mtx_);
    if (stopping_) return;
    apply_maps_locked(m, nullptr, done);
  }
  run(done);
}

void Objecter::run(std::vector<Done>& done) {
  for (Done& d : done) d.completion->complete(std::move(d.result));
  done.clear();
}

std::int64_t Objecter::lookup_pool(const std::string& name, std::chrono::nanoseconds timeout) {
  {
    std::lock_guard l(mtx_);
    if (map_) {
      const std::int64_t id = map_->lookup_pool(name);
      if (id >= 0) return id;
    }
  }
  // Maybe a pool newer than our map: what librados does before ENOENT.
  const mon::VersionResult v = mc_.get_version("osdmap", timeout);
  std::unique_lock l(mtx_);
  if (v.error || !map_) return -1;
  if (map_->epoch < v.version) {
    mc_.subscribe("osdmap", map_->epoch + 1, mon::MMonSubscribe::kOneTime);
    cv_.wait_for(l, timeout, [&] { return stopping_ || (map_ && map_->epoch >= v.version); });
  }
  return map_ ? map_->lookup_pool(name) : -1;
}

std::uint32_t Objecter::epoch() const {
  std::lock_guard l(mtx_);
  return map_ ? map_->epoch : 0;
}

std::optional<osdmap::OsdMap> Objecter::osdmap() const {
  std::lock_guard l(mtx_);
  return map_;
}

ObjecterStats Objecter::stats() const {
  std::lock_guard l(mtx_);
  return stats_;
}

// --- ops ------------------------------------------------------------------

CompletionRef Objecter::submit(std::int64_t pool, std::string oid, std::vector<OsdOp> ops,
                               std::string nspace, std::function<void(const OpResult&)> callback) {
  auto c = std::make_shared<Completion>();
  c->callback_ = std::move(callback);
  std::vector<Done> done;
  {
    std::lock_guard l(mtx_);
    if (!started_ || stopping_ || ops.empty()) {
      OpResult r;
      r.result = ops.empty() ? -EINVAL : -ENOTCONN;
      r.message = ops.empty() ? "no operation given" : "the OSD client is not running";
      done.push_back({c, std::move(r)});
    } else {
      auto op = std::make_unique<Op>();
      op->tid = ++last_tid_;
      op->pool = pool;
      op->oid = std::move(oid);
      op->nspace = std::move(nspace);
      op->write = std::any_of(ops.begin(), ops.end(), [](const OsdOp& o) { return (o.op & op::kModeWrite) != 0; });
      if (op->write) op->mtime = wall_now();
      op->ops = std::move(ops);
      op->completion = c;
      op->submitted = Clock::now();
      Op& ref = *op;
      ops_.emplace(op->tid, std::move(op));
      send_op_locked(ref, done);
    }
  }
  run(done);
  return c;
}

void Objecter::finish_locked(std::uint64_t tid, OpResult r, std::vector<Done>& done) {
  const auto it = ops_.find(tid);
  if (it == ops_.end()) return;
  r.attempts = it->second->attempts;
  if (r.pg == osdmap::PgId{}) r.pg = it->second->pg;
  if (r.osd < 0) r.osd = it->second->osd;
  done.push_back({it->second->completion, std::move(r)});
  ops_.erase(it);
}

// Recomputes the op's target on the current map; true if it moved (another
// PG, primary or acting set, or none before).
bool Objecter::calc_target_locked(Op& op) {
  const auto m = osdmap::map_object(*map_, op.pool, op.oid, op.nspace);
  if (!m) return false;
  std::int8_t shard = -1;
  const osdmap::Pool* pool = map_->pool(op.pool);
  if (pool && pool->type == osdmap::kPoolErasure && m->pg.acting_primary >= 0) {
    const auto& a = m->pg.acting;
    const auto pos = std::find(a.begin(), a.end(), m->pg.acting_primary);
    if (pos != a.end()) shard = static_cast<std::int8_t>(pos - a.begin());
  }
  std::int32_t primary = m->pg.acting_primary;
  if (primary >= 0 && !map_->is_up(primary)) primary = -1;
  const bool changed = op.target_epoch == 0 || op.pg != m->pg.pg || op.osd != primary ||
                       op.acting != m->pg.acting || op.shard != shard;
  op.pg = m->pg.pg;
  op.shard = shard;
  op.hash = m->raw_hash;
  op.osd = primary;
  op.acting = m->pg.acting;
  op.target_epoch = map_->epoch;
  return changed;
}

// Why the map holds `op` back (Ceph's Objecter: target.paused), or null.
const char* Objecter::paused_by_locked(const Op& op) const {
  if (!op.write) return (map_->flags & osdmap::kMapFlagPauseRd) ? "the cluster's pauserd flag is set" : nullptr;
  if (map_->flags & osdmap::kMapFlagPauseWr) return "the cluster's pausewr flag is set";
  if (map_->flags & osdmap::kMapFlagFull) return "the cluster's full flag is set";
  const osdmap::Pool* p = map_->pool(op.pool);
  if (p != nullptr && (p->flags & osdmap::kPoolFlagFull))
    return (p->flags & osdmap::kPoolFlagFullQuota) ? "the pool is at its quota (full_quota)" : "the pool is full";
  return nullptr;
}

void Objecter::send_op_locked(Op& op, std::vector<Done>& done) {
  op.in_flight = false;
  op.blocked = false;
  op.resend_at = {};
  if (!map_) {
    op.note = "no OSDMap yet";
    return;
  }
  if (!map_->pool(op.pool)) {
    OpResult r;
    r.result = -ENOENT;
    r.message = fmt::format("pool {} does not exist in osdmap epoch {}: {}", op.pool, map_->epoch,
                            errno_text(-ENOENT));
    finish_locked(op.tid, std::move(r), done);
    return;
  }
  if (const char* why = paused_by_locked(op)) {
    op.note = fmt::format("paused: {} in osdmap epoch {} (the op goes out when a map clears it)", why,
                          map_->epoch);
    want_map_locked("an op is paused by the map's flags");
    return;
  }
  calc_target_locked(op);
  if (op.osd < 0) {
    op.note = fmt::format("pg {} has no up primary in osdmap epoch {} (acting [{}])", op.pg.to_string(),
                          map_->epoch, fmt::join(op.acting, ","));
    want_map_locked("an op has no up primary");
    return;
  }
  Session* s = session_locked(op.osd);
  if (s == nullptr || !s->con) {
    op.note = fmt::format("waiting to reconnect to osd.{}{}", op.osd,
                          s && !s->last_error.empty() ? " (" + s->last_error + ")" : std::string());
    op.resend_at = s ? s->reconnect_at : Clock::now() + opts_.reconnect_max;
    return;
  }
  if (blocked_locked(*s, op)) {
    op.blocked = true;
    op.note = fmt::format("held by osd.{}'s backoff on pg {}", op.osd, op.pg.to_string());
    return;
  }
  OsdOpRequest req;
  req.pgid = op.pg;
  req.shard = op.shard;
  req.hash = op.hash;
  req.epoch = map_->epoch;
  req.flags = flag::known_redir | flag::ondisk | (op.write ? flag::write : flag::read) |
              (op.attempts > 0 ? flag::retry : 0);
  req.mtime = op.mtime;
  req.pool = op.pool;
  req.nspace = op.nspace;
  req.oid = op.oid;
  req.ops = op.ops;
  req.retry_attempt = op.attempts;
  req.features = msgr_->get_policy(entity_type::osd).features_supported;
  auto m = make_message<Message>(kMsgOsdOp, kOsdOpVersion, kOsdOpCompat);
  m->set_tid(op.tid);
  m->set_priority(kOsdOpPriority);
  m->front() = encode_osd_op(req, m->data());
  if (op.attempts > 0) ++stats_.resends;
  ++op.attempts;
  ++stats_.ops_sent;
  op.in_flight = true;
  op.last_sent = Clock::now();
  op.note = fmt::format("sent to osd.{}", op.osd);
  SIPHON_LOG(tools, 10, "objecter: tid {} {} to osd.{} pg {} epoch {} attempt {}", op.tid, op.oid, op.osd,
             op.pg.to_string(), map_->epoch, op.attempts);
  s->con->send_message(std::move(m));  // a failure shows as the session's reset
}

Objecter::Session* Objecter::session_locked(std::int32_t osd) {
  auto& slot = sessions_[osd];
  if (!slot) {
    slot = std::make_unique<Session>();
    slot->osd = osd;
  }
  Session& s = *slot;
  if (s.con) return &s;
  if (Clock::now() < s.reconnect_at) return &s;
  const std::size_t i = static_cast<std::size_t>(osd);
  s.addrs = i < map_->client_addrs.size() ? msgr2_addrs(map_->client_addrs[i]) : EntityAddrVec{};
  if (s.addrs.empty()) {
    s.last_error = fmt::format("osd.{} has no msgr2 address in osdmap epoch {}", osd, map_->epoch);
    s.reconnect_at = Clock::now() + opts_.reconnect_max;
    return &s;
  }
  s.con = msgr_->connect_to(entity_type::osd, s.addrs);
  s.backoffs.clear();
  return &s;
}

bool Objecter::blocked_locked(const Session& s, const Op& op) const {
  HObject h;
  h.oid = op.oid;
  h.nspace = op.nspace;
  h.snap = kNoSnap;
  h.hash = op.hash;
  h.pool = op.pool;
  for (const auto& b : s.backoffs) {
    if (b.pg != op.pg) continue;
    const int lo = compare_bitwise(b.begin, h);
    if (compare_bitwise(b.begin, b.end) == 0 ? lo == 0 : lo <= 0 && compare_bitwise(h, b.end) < 0) return true;
  }
  return false;
}

// Drops the session (its backoffs with it) and resends its ops, after the
// session's reconnect delay when `delay` (the peer refused or faulted).
void Objecter::close_session_locked(Session& s, const std::string& why, bool delay) {
  if (s.con) s.con->mark_down();
  s.con.reset();
  s.backoffs.clear();
  s.last_error = why;
  ++stats_.session_resets;
  if (delay) {
    s.delay = s.delay.count() == 0 ? opts_.reconnect_delay : std::min(s.delay * 2, opts_.reconnect_max);
    s.reconnect_at = Clock::now() + s.delay;
  } else {
    s.delay = {};
    s.reconnect_at = {};
  }
  for (auto& [tid, op] : ops_) {
    if (op->osd != s.osd || (!op->in_flight && !op->blocked)) continue;
    op->in_flight = false;
    op->blocked = false;
    op->resend_at = delay ? s.reconnect_at : Clock::now();  // the tick sends it (never from inside a callback's loop)
    op->note = fmt::format("osd.{} session reset ({})", s.osd, why);
  }
}

void Objecter::session_failed(const ConnectionRef& con, const std::string& why) {
  std::lock_guard l(mtx_);
  for (auto& [osd, s] : sessions_) {
    if (s->con != con) continue;
    SIPHON_LOG(tools, 1, "objecter: closing the session to osd.{}: {}", osd, why);
    close_session_locked(*s, why, true);
    return;
  }
}

void Objecter::want_map_locked(const char* why) {
  const auto now = Clock::now();
  if (!map_ || now - last_map_request_ < std::chrono::seconds(1)) return;
  last_map_request_ = now;
  SIPHON_LOG(tools, 5, "objecter: asking the mon for maps after epoch {}: {}", map_->epoch, why);
  mc_.subscribe("osdmap", map_->epoch + 1, mon::MMonSubscribe::kOneTime);
}

// --- the map --------------------------------------------------------------

void Objecter::apply_maps_locked(const Message& m, const ConnectionRef& from, std::vector<Done>& done) {
  const std::string who = from ? fmt::format("osd.{}", from->get_peer_name().num) : std::string("the mon");
  auto fail = [&](const std::string& why) {
    ++stats_.decode_errors;
    map_error_ = why;
    cv_.notify_all();
    if (from) {
      for (auto& [osd, s] : sessions_)
        if (s->con == from) close_session_locked(*s, why, true);
    } else {
      SIPHON_LOG(tools, 1, "objecter: {}", why);
    }
  };
  auto mm = osdmap::decode_mosdmap(m.front());
  if (!mm) return fail(fmt::format("MOSDMap from {} does not decode: {}", who, mm.error().message()));
  if (map_ && mm->fsid != map_->fsid) return;
  const std::uint32_t before = map_ ? map_->epoch : 0;
  if (!map_) {
    if (mm->maps.empty()) {
      mc_.subscribe("osdmap", 0, mon::MMonSubscribe::kOneTime);  // we need a full map first
      return;
    }
    auto full = osdmap::decode_osdmap(mm->maps.rbegin()->second);
    if (!full)
      return fail(fmt::format("OSDMap epoch {} from {} does not decode: {}", mm->maps.rbegin()->first, who,
                              full.error().message()));
    map_ = std::move(*full);
  } else {
    for (std::uint32_t e = map_->epoch + 1; e <= mm->last(); ++e) {
      if (auto inc = mm->incremental_maps.find(e); inc != mm->incremental_maps.end()) {
        auto decoded = osdmap::decode_incremental(inc->second);
        if (!decoded)
          return fail(fmt::format("incremental OSDMap epoch {} from {} does not decode: {}", e, who,
                                  decoded.error().message()));
        if (std::string why = osdmap::apply_incremental(*map_, *decoded); !why.empty())
          return fail(fmt::format("incremental OSDMap epoch {} from {} does not apply: {}", e, who, why));
      } else if (auto full = mm->maps.find(e); full != mm->maps.end()) {
        auto decoded = osdmap::decode_osdmap(full->second);
        if (!decoded)
          return fail(fmt::format("OSDMap epoch {} from {} does not decode: {}", e, who, decoded.error().message()));
        map_ = std::move(*decoded);
      } else if (e >= mm->oldest_map || mm->maps.empty()) {
        mc_.subscribe("osdmap", e, mon::MMonSubscribe::kOneTime);  // a gap: ask for it
        break;
      } else {
        // The sender trimmed the gap: jump to its newest full map.
        auto decoded = osdmap::decode_osdmap(mm->maps.rbegin()->second);
        if (!decoded)
          return fail(fmt::format("OSDMap epoch {} from {} does not decode: {}", mm->maps.rbegin()->first, who,
                                  decoded.error().message()));
        map_ = std::move(*decoded);
        e = map_->epoch;
      }
    }
  }
  if (map_->epoch == before) return;
  stats_.map_epochs += map_->epoch - before;
  map_error_.clear();
  SIPHON_LOG(tools, 5, "objecter: osdmap epoch {} (from {})", map_->epoch, who);
  // Sessions to OSDs that went down or moved: closed (their ops move on).
  for (auto& [osd, s] : sessions_) {
    if (!s->con) continue;
    const std::size_t i = static_cast<std::size_t>(osd);
    const bool moved = i >= map_->client_addrs.size() || msgr2_addrs(map_->client_addrs[i]) != s->addrs;
    if (!map_->is_up(osd) || moved)
      close_session_locked(*s, fmt::format("osd.{} is {} in osdmap epoch {}", osd,
                                            map_->is_up(osd) ? "at a new address" : "down", map_->epoch),
                           false);
  }
  scan_ops_locked(done);
  cv_.notify_all();
}

// After a new map: every op whose target moved, or that waits for a
// target, is (re)sent (rados-client.md §4.3).
void Objecter::scan_ops_locked(std::vector<Done>& done) {
  std::vector<std::uint64_t> resend;
  for (auto& [tid, op] : ops_) {
    if (!map_->pool(op->pool)) {
      resend.push_back(tid);  // send_op_locked fails it with ENOENT
      continue;
    }
    const bool was_waiting = !op->in_flight && !op->blocked;
    if (calc_target_locked(*op) || was_waiting) resend.push_back(tid);
  }
  for (const std::uint64_t tid : resend)
    if (auto it = ops_.find(tid); it != ops_.end()) send_op_locked(*it->second, done);
}

// --- dispatch -------------------------------------------------------------

// Replies and backoffs are handled on the worker that read them (the
// session's state is under mtx_, which every path takes), so an op's
// completion, and the next op its callback submits, cost no thread switch.
// Maps stay on the dispatch thread: decoding and applying one is long work
// that should not hold up a worker's other connections.
bool Objecter::ms_can_fast_dispatch(const Message& m) const {
  return m.get_type() == kMsgOsdOpReply || m.get_type() == kMsgOsdBackoff;
}

bool Objecter::ms_dispatch(MessageRef m) {
  std::vector<Done> done;
  switch (m->get_type()) {
    case osdmap::kMsgOsdMap: {
      std::lock_guard l(mtx_);
      if (!stopping_) apply_maps_locked(*m, m->get_connection(), done);
      break;
    }
    case kMsgOsdOpReply:
      handle_reply(*m, done);
      break;
    case kMsgOsdBackoff:
      handle_backoff(*m);
      break;
    default:
      return false;
  }
  run(done);
  return true;
}

void Objecter::handle_reply(const Message& m, std::vector<Done>& done) {
  std::lock_guard l(mtx_);
  const auto it = ops_.find(m.get_tid());
  if (it == ops_.end()) return;  // late (timed out, or answered on an earlier attempt)
  Op& op = *it->second;
  const auto s = sessions_.find(op.osd);
  if (s == sessions_.end() || s->second->con != m.get_connection() || !op.in_flight) return;
  auto reply = decode_osd_op_reply(m.front(), m.data(), m.get_compat_version());
  if (!reply) {
    ++stats_.decode_errors;
    const std::string why = "MOSDOpReply does not decode: " + reply.error().message();
    SIPHON_LOG(tools, 1, "objecter: closing the session to osd.{}: {}", op.osd, why);
    close_session_locked(*s->second, why, true);
    return;
  }
  if (reply->retry_attempt != op.attempts - 1) return;  // "ignoring reply from attempt ..."
  if (reply->result == -EAGAIN) {
    send_op_locked(op, done);
    return;
  }
  // Success counts only when the OSD says it committed (ONDISK); an early
  // ack of a write is followed by the commit (Pacific sends none).
  if (op.write && reply->result >= 0 && !(reply->flags & flag::ondisk)) return;
  OpResult r;
  r.result = reply->result;
  if (r.result < 0)
    r.message = fmt::format("osd.{} pg {}: {}", op.osd, reply->pgid.to_string(), errno_text(r.result));
  r.ops = std::move(reply->ops);
  r.user_version = reply->user_version;
  r.epoch = reply->epoch;
  r.osd = op.osd;
  r.pg = op.pg;
  finish_locked(op.tid, std::move(r), done);
}

void Objecter::handle_backoff(const Message& m) {
  std::vector<Done> done;
  {
    std::lock_guard l(mtx_);
    Session* s = nullptr;
    for (auto& [osd, sp] : sessions_)
      if (sp->con && sp->con == m.get_connection()) s = sp.get();
    if (!s) return;
    auto b = decode_osd_backoff(m.front());
    if (!b) {
      ++stats_.decode_errors;
      close_session_locked(*s, "MOSDBackoff does not decode: " + b.error().message(), true);
      return;
    }
    if (b->op == kBackoffBlock) {
      ++stats_.backoffs;
      s->backoffs.push_back({b->pgid, b->id, b->begin, b->end});
      OsdBackoff ack = *b;
      ack.op = kBackoffAckBlock;
      auto am = make_message<Message>(kMsgOsdBackoff, kOsdBackoffVersion, kOsdBackoffVersion);
      am->set_priority(msg_priority::normal);
      am->front() = encode_osd_backoff(ack);
      s->con->send_message(std::move(am));
      SIPHON_LOG(tools, 5, "objecter: osd.{} blocks pg {} (backoff {}, epoch {})", s->osd, b->pgid.to_string(),
                 b->id, b->epoch);
      // The OSD dropped the ops it had in that range: they wait for UNBLOCK.
      for (auto& [tid, op] : ops_)
        if (op->osd == s->osd && op->in_flight && blocked_locked(*s, *op)) {
          op->in_flight = false;
          op->blocked = true;
          op->note = fmt::format("held by osd.{}'s backoff on pg {}", s->osd, op->pg.to_string());
        }
    } else if (b->op == kBackoffUnblock) {
      std::erase_if(s->backoffs, [&](const Session::Backoff& x) { return x.id == b->id && x.pg == b->pgid; });
      std::vector<std::uint64_t> resend;
      for (auto& [tid, op] : ops_)
        if (op->osd == s->osd && op->blocked && !blocked_locked(*s, *op)) resend.push_back(tid);
      for (const std::uint64_t tid : resend) send_op_locked(*ops_[tid], done);
    }
  }
  run(done);
}

void Objecter::ms_handle_connect(ConnectionRef con) {
  std::lock_guard l(mtx_);
  for (auto& [osd, s] : sessions_)
    if (s->con == con) s->delay = {};  // the reconnect backoff starts over
}

bool Objecter::ms_handle_reset(ConnectionRef con) {
  const auto f = con->last_fault();
  session_failed(con, f.reason.empty() ? std::string("connection reset") : f.reason);
  return true;
}

bool Objecter::ms_handle_refused(ConnectionRef con) {
  session_failed(con, "connection refused");
  std::lock_guard l(mtx_);
  want_map_locked("an OSD refused the connection");  // it may be down in a newer map
  return true;
}

// --- the timer ------------------------------------------------------------

void Objecter::tick_loop() {
  std::unique_lock l(mtx_);
  while (!stopping_) {
    cv_.wait_for(l, opts_.tick);
    if (stopping_) break;
    std::vector<Done> done;
    const auto now = Clock::now();
    std::vector<std::uint64_t> expired, resend;
    bool laggy = false;
    for (auto& [tid, op] : ops_) {
      if (opts_.op_timeout.count() > 0 && now - op->submitted >= opts_.op_timeout) {
        expired.push_back(tid);
      } else if (!op->in_flight && !op->blocked && op->resend_at != Clock::time_point{} && now >= op->resend_at) {
        resend.push_back(tid);
      } else if (op->in_flight && now - op->last_sent >= opts_.laggy_after) {
        laggy = true;
      } else if (!op->in_flight && !op->blocked) {
        laggy = true;  // homeless
      }
    }
    for (const std::uint64_t tid : expired) {
      Op& op = *ops_[tid];
      ++stats_.timeouts;
      OpResult r;
      r.result = -ETIMEDOUT;
      if (!op.in_flight && op.note.starts_with("paused: ")) {
        // Held back by the map, never sent: nothing for the OSD-side hint.
        r.message = fmt::format("not sent within {:.0f} s: {} of object '{}' in pool {} is {}",
                                seconds(opts_.op_timeout), op.write ? "a write" : "a read", op.oid, op.pool,
                                op.note);
        finish_locked(tid, std::move(r), done);
        continue;
      }
      r.message = fmt::format(
          "no reply within {:.0f} s for {} of object '{}' in pool {}: pg {}, {}, osdmap epoch {} "
          "(attempt {}); an OSD drops an op that is not for it without a word, so check `ceph osd map` "
          "for this object and the OSD's log",
          seconds(opts_.op_timeout), op.write ? "a write" : "a read", op.oid, op.pool, op.pg.to_string(),
          op.in_flight ? fmt::format("sent to osd.{}", op.osd) : op.note, op.target_epoch, op.attempts);
      finish_locked(tid, std::move(r), done);
    }
    for (const std::uint64_t tid : resend)
      if (auto it = ops_.find(tid); it != ops_.end()) send_op_locked(*it->second, done);
    if (laggy) want_map_locked("ops are laggy or have no target");
    if (!done.empty()) {
      l.unlock();
      run(done);
      l.lock();
    }
  }
}

}  // namespace siphon::rados
