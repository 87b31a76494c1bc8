#include "msgr/api/dispatch_queue.h"

#include "msgr/base/log.h"

namespace siphon::detail {

DispatchQueue::DispatchQueue(const std::vector<Dispatcher*>* dispatchers, Release on_release)
    : dispatchers_(dispatchers), on_release_(std::move(on_release)) {}

DispatchQueue::~DispatchQueue() { stop(); }

void DispatchQueue::start() {
  std::lock_guard l(mtx_);
  if (started_ || stopping_) return;
  started_ = true;
  thread_ = std::thread([this] { run(); });
}

void DispatchQueue::enqueue(Item item) {
  {
    std::lock_guard l(mtx_);
    if (stopping_) return;
    q_.push_back(std::move(item));
  }
  cv_.notify_one();
}

void DispatchQueue::stop() {
  {
    std::lock_guard l(mtx_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
  std::deque<Item> rest;
  {
    std::lock_guard l(mtx_);
    rest.swap(q_);
  }
  for (auto& it : rest)
    if (it.bytes != 0) on_release_(it.con.get(), it.bytes);
}

std::size_t DispatchQueue::size() const {
  std::lock_guard l(mtx_);
  return q_.size();
}

void DispatchQueue::run() {
  std::unique_lock l(mtx_);
  for (;;) {
    cv_.wait(l, [this] { return stopping_ || !q_.empty(); });
    if (q_.empty()) return;  // stopping and drained
    Item item = std::move(q_.front());
    q_.pop_front();
    l.unlock();
    deliver(item);
    const std::uint64_t bytes = item.bytes;
    const ConnectionRef con = std::move(item.con);
    item = Item{};  // drop the message before returning budget
    if (bytes != 0) on_release_(con.get(), bytes);
    l.lock();
  }
}

void DispatchQueue::deliver(Item& item) {
  const auto& ds = *dispatchers_;
  switch (item.kind) {
    case Kind::message: {
      const auto type = item.msg->get_type();
      for (Dispatcher* d : ds)
        if (d->ms_dispatch(item.msg)) return;
      SIPHON_LOG(ms, 1, "message type {} from {} not handled by any dispatcher; dropped", type,
                 item.msg->get_source().num);
      return;
    }
    case Kind::connect:
      for (Dispatcher* d : ds) d->ms_handle_connect(item.con);
      return;
    case Kind::accept:
      for (Dispatcher* d : ds) d->ms_handle_accept(item.con);
      return;
    case Kind::reset:
      for (Dispatcher* d : ds)
        if (d->ms_handle_reset(item.con)) return;
      return;
    case Kind::remote_reset:
      for (Dispatcher* d : ds) d->ms_handle_remote_reset(item.con);
      return;
    case Kind::refused:
      for (Dispatcher* d : ds)
        if (d->ms_handle_refused(item.con)) return;
      return;
  }
}

}  // namespace siphon::detail
