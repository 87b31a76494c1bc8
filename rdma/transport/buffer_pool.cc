#include "rdma/transport/buffer_pool.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <new>

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

PoolCache::~PoolCache() { pool_->flush(*this, 0); }

BufferPool::BufferPool(PoolConfig config, Registrar& registrar)
    : config_(std::move(config)), registrar_(registrar) {
  config_.buffer_size = round_up(std::max<std::size_t>(config_.buffer_size, 64), 64);
  config_.buffers_per_slab = std::max<std::size_t>(1, config_.buffers_per_slab);
  config_.cache_batch = std::max<std::size_t>(1, config_.cache_batch);
}

BufferPool::~BufferPool() {
  const std::size_t in_use = in_use_.load();
  if (in_use != 0) {
    // A bug above us: memory is still referenced. Keep it mapped (leak it)
    // rather than free memory someone may still touch.
    SIPHON_LOG(rdma, 0, "{}: destroyed with {} buffers in use; leaking their slabs", config_.name, in_use);
    for (auto& s : slabs_) s.release();
    return;
  }
  free_.clear();
  for (auto& s : slabs_) {
    registrar_.deregister_region(s->keys);
    if (s->huge) ::munmap(s->memory, s->bytes);
    else std::free(s->memory);
  }
}

std::error_code BufferPool::last_error() const noexcept {
  std::lock_guard lk(mu_);
  return last_error_;
}

bool BufferPool::grow_locked() {
  const std::size_t have = total_.load(std::memory_order_relaxed);
  if (have >= config_.max_buffers) return false;
  const std::size_t n = std::min(config_.buffers_per_slab, config_.max_buffers - have);
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
    } else if (!hugepages_active_ && slabs_.empty()) {
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
      last_error_ = errc::out_of_memory;
      return false;
    }
  }
  if (const std::error_code ec = registrar_.register_region(slab->memory, slab->bytes, slab->keys)) {
    SIPHON_LOG(rdma, 0, "{}: registering a {}-byte slab failed: {}", config_.name, slab->bytes, ec.message());
    last_error_ = ec;
    if (slab->huge) ::munmap(slab->memory, slab->bytes);
    else std::free(slab->memory);
    return false;
  }
  slab->buffers.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    slab->buffers.emplace_back(new PoolBuffer(slab->memory + i * config_.buffer_size,
                                              config_.buffer_size, slab->keys, this));
    free_.push_front(*slab->buffers.back());
  }
  total_.fetch_add(n, std::memory_order_relaxed);
  registered_bytes_.fetch_add(slab->bytes, std::memory_order_relaxed);
  slabs_.push_back(std::move(slab));
  return true;
}

PoolBuffer* BufferPool::get(PoolCache* cache) {
  if (cache != nullptr && cache->free_.empty()) {
    std::lock_guard lk(mu_);
    if (free_.empty()) grow_locked();
    for (std::size_t i = 0; i < config_.cache_batch && !free_.empty(); ++i) {
      PoolBuffer& b = free_.front();
      free_.pop_front();
      cache->free_.push_front(b);
    }
  }
  PoolBuffer* buf = nullptr;
  if (cache != nullptr) {
    if (cache->free_.empty()) return nullptr;
    buf = &cache->free_.front();
    cache->free_.pop_front();
  } else {
    std::lock_guard lk(mu_);
    if (free_.empty() && !grow_locked()) return nullptr;
    buf = &free_.front();
    free_.pop_front();
  }
  buf->segment_.reset_for_reuse();
  in_use_.fetch_add(1, std::memory_order_relaxed);
  return buf;
}

void BufferPool::put(PoolBuffer* buf, PoolCache* cache) noexcept {
  in_use_.fetch_sub(1, std::memory_order_relaxed);
  if (cache != nullptr) {
    cache->free_.push_front(*buf);
    if (cache->free_.size() > 2 * config_.cache_batch) flush(*cache, config_.cache_batch);
    return;
  }
  std::lock_guard lk(mu_);
  free_.push_front(*buf);
}

void BufferPool::flush(PoolCache& cache, std::size_t keep) noexcept {
  std::lock_guard lk(mu_);
  while (cache.free_.size() > keep) {
    PoolBuffer& b = cache.free_.front();
    cache.free_.pop_front();
    free_.push_front(b);
  }
}

BufferPtr BufferPool::wrap(PoolBuffer* buf, std::size_t len) noexcept {
  return BufferPtr(&buf->segment_, 0, len);
}

}  // namespace siphon::rdma
