#include "tools/bench/stack.h"

#include <dirent.h>
#include <unistd.h>

#include <chrono>
#include <fstream>

#include "compat/factory.h"
#include "compat/stack_plugins.h"
#include "msgr/base/error.h"
#include "rdma/transport/rdma_stack.h"

namespace siphon::bench {
MessengerOptions messenger_options(const compat::Config& cfg) { return compat::messenger_options(cfg); }

std::shared_ptr<transport::Stack> create_stack(const compat::MsType& type, const compat::Config& cfg,
                                               std::string& why_not) {
  // Every stack, TCP included, comes from the composition root's registry
  // (compat/factory.h), which fills that stack's own options from `cfg`.
  try {
    // async+<plugin>: load libsiphon-stack-<plugin>.so first (a no-op once loaded).
    if (type.stack == compat::MsType::Stack::plugin) compat::load_stack_plugin(type.name, cfg);
    auto stack = compat::StackRegistry::instance().create(type.name, cfg);
    if (!stack) why_not = type.to_string() + " is not a registered stack";
    return stack;
  } catch (const SetupError& e) {
    why_not = e.what();
    return nullptr;
  }
}

ResourceSample sample_resources(const std::vector<const transport::Stack*>& stacks) {
  ResourceSample r;
  if (DIR* d = opendir("/proc/self/fd")) {
    std::uint64_t n = 0;
    while (const dirent* e = readdir(d))
      if (e->d_name[0] != '.') ++n;
    closedir(d);
    r.fds = n > 0 ? n - 1 : 0;  // not the directory stream's own fd
  }
  std::ifstream statm("/proc/self/statm");
  std::uint64_t size_pages = 0, rss_pages = 0;
  if (statm >> size_pages >> rss_pages)
    r.rss_kib = rss_pages * static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE)) / 1024;
  for (const transport::Stack* st : stacks) {
    const auto* rdma = dynamic_cast<const rdma::RdmaStack*>(st);
    if (rdma == nullptr) continue;
    r.stack["qps_active"] += rdma->counters().qps_active.load(std::memory_order_relaxed);
    r.stack["connections"] += rdma->connection_count();
    r.stack["memory_regions"] += rdma->memory_regions();
    r.stack["registered_bytes"] += rdma->registered_bytes();
    r.stack["buffers_in_use"] += rdma->buffers_in_use();
  }
  return r;
}

std::map<std::string, std::uint64_t> stack_counters(const transport::Stack& stack) {
  if (const auto* r = dynamic_cast<const rdma::RdmaStack*>(&stack)) return r->counters().snapshot();
  return {};
}

std::optional<std::chrono::microseconds> rdma_polling(const transport::Stack& stack) {
  if (const auto* r = dynamic_cast<const rdma::RdmaStack*>(&stack)) return r->polling();
  return std::nullopt;
}

}  // namespace siphon::bench
