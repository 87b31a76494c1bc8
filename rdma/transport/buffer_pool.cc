#include "rdma/transport/buffer_pool.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <new>
#include <utility>

#include "msgr/base/error.h"
#include "msgr/base/log.h"

namespace siphon::rdma {
namespace {

constexpr std::size_t kHugePage = 2u << 20;
constexpr std::size_t kPage = 4096;

std::size_t round_up(std::size_t v, std::size_t to) { return (v + to - 1) / to * to; }

}  // namespace

PoolBuffer::PoolBuffer(std::byte* data, std::size_t size, const RegionKeys& keys, BufferPool* pool) noexcept
    : segment_(data, size, &PoolBuffer::release, &keys, this), pool_(pool) {}

void PoolBuffer::release(Segment* seg) noexcept {
  auto* buf = static_cast<PoolBuffer*>(seg->owner());
  buf->pool_->put(buf, nullptr);
}

PoolCache::PoolCache(BufferPool& pool, FlushRequest request_flush)
    : pool_(&pool), request_flush_(std::move(request_flush)) {
  std::lock_guard lk(pool_->mu_);
  pool_->caches_.push_back(this);
}

PoolCache::~PoolCache() {
  pool_->flush(*this, 0);
  std::lock_guard lk(pool_->mu_);
  // Its count lives on in the pool's (its buffers may still be in use).
  pool_->in_use_uncached_ += net_.load(std::memory_order_relaxed);
  std::erase(pool_->caches_, this);
}

void PoolCache::return_all() noexcept { pool_->flush(*this, 0); }

BufferPool::BufferPool(PoolConfig config, Registrar& registrar)
    : config_(std::move(config)), registrar_(registrar) {
  config_.buffer_size = round_up(std::max<std::size_t>(config_.buffer_size, 64), 64);
  config_.buffers_per_slab = std::max<std::size_t>(1, config_.buffers_per_slab);
  config_.cache_batch = std::max<std::size_t>(1, config_.cache_batch);
}

BufferPool::~BufferPool() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
    grow_cv_.notify_all();
  }
  if (grower_.joinable()) grower_.join();
  const std::int64_t in_use = in_use_locked();
  if (in_use != 0) {
    // A bug above us: memory is still referenced. Keep it mapped (leak it)
    // rather than free memory someone may still touch.
    SIPHON_LOG(rdma, 0, "{}: destroyed with {} buffers in use; leaking their slabs", config_.name, in_use);
    for (auto& s : slabs_) s.release();
    return;
  }
  free_.clear();
  for (auto& s : slabs_) {
    if (!deregistered_) registrar_.deregister_region(s->keys);
    if (s->huge) ::munmap(s->memory, s->bytes);
    else std::free(s->memory);
  }
}

std::error_code BufferPool::last_error() const noexcept {
  std::lock_guard lk(mu_);
  return last_error_;
}

std::int64_t BufferPool::in_use_locked() const noexcept {
  std::int64_t n = in_use_uncached_;
  for (const PoolCache* c : caches_) n += c->net_.load(std::memory_order_relaxed);
  return n;
}

std::size_t BufferPool::buffers_in_use() const noexcept {
  std::lock_guard lk(mu_);
  const std::int64_t n = in_use_locked();
  return n > 0 ? static_cast<std::size_t>(n) : 0;
}

std::unique_ptr<BufferPool::Slab> BufferPool::make_slab(std::size_t n, std::error_code& ec) {
  auto slab = std::make_unique<Slab>();
  const std::size_t bytes = n * config_.buffer_size;
  if (config_.hugepages) {
    slab->bytes = round_up(bytes, kHugePage);
    void* p = ::mmap(nullptr, slab->bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | MAP_POPULATE, -1, 0);
    if (p != MAP_FAILED) {
      slab->memory = static_cast<std::byte*>(p);
      slab->huge = true;
      hugepages_active_ = true;
    } else if (!hugepages_active_ && registered_bytes_.load(std::memory_order_relaxed) == 0) {
      SIPHON_LOG(rdma, 1,
                 "{}: hugepages requested (ms_async_rdma_enable_hugepage) but mmap(MAP_HUGETLB) failed; "
                 "using normal pages (reserve hugepages with: sysctl vm.nr_hugepages=N)",
                 config_.name);
    }
  }
  if (slab->memory == nullptr) {
    slab->bytes = round_up(bytes, kPage);
    slab->memory = static_cast<std::byte*>(std::aligned_alloc(kPage, slab->bytes));
    if (slab->memory == nullptr) {
      ec = errc::out_of_memory;
      return nullptr;
    }
  }
  if ((ec = registrar_.register_region(slab->memory, slab->bytes, slab->keys))) {
    SIPHON_LOG(rdma, 0, "{}: registering a {}-byte slab failed: {}", config_.name, slab->bytes, ec.message());
    if (slab->huge) ::munmap(slab->memory, slab->bytes);
    else std::free(slab->memory);
    return nullptr;
  }
  slab->buffers.reserve(n);
  for (std::size_t i = 0; i < n; ++i)
    slab->buffers.emplace_back(new PoolBuffer(slab->memory + i * config_.buffer_size, config_.buffer_size,
                                              slab->keys, this));
  return slab;
}

