// The composition root's factory (docs/architecture.md §1, §8): the only
// code that knows every stack. It turns a loaded Config into typed option
// structs, maps ms_type / ms_public_type / ms_cluster_type to a stack through
// a registry, and builds messengers. Nothing below compat/ reads the
// configuration.
//
//   auto cfg = compat::Config::load_or_throw(req);
//   auto msgr = compat::create_messenger(cfg, compat::Purpose::cluster);
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "compat/config.h"
#include "msgr/api/messenger.h"
#include "rdma/transport/options.h"
#include "rdma/verbs/verbs_provider.h"

namespace siphon::compat {

// Which of an entity's networks a messenger serves (selects ms_public_type
// or ms_cluster_type; clients use the public network).
enum class Purpose { public_network, cluster_network, client };

// Typed options, read from the Config once. Each stack gets its own struct
// (the options every stack shares are in its `common`); the messenger's
// options hold none of the transport's: the session asks its stack.
transport::TransportOptions transport_options(const Config& cfg);
transport::TcpOptions tcp_options(const Config& cfg);
MessengerOptions messenger_options(const Config& cfg);
rdma::RdmaOptions rdma_options(const Config& cfg);
// The path options the verbs provider gets (docs/rdma-verbs.md): a GID pinned
// by ms_async_rdma_gid_idx / _local_gid, SL, DSCP and ms_async_rdma_path_mtu.
rdma::verbs::VerbsPathOptions verbs_path_options(const Config& cfg);

// The entity name a Config was loaded for, as the messenger's entity_name_t
// (osd.3 -> {osd, 3}; a non-numeric id such as client.admin -> num -1).
entity_name_t messenger_name(const Config& cfg);

// The stack a messenger for `purpose` runs on (async+posix, async+rdma, or a
// registered plugin). Throws SetupError naming the stacks available when the
// type is unknown, and the cause and remedy when the stack cannot start (no
// RDMA device, ...).
std::shared_ptr<transport::Stack> create_stack(const Config& cfg, Purpose purpose);

// The stack siphon_ms_fallback_type names (docs/rdma-transport.md,
// Failover), or nullptr when it is empty. Throws SetupError when it names
// the messenger's own stack or a stack that cannot be built.
std::shared_ptr<transport::Stack> create_fallback_stack(const Config& cfg, const MsType& primary);

// A messenger on the stack `purpose` selects, with the fallback stack
// siphon_ms_fallback_type names (if any), named after the Config's
// entity, with its options (a mon.* daemon's public and cluster messengers
// use nonce 0, as ceph-mon does). Throws SetupError like create_stack.
std::unique_ptr<Messenger> create_messenger(const Config& cfg, Purpose purpose);

// The registry behind create_stack: stack name ("posix", "rdma", ...) to a
// function building one. Built-ins are registered on first use.
class StackRegistry {
 public:
  using Factory = std::function<std::shared_ptr<transport::Stack>(const Config&)>;
  static StackRegistry& instance();
  void add(std::string name, Factory factory);
  std::vector<std::string> names() const;
  // nullptr when `name` is not registered.
  std::shared_ptr<transport::Stack> create(const std::string& name, const Config& cfg) const;

 private:
  StackRegistry();
  mutable std::mutex mu_;
  std::map<std::string, Factory> factories_;
};

// The async+posix stack with the Config's TCP options, whatever ms_type
// says: for clients of services that listen on TCP only (the monitors; see
// siphon-ceph). Throws SetupError for inconsistent options.
std::shared_ptr<transport::Stack> create_tcp_stack(const Config& cfg);

// Which RDMA provider serves ms_async_rdma_device_name: "soft..." is the
// software fabric; any other name, the verbs provider; empty: verbs when a
// device exists, else the software fabric (the embedded default). The
// returned stack owns its provider. Throws SetupError.
std::shared_ptr<transport::Stack> create_rdma_stack(const Config& cfg);

// Pulls (true) or plugs back (false) the link of every software-fabric
// provider alive in this process (rdma::soft::set_link_down_all): the test
// hook behind siphon-bench --soft-link-down. Returns how many it changed.
std::size_t set_soft_link_down(bool down);

}  // namespace siphon::compat
