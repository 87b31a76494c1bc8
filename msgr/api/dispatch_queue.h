// The normal dispatch path: one thread that delivers queued messages and
// connection events to the dispatchers, in the order they were queued (so in
// order per connection). Bytes of queued messages count against
// ms_dispatch_throttle_bytes; the connection that overfills it pauses
// reading until the dispatch thread has caught up (see MessengerCore).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "msgr/api/dispatcher.h"

namespace siphon::detail {

class DispatchQueue {
 public:
  enum class Kind : std::uint8_t { message, connect, accept, reset, remote_reset, refused };
  struct Item {
    Kind kind = Kind::message;
    MessageRef msg;
    ConnectionRef con;
    std::uint64_t bytes = 0;  // throttled bytes to release after dispatch
  };

  // `on_release(con, bytes)` runs on the dispatch thread after each
  // dispatched message with non-zero bytes (to return the dispatch-throttle
  // budget of the messenger and of `con`, and wake paused readers).
  using Release = std::function<void(Connection*, std::uint64_t)>;
  DispatchQueue(const std::vector<Dispatcher*>* dispatchers, Release on_release);
  ~DispatchQueue();
  DispatchQueue(const DispatchQueue&) = delete;
  DispatchQueue& operator=(const DispatchQueue&) = delete;

  void start();
  // Thread-safe. Items queued after stop() are dropped.
  void enqueue(Item item);
  // Delivers what is queued, then stops the thread. Idempotent.
  void stop();
  std::size_t size() const;

 private:
  void run();
  void deliver(Item& item);

  const std::vector<Dispatcher*>* dispatchers_;
  Release on_release_;
  mutable std::mutex mtx_;
  std::condition_variable cv_;
  std::deque<Item> q_;
  bool stopping_ = false;
  bool started_ = false;
  std::thread thread_;
};

}  // namespace siphon::detail