bool BufferPool::grow(std::unique_lock<std::mutex>& lk) {
  if (deregistered_) {  // the device is gone: nothing to register on
    last_error_ = make_error_code(errc::device_not_found);
    return false;
  }
  const std::size_t have = total_.load(std::memory_order_relaxed) + pending_;
  if (have >= config_.max_buffers) return false;
  const std::size_t n = std::min(config_.buffers_per_slab, config_.max_buffers - have);
  pending_ += n;
  lk.unlock();
  std::error_code ec;
  std::unique_ptr<Slab> slab = make_slab(n, ec);
  lk.lock();
  pending_ -= n;
  grown_.notify_all();
  if (!slab) {
    last_error_ = ec;
    return false;
  }
  for (auto& b : slab->buffers) free_.push_front(*b);
  total_.fetch_add(n, std::memory_order_relaxed);
  registered_bytes_.fetch_add(slab->bytes, std::memory_order_relaxed);
  slabs_.push_back(std::move(slab));
  return true;
}

void BufferPool::request_growth_locked() {
  if (grow_requested_ || stop_) return;
  grow_requested_ = true;
  if (!grower_.joinable()) grower_ = std::thread([this] { grower_main(); });
  grow_cv_.notify_one();
}

void BufferPool::grower_main() {
  std::unique_lock lk(mu_);
  for (;;) {
    grow_cv_.wait(lk, [&] { return grow_requested_ || stop_; });
    if (stop_) return;
    grow_requested_ = false;
    // Added or not (at the cap, or registration failed), the waiters retry:
    // they see nullptr again and apply their backpressure.
    grow(lk);
    Waiters w = take_waiters_locked(/*all=*/true);
    lk.unlock();
    wake(std::move(w));
    lk.lock();
  }
}

// The waiters the shared list can now serve (each wants `want` buffers;
// over-waking is harmless: a waiter that still finds too few registers
// again). `all`: every waiter (a slab was added or could not be: they
// re-evaluate).
BufferPool::Waiters BufferPool::take_waiters_locked(bool all) noexcept {
  if (waiters_.empty()) return {};
  Waiters out;
  const std::size_t avail = free_.size();
  std::erase_if(waiters_, [&](Waiter& w) {
    if (!all && w.want > avail) return false;
    out.push_back(std::move(w.wake));
    return true;
  });
  waiting_.store(!waiters_.empty(), std::memory_order_relaxed);
  return out;
}

void BufferPool::wake(Waiters&& w) noexcept {
  for (auto& f : w) f();
}

void BufferPool::notify_on_release(std::function<void()> wake_fn, std::size_t want) {
  {
    std::lock_guard lk(mu_);
    const bool can_grow = total_.load(std::memory_order_relaxed) + pending_ < config_.max_buffers;
    if (free_.size() < std::max<std::size_t>(want, 1)) {
      if (can_grow) request_growth_locked();
      waiters_.push_back({std::max<std::size_t>(want, 1), std::move(wake_fn)});
      // The first waiter: free buffers parked in the workers' caches come
      // back (each owner flushes on its thread), and from now on cached puts
      // take the shared list. A put that read `waiting_` false just before
      // lands in its cache, and that cache's owner flushes after it.
      if (!waiting_.exchange(true, std::memory_order_relaxed)) {
        for (PoolCache* c : caches_)
          if (c->request_flush_) c->request_flush_(*c);
      }
      return;
    }
  }
  wake_fn();  // enough buffers are free already: retry now
}

void BufferPool::deregister_all() noexcept {
  std::unique_lock lk(mu_);
  if (deregistered_) return;
  deregistered_ = true;
  // A slab being registered (mutex released in grow) lands in slabs_ before
  // pending_ drops back: wait for it, then it is deregistered below too.
  grown_.wait(lk, [this] { return pending_ == 0; });
  for (auto& slab : slabs_) {
    registrar_.deregister_region(slab->keys);
    registered_bytes_.fetch_sub(slab->bytes, std::memory_order_relaxed);
  }
  last_error_ = make_error_code(errc::device_not_found);
}

