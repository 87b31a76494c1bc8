// MonClient: hunting, reconnects, keepalives, and the request tables
// (design in mon_client.h).
#include "msgr/mon/mon_client.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <stdexcept>

#include <fmt/format.h>

#include "msgr/base/log.h"

namespace siphon::mon {

using Clock = std::chrono::steady_clock;

std::string_view to_string(MonError::Kind k) noexcept {
  switch (k) {
    case MonError::Kind::none: return "none";
    case MonError::Kind::no_msgr2_addr: return "no_msgr2_addr";
    case MonError::Kind::refused: return "refused";
    case MonError::Kind::timed_out: return "timed_out";
    case MonError::Kind::cephx_required: return "cephx_required";
    case MonError::Kind::auth_failed: return "auth_failed";
    case MonError::Kind::msgr1_only: return "msgr1_only";
    case MonError::Kind::protocol: return "protocol";
    case MonError::Kind::shut_down: return "shut_down";
  }
  return "?";
}

namespace {

std::string seconds_text(std::chrono::nanoseconds d) {
  return fmt::format("{:g} s", std::chrono::duration<double>(d).count());
}

std::uint64_t wall_ns() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
}

std::string local_hostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "";
  return buf;
}

bool contains(std::string_view text, std::string_view what) {
  return text.find(what) != std::string_view::npos;
}

}  // namespace

MonClient::MonClient(std::shared_ptr<transport::Stack> stack, MonClientOptions options)
    : stack_(std::move(stack)), opts_(std::move(options)) {
  if (!stack_) throw std::invalid_argument("MonClient: no transport stack given");
  if (opts_.hostname.empty()) opts_.hostname = local_hostname();
  for (const EntityAddrVec& v : opts_.mon_addrs) {
    for (const EntityAddr& a : v.addrs) {
      if (a.type == AddrType::msgr2 || a.type == AddrType::any) {
        EntityAddr t = a;
        t.type = AddrType::msgr2;  // CLIENT_IDENT's target must be typed MSGR2
        targets_.emplace_back(t);
        break;
      }
    }
  }
}

MonClient::~MonClient() { shutdown(); }

void MonClient::set_other_message_handler(std::function<void(const Message&)> fn) {
  std::lock_guard l(mtx_);
  other_handler_ = std::move(fn);
}

void MonClient::start_locked() {
  if (started_) return;
  started_ = true;
  if (targets_.empty()) {
    last_error_.kind = opts_.mon_addrs.empty() ? MonError::Kind::protocol : MonError::Kind::no_msgr2_addr;
    std::string all;
    for (const auto& v : opts_.mon_addrs) all += (all.empty() ? "" : ", ") + v.to_string();
    last_error_.message =
        opts_.mon_addrs.empty()
            ? "no monitor address given (set mon_host in the configuration, or -m ADDR)"
            : fmt::format("the monitor addresses ({}) are msgr1 (v1) only; Siphon speaks msgr2: "
                          "give the monitors' v2 addresses (port 3300 by default)",
                          all);
    fatal_ = true;
    return;
  }
  MessengerOptions mo = opts_.messenger;
  msgr_ = Messenger::create(stack_, {entity_type::client, -1}, mo);
  msgr_->set_policy(entity_type::mon, Policy::lossy_client());
  auto registry = std::make_shared<MessageRegistry>();
  register_mon_messages(*registry);
  msgr_->set_message_registry(registry);
  msgr_->set_auth_name(opts_.auth_name);
  msgr_->set_client_auth(opts_.auth);
  msgr_->add_dispatcher_tail(this);
  msgr_->start();
  want_dial_ = true;
  dial_at_ = Clock::now();
  hunter_ = std::thread([this] { hunter_loop(); });
}

void MonClient::dial_locked() {
  const EntityAddrVec& target = targets_[next_target_ % targets_.size()];
  ++next_target_;
  SIPHON_LOG(ms, 5, "mon client: connecting to {}", target.to_string());
  connected_ = false;
  session_has_map_ = false;
  con_ = msgr_->connect_to(entity_type::mon, target);
}

