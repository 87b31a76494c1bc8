// A daemon's admin socket from its configuration (docs/observability.md §2):
// the socket at admin_socket, the standard and perf commands, and the
// configuration commands, which need this layer:
//
//   config show            every option, as text
//   config get <var>       one option
//   config set <var> <val> live for the debug_* options (log levels) and the
//                          TCP stack's fault injection (ms_inject_socket_failures,
//                          ms_inject_delay_*, ms_inject_corruption_probability);
//                          any other option is refused, naming why and the fix
//   config diff            options whose value is not the default, by source
//
//   auto admin = compat::DaemonAdmin::open(cfg, "siphon-objd");  // nullptr: off or failed (said on stderr)
//   admin->messengers->add("public", msgr.get());
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "compat/config.h"
#include "msgr/admin/admin_socket.h"
#include "msgr/admin/commands.h"

namespace siphon::compat {

// The configuration as the admin socket sees it: the loaded Config plus the
// values `config set` changed at run time.
class RuntimeConfig {
 public:
  explicit RuntimeConfig(Config cfg) : cfg_(std::move(cfg)) {}
  const Config& loaded() const noexcept { return cfg_; }
  // Ceph's text of the current value.
  std::string value_string(Opt o) const;
  // `config set`: 0, or a negative errno with `error` in Ceph's words plus
  // the reason.
  int set(std::string_view name, std::string_view text, std::string& error);
  // The same; on success `note` may say what the change did not reach (Ceph's
  // `config set` reply carries such notes in "success").
  int set(std::string_view name, std::string_view text, std::string& error, std::string& note);
  bool overridden(Opt o) const;

 private:
  void apply_log_levels_locked() const;
  Config cfg_;
  mutable std::mutex mu_;
  std::map<Opt, OptionValue> overrides_;
};

// True for the options `config set` changes while the daemon runs.
bool runtime_settable(Opt o) noexcept;
// The ms_inject_* options every running TCP stack of the process reads at
// each decision (msgr/transport/fault_injection.h LiveInjection).
bool live_injection_option(Opt o) noexcept;
// Why `config set` refuses an option that is not runtime_settable().
std::string_view not_live_reason(Opt o) noexcept;

void register_config_commands(admin::AdminSocket& sock, std::shared_ptr<RuntimeConfig> rc);

struct DaemonAdmin {
  std::unique_ptr<admin::AdminSocket> socket;
  std::shared_ptr<admin::MessengerSet> messengers;
  std::shared_ptr<RuntimeConfig> config;

  // Opens the admin socket the configuration asks for. nullptr when
  // admin_socket is empty, or when the socket cannot be opened: then
  // `error` says why and what to do, and the daemon runs on without it.
  static std::unique_ptr<DaemonAdmin> open(const Config& cfg, std::string& error);
  ~DaemonAdmin();  // stops the socket first: no command runs on a dead messenger
};

}  // namespace siphon::compat
