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

#include "msgr/api/dispatcher.h"
#include "tools/objd/proto.h"
#include "tools/objd/store.h"

namespace siphon::objd {

struct ServerCounters {
  std::atomic<std::uint64_t> puts{0}, gets{0}, stats{0}, deletes{0};
  std::atomic<std::uint64_t> errors{0};   // error replies sent
  std::atomic<std::uint64_t> dropped{0};  // messages of types not served
  std::atomic<std::uint64_t> bytes_in{0}, bytes_out{0};
};

class ObjectServer final : public Dispatcher {
 public:
  // `max_object_size`: the largest put accepted and get returned.
  ObjectServer(ObjectStore& store, std::uint64_t max_object_size) : store_(store), max_(max_object_size) {}

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
};

}  // namespace siphon::objd