void MonClient::hunter_loop() {
  std::unique_lock l(mtx_);
  auto next_keepalive = Clock::now() + opts_.keepalive_interval;
  while (!stopping_) {
    const auto now = Clock::now();
    if (want_dial_ && now >= dial_at_) {
      want_dial_ = false;
      dial_locked();
      continue;
    }
    if (connected_ && con_) {
      maybe_renew_tickets_locked(now);
      maybe_fetch_rotating_locked(now);
      if (opts_.keepalive_interval.count() > 0 && now >= next_keepalive) {
        con_->send_keepalive();
        next_keepalive = now + opts_.keepalive_interval;
      }
      if (opts_.keepalive_timeout.count() > 0) {
        const std::uint64_t last = std::max(con_->last_keepalive_ack_ns(), connected_wall_ns_);
        const std::uint64_t w = wall_ns();
        if (w > last && std::chrono::nanoseconds(w - last) > opts_.keepalive_timeout) {
          ConnectionRef dead = con_;
          const std::string who = dead->get_peer_addrs().to_string();
          SIPHON_LOG(ms, 1, "mon client: {} did not answer keepalives for {}; hunting", who,
                     seconds_text(opts_.keepalive_timeout));
          session_ended_locked(dead, MonError{MonError::Kind::timed_out,
                                              fmt::format("{}: no keepalive reply for {}", who,
                                                          seconds_text(opts_.keepalive_timeout))});
          dead->mark_down();
          continue;
        }
      }
    } else {
      next_keepalive = now + opts_.keepalive_interval;
    }
    auto wake = now + std::chrono::milliseconds(250);
    if (want_dial_) wake = std::min(wake, dial_at_);
    if (connected_ && opts_.keepalive_interval.count() > 0) wake = std::min(wake, next_keepalive);
    cv_.wait_until(l, wake);
  }
}

MonError MonClient::classify(const Connection::FaultInfo& f, const EntityAddrVec& addrs) const {
  const std::string who = addrs.to_string();
  const std::error_code& c = f.code;
  if (c == make_error_code(errc::auth_failed))
    return {MonError::Kind::auth_failed, fmt::format("{}: {}", who, f.reason)};
  if (c == make_error_code(errc::auth_unsupported) && contains(f.reason, "cephx"))
    return {MonError::Kind::cephx_required, fmt::format("{}: {}", who, f.reason)};
  if (c == make_error_code(errc::bad_banner) && contains(f.reason, "msgr1"))
    return {MonError::Kind::msgr1_only,
            fmt::format("{} speaks msgr1 (the legacy v1 protocol) only; Siphon speaks msgr2: "
                        "give the monitor's v2 address",
                        who)};
  if (c == make_error_code(errc::connection_refused) || c == std::errc::connection_refused)
    return {MonError::Kind::refused, fmt::format("{}: connection refused", who)};
  if (c == make_error_code(errc::timed_out) || c == std::errc::timed_out)
    return {MonError::Kind::timed_out, fmt::format("{}: {}", who, f.reason)};
  if (!c) return {MonError::Kind::protocol, fmt::format("{}: the connection was closed", who)};
  return {MonError::Kind::protocol, fmt::format("{}: {} ({})", who, f.reason, c.message())};
}

void MonClient::session_ended_locked(const ConnectionRef& con, MonError why) {
  if (!con || con != con_) return;
  const bool was_ready = connected_;
  con_.reset();
  connected_ = false;
  session_has_map_ = false;
  ++resets_;
  last_error_ = std::move(why);
  fatal_ = last_error_.kind == MonError::Kind::cephx_required ||
           last_error_.kind == MonError::Kind::auth_failed ||
           last_error_.kind == MonError::Kind::msgr1_only;
  SIPHON_LOG(ms, 5, "mon client: session ended: {}", last_error_.message);
  if (!stopping_ && !fatal_) {
    if (was_ready) {
      backoff_ = std::chrono::nanoseconds{0};
    } else {
      backoff_ = backoff_.count() == 0 ? opts_.hunt_backoff
                                       : std::min(backoff_ * 2, opts_.hunt_backoff_max);
    }
    want_dial_ = true;
    dial_at_ = Clock::now() + backoff_;
  }
  cv_.notify_all();
}

// --- Dispatcher ---------------------------------------------------------------

