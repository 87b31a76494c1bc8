// Registered buffer pool (docs/architecture.md §6, docs/rdma-transport.md
// §Memory). Memory is allocated in slabs, each registered once through a
// Registrar callback (the pool knows nothing of verbs), and carved into
// fixed-size buffers. Free buffers sit on Boost.Intrusive lists: a shared list
// under a mutex and per-worker caches that the worker's hot path uses without
// a lock (batched refill and flush). A hard cap bounds the pool; get() returns
// nullptr when it is reached, and the caller applies backpressure.
//
// Each buffer embeds a Segment (msgr/base/buffer.h) carrying its region's
// keys, so pool memory travels up the stack inside BufferLists without a copy
// and comes back to the pool, from any thread, when the last reference drops.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <vector>

#include <boost/intrusive/slist.hpp>

#include "msgr/base/buffer.h"

namespace siphon::rdma {

// Registers memory for RDMA: implemented by the stack over a provider PD.
class Registrar {
 public:
  virtual ~Registrar() = default;
  // Fills lkey/rkey; region_id is the registrar's own handle for deregistering.
  virtual std::error_code register_region(void* addr, std::size_t len, RegionKeys& keys) = 0;
  virtual void deregister_region(const RegionKeys& keys) noexcept = 0;
};

struct PoolConfig {
  std::string name = "pool";
  std::size_t buffer_size = 128 * 1024;  // ms_async_rdma_buffer_size
  std::size_t max_buffers = 1024;        // hard cap
  std::size_t buffers_per_slab = 64;     // registration granularity
  std::size_t cache_batch = 16;          // per-worker cache refill/flush batch
  bool hugepages = false;                // ms_async_rdma_enable_hugepage
};

class BufferPool;

class PoolBuffer : public boost::intrusive::slist_base_hook<> {
 public:
  std::byte* data() const noexcept { return segment_.data(); }
  std::size_t capacity() const noexcept { return segment_.capacity(); }
  const RegionKeys& keys() const noexcept { return *segment_.keys(); }
  Segment& segment() noexcept { return segment_; }

 private:
  friend class BufferPool;
  PoolBuffer(std::byte* data, std::size_t size, const RegionKeys& keys, BufferPool* pool) noexcept;
  static void release(Segment* seg) noexcept;
  Segment segment_;  // owner() points back at this PoolBuffer
  BufferPool* pool_;
};

using BufferSList = boost::intrusive::slist<PoolBuffer, boost::intrusive::constant_time_size<true>>;

// A worker's private stash of free buffers. Owned and used by one thread.
class PoolCache {
 public:
  explicit PoolCache(BufferPool& pool) noexcept : pool_(&pool) {}
  ~PoolCache();
  PoolCache(const PoolCache&) = delete;
  PoolCache& operator=(const PoolCache&) = delete;
  std::size_t size() const noexcept { return free_.size(); }

 private:
  friend class BufferPool;
  BufferPool* pool_;
  BufferSList free_;
};

class BufferPool {
 public:
  BufferPool(PoolConfig config, Registrar& registrar);
  ~BufferPool();
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // A free buffer, or nullptr at the cap or when registration fails (see
  // last_error()). With a cache, the fast path takes no lock.
  PoolBuffer* get(PoolCache* cache = nullptr);
  // Returns a buffer that was never wrapped in a BufferPtr (or whose
  // references are all gone). Thread-safe; with a cache, lock-free mostly.
  void put(PoolBuffer* buf, PoolCache* cache = nullptr) noexcept;
  // Wraps [0, len) of a buffer: the buffer returns to the pool when the last
  // reference to it drops, on whatever thread that happens.
  static BufferPtr wrap(PoolBuffer* buf, std::size_t len) noexcept;

  const PoolConfig& config() const noexcept { return config_; }
  std::size_t buffer_size() const noexcept { return config_.buffer_size; }
  // Counters.
  std::size_t registered_bytes() const noexcept { return registered_bytes_.load(std::memory_order_relaxed); }
  std::size_t buffers_total() const noexcept { return total_.load(std::memory_order_relaxed); }
  std::size_t buffers_in_use() const noexcept { return in_use_.load(std::memory_order_relaxed); }
  std::error_code last_error() const noexcept;
  bool using_hugepages() const noexcept { return hugepages_active_; }

 private:
  friend class PoolBuffer;
  friend class PoolCache;
  struct Slab {
    std::byte* memory = nullptr;
    std::size_t bytes = 0;
    bool huge = false;
    RegionKeys keys{};
    std::vector<std::unique_ptr<PoolBuffer>> buffers;  // headers, stable addresses
  };
  bool grow_locked();  // adds a slab; caller holds mu_
  void flush(PoolCache& cache, std::size_t keep) noexcept;

  PoolConfig config_;
  Registrar& registrar_;
  mutable std::mutex mu_;
  BufferSList free_;  // guarded by mu_
  std::vector<std::unique_ptr<Slab>> slabs_;
  std::error_code last_error_;
  bool hugepages_active_ = false;
  std::atomic<std::size_t> registered_bytes_{0};
  std::atomic<std::size_t> total_{0};
  std::atomic<std::size_t> in_use_{0};
};

}  // namespace siphon::rdma
