// siphon-objd's request handling: a Dispatcher that serves MObjdOp from an
// ObjectStore and answers each with an MObjdReply on the same connection.
// It runs on the messenger's dispatch thread (the normal path), so the store
// is used from one thread. Bad input gets an error reply (invalid name,
// missing object, object too large, unknown op, checksum mismatch); message
// types it does not serve are counted and dropped. Nothing a client sends
// ends the daemon.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "msgr/api/dispatcher.h"
#include "msgr/perf/perf_counters.h"
#include "tools/objd/proto.h"
#include "tools/objd/store.h"

namespace siphon::objd {

struct ServerCounters {
  std::atomic<std::uint64_t> puts{0}, gets{0}, stats{0}, deletes{0};
  std::atomic<std::uint64_t> errors{0};   // error replies sent
  std::atomic<std::uint64_t> dropped{0};  // messages of types not served
  std::atomic<std::uint64_t> bytes_in{0}, bytes_out{0};
};

// The daemon's own `objd` perf logger (docs/observability.md §Counters): an
// application registers its loggers through the same API as the messenger.
enum ObjdPerfIdx : int {
  l_objd_first = 96000,
  l_objd_op,
  l_objd_op_put,
  l_objd_op_get,
  l_objd_op_stat,
  l_objd_op_delete,
  l_objd_op_errors,
  l_objd_op_in_bytes,
  l_objd_op_out_bytes,
  l_objd_op_latency,
  l_objd_last,
};

class ObjectServer final : public Dispatcher {
 public:
  // `max_object_size`: the largest put accepted and get returned. The
  // `objd` logger is in siphon::perf::process_collection() for the server's
  // lifetime.
  ObjectServer(ObjectStore& store, std::uint64_t max_object_size);
  ~ObjectServer() override;
  ObjectServer(const ObjectServer&) = delete;
  ObjectServer& operator=(const ObjectServer&) = delete;

  bool ms_dispatch(MessageRef m) override;
  // Lossy clients come and go; nothing to clean up.
  bool ms_handle_reset(ConnectionRef) override { return true; }

  const ServerCounters& counters() const noexcept { return counters_; }

  // The reply to `op` (exposed for tests: no messenger needed).
  boost::intrusive_ptr<MObjdReply> handle(const MObjdOp& op);

 private:
  ObjectStore& store_;
  std::uint64_t max_;
  ServerCounters counters_;
  std::shared_ptr<perf::Logger> perf_;
};

}  // namespace siphon::objd