void MonClient::ms_handle_connect(ConnectionRef con) {
  std::lock_guard l(mtx_);
  if (con != con_ || stopping_) return;
  connected_ = true;
  ++opened_;
  connected_at_ = Clock::now();
  connected_wall_ns_ = wall_ns();
  SIPHON_LOG(ms, 5, "mon client: session with {} ready", con->get_peer_addrs().to_string());
  // Always (re)subscribe to the monmap: its fsid goes into every command.
  auto sub = make_message<MMonSubscribe>();
  sub->what = subs_;
  sub->what["monmap"] = MMonSubscribe::Item{0, 0};
  sub->hostname = opts_.hostname;
  send_locked(sub);
  for (auto it = subs_.begin(); it != subs_.end();) {
    it = (it->second.flags & MMonSubscribe::kOneTime) ? subs_.erase(it) : std::next(it);
  }
  cv_.notify_all();
}

bool MonClient::ms_handle_reset(ConnectionRef con) {
  std::lock_guard l(mtx_);
  if (con == con_) session_ended_locked(con, classify(con->last_fault(), con->get_peer_addrs()));
  return true;
}

bool MonClient::ms_handle_refused(ConnectionRef) {
  return true;  // the reset that follows on a lossy connection ends the attempt
}

void MonClient::ms_handle_remote_reset(ConnectionRef con) {
  std::lock_guard l(mtx_);
  if (con == con_) session_ended_locked(con, MonError{MonError::Kind::protocol, "the monitor reset the session"});
}

bool MonClient::ms_dispatch(MessageRef m) {
  std::unique_lock l(mtx_);
  switch (m->get_type()) {
    case MMonCommandAck::kType: {
      const auto& ack = static_cast<const MMonCommandAck&>(*m);
      auto it = commands_.find(m->get_tid());
      if (it != commands_.end() && !it->second.done) {
        it->second.done = true;
        it->second.result.r = ack.r;
        it->second.result.rs = ack.rs;
        it->second.result.outbl = ack.data();
      } else {
        SIPHON_LOG(ms, 5, "mon client: ack for unknown command tid {}", m->get_tid());
      }
      break;
    }
    case MMonGetVersionReply::kType: {
      const auto& r = static_cast<const MMonGetVersionReply&>(*m);
      auto it = versions_.find(r.handle);
      if (it != versions_.end() && !it->second.done) {
        it->second.done = true;
        it->second.result.version = r.version;
        it->second.result.oldest_version = r.oldest_version;
      }
      break;
    }
    case MMonMap::kType: {
      const auto& mm = static_cast<const MMonMap&>(*m);
      monmap_ = mm.monmap;
      SIPHON_LOG(ms, 5, "mon client: monmap e{} with {} mons", mm.monmap.epoch, mm.monmap.size());
      if (m->get_connection() == con_ && connected_ && !session_has_map_) {
        session_has_map_ = true;
        resend_locked();
      }
      break;
    }
    case MPing::kType:
      pong_ = static_cast<const MPing&>(*m).json;
      break;
    case MAuthReply::kType:
      handle_auth_reply_locked(static_cast<const MAuthReply&>(*m));
      break;
    default: {
      // Not for us (config, mgrmap, osdmap of a subscription, unknown types):
      // offered to the application's handler, then dropped.
      auto handler = other_handler_;
      l.unlock();
      const std::uint16_t t = m->get_type();
      const bool known = t == kMsgConfig || t == kMsgMgrMap || t == kMsgOsdMap ||
                         t == kMsgMonSubscribeAck || t == kMsgMonGetMap || t == kMsgMonSubscribe ||
                         t == kMsgMonGetVersion || t == kMsgMonCommand;
      SIPHON_LOG(ms, known ? 10 : 1, "mon client: dropping {}message type {} ({} bytes) from {}",
                 known ? "" : "unknown ", t, m->payload_length(), m->get_source().to_string());
      if (handler) handler(*m);
      return true;
    }
  }
  cv_.notify_all();
  return true;
}

// --- service ticket renewal ---------------------------------------------------------