std::error_code BufferPool::reregister_all() {
  std::lock_guard lk(mu_);
  if (!deregistered_) return {};
  for (std::size_t i = 0; i < slabs_.size(); ++i) {
    Slab& slab = *slabs_[i];
    RegionKeys keys{};
    if (const auto ec = registrar_.register_region(slab.memory, slab.bytes, keys)) {
      SIPHON_LOG(rdma, 0, "{}: registering a {}-byte slab again failed: {}", config_.name, slab.bytes, ec.message());
      for (std::size_t j = 0; j < i; ++j) {
        registrar_.deregister_region(slabs_[j]->keys);
        registered_bytes_.fetch_sub(slabs_[j]->bytes, std::memory_order_relaxed);
      }
      return ec;
    }
    slab.keys = keys;
    for (auto& b : slab.buffers) b->segment_.rekey(keys);
    registered_bytes_.fetch_add(slab.bytes, std::memory_order_relaxed);
  }
  deregistered_ = false;
  last_error_.clear();
  return {};
}

std::error_code BufferPool::prefill_slab() {
  std::unique_lock lk(mu_);
  if (total_.load(std::memory_order_relaxed) + pending_ > 0) return {};
  return grow(lk) ? std::error_code{} : last_error_;
}

PoolBuffer* BufferPool::get(PoolCache* cache, Growth growth) {
  PoolBuffer* buf = nullptr;
  if (cache != nullptr && !cache->free_.empty()) {
    buf = &cache->free_.front();
    cache->free_.pop_front();
    cache->count(1);
  } else {
    std::unique_lock lk(mu_);
    while (free_.empty()) {
      if (growth == Growth::background) {
        // Never register on the data path: the grower thread does it and
        // notify_on_release() wakes the caller.
        if (total_.load(std::memory_order_relaxed) + pending_ < config_.max_buffers) request_growth_locked();
        return nullptr;
      }
      if (grow(lk)) continue;
      if (pending_ == 0) return nullptr;  // at the cap or failed
      grown_.wait(lk);                    // the last buffers are being registered elsewhere
    }
    buf = &free_.front();
    free_.pop_front();
    if (cache != nullptr) {
      // While someone waits, free buffers stay on the shared list: a batch
      // parked in this cache would be invisible to a waiter that needs
      // several at once (a transfer's chunks), and with no buffer left in
      // flight to wake it, it would wait for ever.
      const std::size_t batch = waiting_.load(std::memory_order_relaxed) ? 1 : config_.cache_batch;
      for (std::size_t i = 1; i < batch && !free_.empty(); ++i) {
        PoolBuffer& b = free_.front();
        free_.pop_front();
        cache->free_.push_front(b);
      }
      cache->count(1);
    } else {
      ++in_use_uncached_;
    }
  }
  buf->segment_.reset_for_reuse();
  return buf;
}

void BufferPool::put(PoolBuffer* buf, PoolCache* cache) noexcept {
  if (cache != nullptr && !waiting_.load(std::memory_order_relaxed)) {
    cache->count(-1);
    cache->free_.push_front(*buf);
    if (cache->free_.size() > 2 * config_.cache_batch) flush(*cache, config_.cache_batch);
    return;
  }
  // Someone waits for a buffer (or no cache): to the shared list, and wake
  // them.
  Waiters w;
  {
    std::lock_guard lk(mu_);
    if (cache != nullptr) cache->count(-1);
    else --in_use_uncached_;
    free_.push_front(*buf);
    w = take_waiters_locked();
  }
  wake(std::move(w));
}

void BufferPool::flush(PoolCache& cache, std::size_t keep) noexcept {
  Waiters w;
  {
    std::lock_guard lk(mu_);
    while (cache.free_.size() > keep) {
      PoolBuffer& b = cache.free_.front();
      cache.free_.pop_front();
      free_.push_front(b);
    }
    if (!free_.empty()) w = take_waiters_locked();
  }
  wake(std::move(w));
}

BufferPtr BufferPool::wrap(PoolBuffer* buf, std::size_t len) noexcept {
  return BufferPtr(&buf->segment_, 0, len);
}

// A segment with an owner and region keys is a PoolBuffer's: the pools are
// the only code that gives a Segment an owner (the PoolBuffer constructor
// above); heap segments have neither.
bool BufferPool::owns(const Segment& seg) const noexcept {
  if (seg.owner() == nullptr || seg.keys() == nullptr) return false;
  return static_cast<const PoolBuffer*>(seg.owner())->pool_ == this;
}

}  // namespace siphon::rdma
