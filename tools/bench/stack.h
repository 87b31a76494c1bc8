// Stack selection for siphon-bench: the Config's ms_type -> a transport
// stack, and the Config -> MessengerOptions.
//
// The stacks themselves come from compat/factory.h's registry (the
// composition root); this wraps it so that an unavailable stack is a
// sentence for the report rather than an exception.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compat/config.h"
#include "msgr/api/messenger.h"
#include "tools/bench/report.h"

namespace siphon::bench {

// The messenger options a Config describes (the transport's own options go
// to the stack create_stack() builds).
MessengerOptions messenger_options(const compat::Config& cfg);

// A stack for `type`, or nullptr with `why_not` set to one sentence saying
// why this build cannot create it (never throws for an unknown stack).
std::shared_ptr<transport::Stack> create_stack(const compat::MsType& type, const compat::Config& cfg,
                                               std::string& why_not);

// The process's open fds and RSS (/proc/self), and the transport counters of
// `stacks` that tell leaks apart (async+rdma: qps_active, connections,
// memory_regions, registered_bytes, buffers_in_use, summed). Null entries
// are skipped.
ResourceSample sample_resources(const std::vector<const transport::Stack*>& stacks);
// The stack's own counters (async+rdma: RdmaCounters by name); empty for a
// stack that keeps none.
std::map<std::string, std::uint64_t> stack_counters(const transport::Stack& stack);
// The polling time an async+rdma stack runs with (ms_async_rdma_polling_us,
// or what "auto" resolved to); nullopt for other stacks.
std::optional<std::chrono::microseconds> rdma_polling(const transport::Stack& stack);

}  // namespace siphon::bench