// Once three quarters of a service ticket's validity have passed, ask the
// mon for fresh ones with the AUTH ticket (CEPHX_GET_PRINCIPAL_SESSION_KEY),
// as Ceph's MonClient does, so OSD and MGR sessions opened later present a
// ticket the services still accept.
void MonClient::maybe_renew_tickets_locked(Clock::time_point now) {
  const auto& store = opts_.auth.tickets;
  if (!store || now < renew_not_before_ || con_->auth_info().method != proto::kAuthMethodCephx) return;
  const std::uint32_t due = store->due();
  if (due == 0) return;
  const auto auth_ticket = store->get(auth::kServiceAuth);
  if (!auth_ticket || auth_ticket->ticket.ticket_blob.empty()) return;  // a Siphon daemon's key-based session
  std::string why;
  const std::uint32_t keys = (opts_.auth.want_keys & ~auth::kServiceAuth) | due;
  auto payload = auth::principal_session_key_request(auth_ticket->global_id, auth_ticket->ticket, auth::random_u64(),
                                                     keys, why);
  renew_not_before_ = now + std::chrono::seconds(5);  // one request at a time; again if unanswered
  if (!payload) {
    SIPHON_LOG(ms, 1, "mon client: cannot build the ticket renewal request: {}", why);
    return;
  }
  auto m = make_message<MAuth>();
  m->auth_payload = BufferList::copy_of(payload->data(), payload->size());
  m->monmap_epoch = monmap_ ? monmap_->epoch : 0;
  SIPHON_LOG(ms, 5, "mon client: renewing service tickets {:#x}", keys);
  send_locked(m);
}

void MonClient::handle_auth_reply_locked(const MAuthReply& r) {
  // The reply's request type says what it answers (cephx.md §3.8).
  auth::Bytes bl(r.result_bl.length());
  r.result_bl.copy_out(0, bl.size(), bl.data());
  if (bl.size() >= 2 && (bl[0] | (bl[1] << 8)) == auth::kCephxGetRotatingKey) {
    handle_rotating_reply_locked(r, bl);
    return;
  }
  const auto& store = opts_.auth.tickets;
  const auto auth_ticket = store ? store->get(auth::kServiceAuth) : std::nullopt;
  if (!auth_ticket) return;
  std::string why;
  std::optional<std::vector<auth::ServiceTicket>> tickets;
  if (r.result != 0) {
    why = fmt::format("result {} ({})", r.result, r.result_msg);
  } else {
    tickets = auth::decode_principal_session_key_reply(auth_ticket->ticket.session_key, bl, why);
  }
  if (!tickets) {
    SIPHON_LOG(ms, 1, "mon client: the mon refused or garbled our service ticket renewal: {}; retrying", why);
    return;
  }
  store->update(auth_ticket->global_id, *tickets);
  renew_not_before_ = {};
  ++renewals_;
  SIPHON_LOG(ms, 5, "mon client: renewed {} service tickets", tickets->size());
}

// --- rotating service keys (a daemon's) -----------------------------------------

void MonClient::maybe_fetch_rotating_locked(Clock::time_point now) {
  const auto& keys = opts_.rotating;
  if (!keys || con_->auth_info().method != proto::kAuthMethodCephx || !keys->refresh_due(now)) return;
  const auth::Bytes payload = auth::rotating_key_request();
  auto m = make_message<MAuth>();
  m->auth_payload = BufferList::copy_of(payload.data(), payload.size());
  m->monmap_epoch = monmap_ ? monmap_->epoch : 0;
  SIPHON_LOG(ms, 5, "mon client: fetching the rotating {} keys", proto::entity_type_name(keys->service_id()));
  send_locked(m);
}

