#include "tools/bench/stack.h"

#include <chrono>

#include "compat/factory.h"
#include "compat/stack_plugins.h"
#include "msgr/base/error.h"
#include "rdma/transport/rdma_stack.h"

namespace siphon::bench {
MessengerOptions messenger_options(const compat::Config& cfg) { return compat::messenger_options(cfg); }

std::shared_ptr<transport::Stack> create_stack(const compat::MsType& type, const compat::Config& cfg,
                                               const MessengerOptions& opts, std::string& why_not) {
  // TCP keeps the benchmark's own transport options; every other stack comes
  // from the composition root's registry (compat/factory.h).
  if (type.stack == compat::MsType::Stack::posix) return make_tcp_stack(opts);
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

std::map<std::string, std::uint64_t> stack_counters(const transport::Stack& stack) {
  if (const auto* r = dynamic_cast<const rdma::RdmaStack*>(&stack)) return r->counters().snapshot();
  return {};
}

}  // namespace siphon::bench
