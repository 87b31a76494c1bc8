// Registered buffer pool (docs/architecture.md §6, docs/rdma-transport.md
// §Memory). Memory is allocated in slabs, each registered once through a
// Registrar callback (the pool knows nothing of verbs), and carved into
// fixed-size buffers. Free buffers sit on Boost.Intrusive lists: a shared list
// under a mutex and per-worker caches that the worker's hot path uses without
// a lock (batched refill and flush). A hard cap bounds the pool; get() returns
// nullptr when it is reached, and the caller applies backpressure.
//
// Off the data path (issue 14 item 8): a slab is registered with the mutex
// released, never under it; a data-path get() (Growth::background) that
// finds the pool empty hands the registration to the pool's grower thread
// and returns nullptr, and the caller waits for notify_on_release() to wake
// it -- when a buffer comes back or the slab is in -- instead of polling. No
// atomic is shared per get/put: buffers in use are counted per cache (written
// by the cache's owner only) and, for puts without a cache, under the mutex.
//
// Each buffer embeds a Segment (msgr/base/buffer.h) carrying its region's
// keys, so pool memory travels up the stack inside BufferLists without a copy
// and comes back to the pool, from any thread, when the last reference drops.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
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
// Padded by a cache line either side (not alignas: over-aligned new trips a
// TSan allocator CHECK): the owner's writes never touch a line another
// worker's cache is on.
//
// Free buffers parked in one worker's cache are invisible to another
// worker's get(). When a caller starts waiting for a buffer
// (notify_on_release), the pool calls every cache's `request_flush` (under
// the pool's mutex: it must only post to the owner's event loop), and the
// owner then calls return_all() on its own thread: parked buffers reach the
// shared list and wake the waiter. Without it a transfer on one worker could
// wait forever while enough buffers sat idle in another's cache (seen in the
// two-host rxe tier as a zero-copy transfer stalled until its timeout).
class PoolCache {
 public:
  using FlushRequest = std::function<void(PoolCache&)>;
  explicit PoolCache(BufferPool& pool, FlushRequest request_flush = {});
  ~PoolCache();
  PoolCache(const PoolCache&) = delete;
  PoolCache& operator=(const PoolCache&) = delete;
  std::size_t size() const noexcept { return free_.size(); }
  // Owner thread only: every parked buffer to the shared list, waking
  // whoever waits for one.
  void return_all() noexcept;

 private:
  friend class BufferPool;
  // Buffers got through this cache minus buffers put through it (may go
  // negative: a buffer got here can come back without a cache). Written by
  // the owner only, with a plain relaxed load and store; read by
  // buffers_in_use() under the pool's mutex.
  void count(std::int64_t d) noexcept { net_.store(net_.load(std::memory_order_relaxed) + d, std::memory_order_relaxed); }
  [[maybe_unused]] char pad_front_[64] = {};
  BufferPool* pool_;
  FlushRequest request_flush_;
  BufferSList free_;
  std::atomic<std::int64_t> net_{0};
  [[maybe_unused]] char pad_back_[64] = {};
};

// Where get() may register a new slab when the pool is empty.
enum class Growth {
  inline_,     // here, with the mutex released (setup paths: a connection's first receives, an SRQ)
  background,  // on the pool's grower thread; get() returns nullptr meanwhile (the data path)
};