void MonClient::handle_rotating_reply_locked(const MAuthReply& r, const auth::Bytes& bl) {
  const auto& keys = opts_.rotating;
  if (!keys) return;
  std::string why;
  std::optional<auth::RotatingSecrets> s;
  if (r.result != 0)
    why = fmt::format("result {}{}{}", r.result, r.result_msg.empty() ? "" : ": ", r.result_msg);
  else
    s = auth::decode_rotating_key_reply(auth::KeyRef(opts_.auth.key_type, opts_.auth.secret), bl, why);
  if (!s) {
    rotating_error_ = fmt::format("the mon refused or garbled the rotating keys of {}: {} (only osd, mds and mgr "
                                  "entities have rotating keys)",
                                  opts_.auth_name.to_string(), why);
    SIPHON_LOG(ms, 1, "mon client: {}; retrying", rotating_error_);
    return;
  }
  // Logged at level 1 when the mon rotated (the newest id changed): once
  // per auth_service_ticket_ttl.
  const std::uint64_t before = keys->get(0).newest;
  keys->update(*s);
  rotating_error_.clear();
  ++rotating_fetches_;
  std::string ids;
  for (const auto& k : s->secrets) ids += (ids.empty() ? "" : ",") + std::to_string(k.secret_id);
  SIPHON_LOG(ms, keys->get(0).newest != before ? 1 : 5, "mon client: {} rotating {} keys from the mon (ids {})",
             s->secrets.size(), proto::entity_type_name(keys->service_id()), ids);
}

std::uint64_t MonClient::rotating_fetches() const {
  std::lock_guard l(mtx_);
  return rotating_fetches_;
}

std::string MonClient::rotating_error() const {
  std::lock_guard l(mtx_);
  return rotating_error_;
}

bool MonClient::wait_for_rotating(std::chrono::nanoseconds timeout) {
  std::unique_lock l(mtx_);
  return wait_until(l, Clock::now() + std::chrono::duration_cast<Clock::duration>(timeout),
                    [&] { return rotating_fetches_ > 0; });
}

// --- requests -------------------------------------------------------------------

void MonClient::send_locked(MessageRef m) {
  if (!con_ || !connected_) return;
  if (const std::error_code ec = con_->send_message(std::move(m)); ec)
    SIPHON_LOG(ms, 5, "mon client: send failed: {}", ec.message());
}

void MonClient::resend_locked() {
  if (!connected_ || !session_has_map_) return;
  for (auto& [tid, c] : commands_) {
    if (c.done) continue;
    auto m = make_message<MMonCommand>();
    m->set_tid(tid);
    m->fsid = monmap_ ? monmap_->fsid : proto::Uuid{};
    m->cmd = c.cmd;
    m->set_data(c.inbl);
    send_locked(m);
  }
  for (auto& [handle, v] : versions_) {
    if (v.done) continue;
    auto m = make_message<MMonGetVersion>();
    m->handle = handle;
    m->what = v.what;
    send_locked(m);
  }
}

template <class Pred>
bool MonClient::wait_until(std::unique_lock<std::mutex>& l, Clock::time_point deadline, Pred pred) {
  return cv_.wait_until(l, deadline, [&] { return pred() || stopping_ || fatal_; }) && pred();
}

MonError MonClient::connect(std::chrono::nanoseconds timeout) {
  std::unique_lock l(mtx_);
  start_locked();
  const auto deadline = Clock::now() + timeout;
  if (wait_until(l, deadline, [&] { return connected_ && session_has_map_; })) return {};
  if (stopping_) return {MonError::Kind::shut_down, "the mon client was shut down"};
  if (fatal_) return last_error_;
  if (last_error_)
    return {last_error_.kind, fmt::format("could not connect to a monitor within {}: {}",
                                          seconds_text(timeout), last_error_.message)};
  std::string all;
  for (const auto& v : targets_) all += (all.empty() ? "" : ", ") + v.to_string();
  return {MonError::Kind::timed_out,
          fmt::format("no monitor answered within {} (tried {})", seconds_text(timeout), all)};
}

bool MonClient::is_connected() const {
  std::lock_guard l(mtx_);
  return connected_;
}

namespace {
MonError no_reply(const char* what, std::chrono::nanoseconds timeout, bool connected,
                  const MonError& last) {
  if (!connected && last)
    return {last.kind, fmt::format("no {} reply within {}: {}", what, seconds_text(timeout), last.message)};
  return {MonError::Kind::timed_out, fmt::format("no {} reply within {}", what, seconds_text(timeout))};
}
}  // namespace

