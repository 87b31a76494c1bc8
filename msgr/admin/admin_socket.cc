// AdminSocket: the command table and the request path (execute). The socket
// server itself is in admin_server.cc.
#include <cerrno>
#include <exception>
#include <stdexcept>

#include <fmt/format.h>

#include "msgr/admin/admin_impl.h"
#include "msgr/admin/protocol.h"

namespace siphon::admin {

AdminSocket::AdminSocket() : AdminSocket(Options{}) {}

AdminSocket::AdminSocket(Options opts) : impl_(std::make_shared<Impl>(opts)) {
  // Built-in commands. Hidden ones (empty help) are listed by
  // get_command_descriptions but not by help, as in Ceph.
  Impl* impl = impl_.get();
  register_command("get_command_descriptions", "list available commands",
                   [impl](const Request&) { return Reply::json(impl->descriptions()); });
  register_command("help", "list available commands", [impl](const Request&) { return Reply::json(impl->help()); });
  // The ping of ceph-exporter and Ceph's AdminSocketClient: a 1-byte "2"
  // (CEPH_ADMIN_SOCK_VERSION).
  register_command("0", "", [](const Request&) { return Reply::bytes("2"); });
  // Ceph's hidden aliases of perf dump / perf schema (and the legacy codes 1
  // and 2): whatever those commands are once registered.
  for (const auto& [alias, target] : {std::pair{"1", "perf dump"}, std::pair{"2", "perf schema"},
                                      std::pair{"perfcounters_dump", "perf dump"},
                                      std::pair{"perfcounters_schema", "perf schema"}}) {
    const std::string to = target;
    register_command(alias, "", [impl, to](const Request& r) { return impl->run_as(to, r); });
  }
}

AdminSocket::~AdminSocket() { stop(); }

bool AdminSocket::register_command(std::string_view signature, std::string help, Handler handler,
                                   std::string& error) {
  Signature sig;
  if (!Signature::parse(signature, sig, error)) {
    error = fmt::format("admin command '{}': {}", signature, error);
    return false;
  }
  std::lock_guard lk(impl_->cmd_mu);
  if (impl_->commands.count(sig.prefix) != 0) {
    error = fmt::format("admin command '{}' is already registered", sig.prefix);
    return false;
  }
  const std::string prefix = sig.prefix;
  impl_->commands.emplace(prefix, Command{std::move(sig), std::move(help), std::move(handler)});
  return true;
}

void AdminSocket::register_command(std::string_view signature, std::string help, Handler handler) {
  std::string error;
  if (!register_command(signature, std::move(help), std::move(handler), error)) throw std::logic_error(error);
}

void AdminSocket::unregister_command(std::string_view prefix) {
  std::lock_guard lk(impl_->cmd_mu);
  if (const auto it = impl_->commands.find(prefix); it != impl_->commands.end()) impl_->commands.erase(it);
}

std::string AdminSocket::execute(std::string_view request) { return impl_->execute(request); }

AdminSocket::Stats AdminSocket::stats() const {
  Stats s;
  s.served = impl_->served.load();
  s.dropped_oversize = impl_->dropped_oversize.load();
  s.dropped_timeout = impl_->dropped_timeout.load();
  s.refused_busy = impl_->refused_busy.load();
  return s;
}

const std::string& AdminSocket::path() const noexcept { return impl_->path; }

// --- Impl: the request path ---------------------------------------------------------

nlohmann::ordered_json AdminSocket::Impl::descriptions() {
  std::lock_guard lk(cmd_mu);
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  int n = 0;
  // std::map: prefixes in sorted order, numbered from cmd000 as Ceph does.
  for (const auto& [prefix, c] : commands)
    out[fmt::format("cmd{:03}", n++)] = {{"sig", signature_json(c.sig)}, {"help", c.help}};
  return out;
}

nlohmann::ordered_json AdminSocket::Impl::help() {
  std::lock_guard lk(cmd_mu);
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const auto& [prefix, c] : commands)
    if (!c.help.empty()) out[prefix] = c.help;
  return out;
}

Reply AdminSocket::Impl::run_as(const std::string& prefix, const Request&) {
  Handler h;
  {
    std::lock_guard lk(cmd_mu);
    const auto it = commands.find(prefix);
    if (it == commands.end()) return Reply::error(-EINVAL, "unknown command prefix " + prefix);
    h = it->second.handler;
  }
  Request alias{prefix, nlohmann::json::object({{"prefix", prefix}})};
  return h(alias);
}

std::string AdminSocket::Impl::execute(std::string_view request) {
  nlohmann::json cmd;
  if (!request.empty() && request.front() == '\0') {
    // The legacy binary form: 4 bytes, the code in the last one.
    const unsigned code = request.size() >= 4 ? static_cast<unsigned char>(request[3]) : 0xff;
    const char* prefix = code == 0 ? "0" : code == 1 ? "perfcounters_dump" : code == 2 ? "perfcounters_schema" : "foo";
    cmd = nlohmann::json::object({{"prefix", prefix}});
  } else {
    cmd = nlohmann::json::parse(request.begin(), request.end(), nullptr, false);
    if (cmd.is_discarded() || !cmd.is_object()) return error_payload(-EINVAL, "invalid json");
  }
  std::string prefix, format = "json-pretty";
  if (const auto it = cmd.find("prefix"); it != cmd.end() && it->is_string()) prefix = it->get<std::string>();
  if (const auto it = cmd.find("format"); it != cmd.end() && it->is_string()) format = it->get<std::string>();

  Handler handler;
  {
    std::lock_guard lk(cmd_mu);
    const auto it = commands.find(prefix);
    if (it == commands.end()) return error_payload(-EINVAL, "unknown command prefix " + prefix);
    if (!validate(it->second.sig, cmd)) return error_payload(-EINVAL, "invalid command json");
    handler = it->second.handler;
  }
  Reply reply;
  try {
    reply = handler(Request{prefix, std::move(cmd)});
  } catch (const std::exception& e) {
    // A handler's failure is the command's error, never the daemon's.
    reply = Reply::error(-EIO, fmt::format("{} failed: {}", prefix, e.what()));
  }
  return format_reply(reply, format);
}

}  // namespace siphon::admin
