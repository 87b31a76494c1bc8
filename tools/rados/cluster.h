// What every RADOS tool does before its first op (siphon-rados,
// siphon-bench rados): the rados CLI's configuration flags, the
// configuration, the mon session and the OSD client with its first OSDMap.
//
//   rados_tool::ConfigFlags flags;                 // collects -c/-m/-k/-n/--<option>
//   for (i...) if (!flags.take(args, i, error)) ... else other flags
//   rados_tool::Cluster c;
//   if (auto e = c.connect(flags, opts); e.code) { print(e.message); return e.code; }
//   c.objecter().submit(...);
#pragma once

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compat/config.h"
#include "msgr/mon/mon_client.h"
#include "rados/client/objecter.h"

namespace siphon::rados_tool {

// `a[i]` is one of `flags` ("-p VALUE" or "--pool=VALUE"): its value goes to
// `out` and i moves past it. A flag without its value sets `error`.
bool take_value(const std::vector<std::string>& a, std::size_t& i, std::initializer_list<std::string_view> flags,
                std::string& out, std::string& error);
// "12", "0.5": seconds, non-negative (zero only if `zero_ok`); nullopt otherwise.
std::optional<double> parse_seconds(const std::string& text, bool zero_ok);

// The configuration flags rados takes, passed on to compat::ConfigRequest:
// -c/--conf, -m/--mon-host, -k/--keyring, -n/--name, --id, -i, --cluster and
// any Ceph option as --<option> VALUE or --<option>=VALUE.
struct ConfigFlags {
  std::vector<std::string> compat_args;
  // Consumes a[i] (and its value) if it is a configuration flag. Returns
  // false and leaves i alone otherwise; sets `error` for a flag that looks
  // like an option but is unknown or lacks its value (check error first).
  bool take(const std::vector<std::string>& a, std::size_t& i, std::string& error);
};

struct ClusterOptions {
  std::chrono::nanoseconds connect_timeout = std::chrono::seconds(30);
  std::chrono::nanoseconds op_timeout = std::chrono::seconds(30);  // rados_osd_op_timeout (0: forever)
};

struct ConnectError {
  int code = 0;         // 0, or the exit status rados uses (1; 13 for authentication)
  std::string message;  // one sentence, without the tool's name
  explicit operator bool() const noexcept { return code != 0; }
};

class Cluster {
 public:
  Cluster() = default;
  ~Cluster();
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  // Loads the configuration, reaches the monitors, starts the OSD client
  // and waits for the first OSDMap. `notes` gets lines worth telling the
  // user (which ms_type was ignored, and which line of which file set it).
  ConnectError connect(const ConfigFlags& flags, const ClusterOptions& opts, std::vector<std::string>* notes = nullptr);
  // The pool's id, or -1 (rados: "error opening pool X: (2) No such file or directory").
  std::int64_t lookup_pool(const std::string& name);
  rados::Objecter& objecter() { return *objecter_; }
  const compat::Config& config() const { return *cfg_; }
  // Stops the OSD client (failing ops in flight) and the mon session.
  void shutdown();

 private:
  std::optional<compat::Config> cfg_;
  std::shared_ptr<transport::Stack> stack_;
  std::unique_ptr<mon::MonClient> mc_;
  std::unique_ptr<rados::Objecter> objecter_;
  std::chrono::nanoseconds connect_timeout_{};
};

}  // namespace siphon::rados_tool