CommandResult MonClient::command(std::vector<std::string> cmd, BufferList inbl,
                                 std::chrono::nanoseconds timeout) {
  std::unique_lock l(mtx_);
  start_locked();
  const std::uint64_t tid = ++last_tid_;
  PendingCommand& p = commands_[tid];
  p.cmd = std::move(cmd);
  p.inbl = std::move(inbl);
  if (connected_ && session_has_map_) {
    auto m = make_message<MMonCommand>();
    m->set_tid(tid);
    m->fsid = monmap_ ? monmap_->fsid : proto::Uuid{};
    m->cmd = p.cmd;
    m->set_data(p.inbl);
    send_locked(m);
  }
  const bool done = wait_until(l, Clock::now() + timeout, [&] { return commands_[tid].done; });
  CommandResult r = std::move(commands_[tid].result);
  commands_.erase(tid);
  if (!done) {
    r.error = fatal_ ? last_error_
              : stopping_ ? MonError{MonError::Kind::shut_down, "the mon client was shut down"}
                          : no_reply("command", timeout, connected_, last_error_);
    r.r = -ETIMEDOUT;
  }
  return r;
}

VersionResult MonClient::get_version(const std::string& what, std::chrono::nanoseconds timeout) {
  std::unique_lock l(mtx_);
  start_locked();
  const std::uint64_t handle = ++last_tid_;
  versions_[handle].what = what;
  if (connected_ && session_has_map_) {
    auto m = make_message<MMonGetVersion>();
    m->handle = handle;
    m->what = what;
    send_locked(m);
  }
  const bool done = wait_until(l, Clock::now() + timeout, [&] { return versions_[handle].done; });
  VersionResult r = versions_[handle].result;
  versions_.erase(handle);
  if (!done) {
    r.error = fatal_ ? last_error_ : no_reply("version", timeout, connected_, last_error_);
    if (!r.error.message.empty() && connected_)
      r.error.message += fmt::format(" (a monitor does not answer for a map it does not know: '{}')", what);
  }
  return r;
}

void MonClient::subscribe(const std::string& what, std::uint64_t start, std::uint8_t flags) {
  std::unique_lock l(mtx_);
  start_locked();
  subs_[what] = MMonSubscribe::Item{start, flags};
  if (connected_) {
    auto sub = make_message<MMonSubscribe>();
    sub->what[what] = subs_[what];
    sub->hostname = opts_.hostname;
    send_locked(sub);
    if (flags & MMonSubscribe::kOneTime) subs_.erase(what);
  }
}

std::optional<MonMap> MonClient::wait_for_monmap(std::uint32_t min_epoch, std::chrono::nanoseconds timeout) {
  std::unique_lock l(mtx_);
  start_locked();
  wait_until(l, Clock::now() + timeout, [&] { return monmap_ && monmap_->epoch >= min_epoch; });
  if (monmap_ && monmap_->epoch >= min_epoch) return monmap_;
  return std::nullopt;
}

std::optional<MonMap> MonClient::monmap() const {
  std::lock_guard l(mtx_);
  return monmap_;
}

std::optional<std::string> MonClient::ping(std::chrono::nanoseconds timeout) {
  std::unique_lock l(mtx_);
  start_locked();
  pong_.reset();
  send_locked(make_message<MPing>());
  wait_until(l, Clock::now() + timeout, [&] { return pong_.has_value(); });
  return pong_;
}

void MonClient::shutdown() {
  {
    std::lock_guard l(mtx_);
    if (stopping_) return;
    stopping_ = true;
    cv_.notify_all();
  }
  if (hunter_.joinable()) hunter_.join();
  if (msgr_) {
    msgr_->shutdown();
    msgr_->wait();
  }
}

ConnectionRef MonClient::connection() const {
  std::lock_guard l(mtx_);
  return connected_ ? con_ : ConnectionRef{};
}

std::uint64_t MonClient::session_resets() const {
  std::lock_guard l(mtx_);
  return resets_;
}

std::uint64_t MonClient::sessions_opened() const {
  std::lock_guard l(mtx_);
  return opened_;
}

std::uint64_t MonClient::ticket_renewals() const {
  std::lock_guard l(mtx_);
  return renewals_;
}

MonError MonClient::last_error() const {
  std::lock_guard l(mtx_);
  return last_error_;
}

std::uint64_t MonClient::global_id() const {
  std::lock_guard l(mtx_);
  return connected_ && con_ ? con_->get_global_id() : 0;
}

}  // namespace siphon::mon