class BufferPool {
 public:
  BufferPool(PoolConfig config, Registrar& registrar);
  ~BufferPool();
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // A free buffer, or nullptr at the cap or when registration fails (see
  // last_error()), or with Growth::background while a slab is being added.
  // With a cache, the fast path takes no lock and no shared atomic.
  PoolBuffer* get(PoolCache* cache = nullptr, Growth growth = Growth::inline_);
  // Calls `wake` once, on whatever thread, as soon as `want` buffers are on
  // the shared list or a slab was added (or could not be) -- or now, on this
  // thread, if that many are free already. Starts a background growth when
  // the pool can still grow, and asks every cache's owner to return its
  // parked buffers (PoolCache). Call after get() returned nullptr; `wake`
  // should post to the caller's event loop and retry there. Waiters still
  // registered when the pool is destroyed are dropped uncalled.
  // `want`: how many buffers the caller needs at once (a transfer reserves
  // all its chunks or none); it is woken when that many are on the shared
  // list (or a slab was added), not by every single buffer.
  void notify_on_release(std::function<void()> wake, std::size_t want = 1);
  // Registers the first slab now (inline, at stack start) if the pool has
  // none: the first SENDs of a stack never wait for the grower thread.
  // Returns the registration's error (the pool then grows on demand).
  std::error_code prefill_slab();
  // The device went away (docs/rdma-transport.md, Device removal): every
  // slab is deregistered, its memory kept (buffers in use keep their bytes
  // and come back as usual), and nothing is registered until
  // reregister_all(): get() finds no new slab (last_error() says why).
  // Waits for a registration in flight. Idempotent.
  void deregister_all() noexcept;
  // The device is back: every slab registered again through the registrar
  // (now on the new PD), and every buffer, in use or free, takes its slab's
  // new keys. No work request may use the old keys meanwhile. On an error
  // the slabs registered so far are deregistered again and the pool stays
  // deregistered.
  std::error_code reregister_all();
  // Returns a buffer that was never wrapped in a BufferPtr (or whose
  // references are all gone). Thread-safe; with a cache, lock-free mostly.
  void put(PoolBuffer* buf, PoolCache* cache = nullptr) noexcept;
  // Wraps [0, len) of a buffer: the buffer returns to the pool when the last
  // reference to it drops, on whatever thread that happens.
  static BufferPtr wrap(PoolBuffer* buf, std::size_t len) noexcept;
  // Whether `seg` is one of this pool's buffers (e.g. received data that an
  // application sends on: BulkTransfers::offer, bulk_transfers_impl.h).
  bool owns(const Segment& seg) const noexcept;

  const PoolConfig& config() const noexcept { return config_; }
  std::size_t buffer_size() const noexcept { return config_.buffer_size; }
  // Counters.
  std::size_t registered_bytes() const noexcept { return registered_bytes_.load(std::memory_order_relaxed); }
  std::size_t buffers_total() const noexcept { return total_.load(std::memory_order_relaxed); }
  // Exact when no get/put is in flight (it sums per-cache counts).
  std::size_t buffers_in_use() const noexcept;
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
  struct Waiter {
    std::size_t want;
    std::function<void()> wake;
  };
  using Waiters = std::vector<std::function<void()>>;
  // Adds a slab: called with `lk` holding mu_, releases it while allocating
  // and registering, holds it again on return. False at the cap (counting
  // slabs being added elsewhere) or on failure.
  bool grow(std::unique_lock<std::mutex>& lk);
  std::unique_ptr<Slab> make_slab(std::size_t n, std::error_code& ec);  // no lock held
  void request_growth_locked();
  void grower_main();
  std::int64_t in_use_locked() const noexcept;
  Waiters take_waiters_locked(bool all = false) noexcept;
  static void wake(Waiters&& w) noexcept;
  void flush(PoolCache& cache, std::size_t keep) noexcept;

  PoolConfig config_;
  Registrar& registrar_;
  mutable std::mutex mu_;
  BufferSList free_;  // guarded by mu_
  std::vector<std::unique_ptr<Slab>> slabs_;
  std::error_code last_error_;
  bool deregistered_ = false;  // under mu_: deregister_all() until reregister_all()
  std::atomic<bool> hugepages_active_{false};
  std::atomic<std::size_t> registered_bytes_{0};
  std::atomic<std::size_t> total_{0};
  // Under mu_: buffers being registered (counted against the cap), buffers
  // got/put without a cache (plus those of caches already destroyed), the
  // live caches, and who waits for a buffer.
  std::size_t pending_ = 0;
  std::int64_t in_use_uncached_ = 0;
  std::vector<PoolCache*> caches_;
  std::vector<Waiter> waiters_;
  std::atomic<bool> waiting_{false};  // waiters_ non-empty: cached puts take the locked path
  std::condition_variable grown_;     // a slab was added (inline growers wait on pending ones)
  // The grower thread (started on first use), under mu_.
  std::condition_variable grow_cv_;
  bool grow_requested_ = false;
  bool stop_ = false;
  std::thread grower_;
};

}  // namespace siphon::rdma
