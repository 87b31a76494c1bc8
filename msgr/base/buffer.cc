#include "msgr/base/buffer.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <new>
#include <utility>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SIPHON_BUFFER_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define SIPHON_BUFFER_ASAN 1
#endif
#ifdef SIPHON_BUFFER_ASAN
#include <sanitizer/asan_interface.h>
#else
#define ASAN_POISON_MEMORY_REGION(addr, size) ((void)(addr), (void)(size))
#define ASAN_UNPOISON_MEMORY_REGION(addr, size) ((void)(addr), (void)(size))
#endif

#include "msgr/base/buffer_cache.h"
#include "msgr/base/crc32c.h"

namespace siphon {
namespace {

constexpr std::size_t kAlign = 64;

// Header and data in one aligned block: [Segment][pad to 64][data...].
constexpr std::size_t header_size() {
  return (sizeof(Segment) + kAlign - 1) / kAlign * kAlign;
}

// Small heap segments: one plain malloc block, aligned by hand. An aligned
// operator new goes to glibc's memalign, which carves an aligned chunk out
// of a larger one and frees the pieces around it; at one header or frame
// per message the allocator took 13 % of the driven RDMA workers' samples
// at 4 KiB and 64 in flight, 8 % with this (malloc_consolidate,
// _int_memalign, unlink_chunk; docs/performance.md, "Small segments without
// memalign"). The block's own address is kept in owner_ for the free.
constexpr std::size_t kMallocAlign = alignof(std::max_align_t);
static_assert(kAlign % kMallocAlign == 0);

void release_heap(Segment* seg) noexcept {
  void* raw = seg->owner();
  seg->~Segment();
  std::free(raw);
}

// Large segments (a receive buffer sized for a 4 MiB frame, a secure frame's
// plaintext) are recycled through a small process-wide cache instead of
// going back to malloc. glibc serves such blocks with mmap, or from a heap
// top that it trims on free, so each one came back as fresh pages: about
// 1,000 page faults, each zeroing a page, per 4 MiB message. Measured with
// siphon-bench (docs/performance.md, "Large buffers recycled"), that churn
// made a 4 MiB secure stream cost 25 ms of CPU per message instead of 5
// once the heap was in that state.
//
// Capacities round up to whole MiB so a block fits the next message of the
// same size class; at most kLargeCacheBlocks blocks and kLargeCacheBytes
// bytes are kept (the rest is freed), so the cache pins at most 64 MiB. One
// mutex, taken once per large allocation and release (next to a 1 MiB+
// copy). Under AddressSanitizer a cached block is poisoned, so a use after
// release is still reported.
constexpr std::size_t kLargeMin = std::size_t{1} << 20;
constexpr std::size_t kLargeCacheBlocks = 16;
constexpr std::size_t kLargeCacheBytes = std::size_t{64} << 20;

struct LargeCache {
  std::mutex mu;
  std::size_t bytes = 0;  // capacity held in `blocks`
  std::size_t hits = 0;
  std::size_t misses = 0;
  std::size_t count = 0;
  std::array<std::pair<void*, std::size_t>, kLargeCacheBlocks> blocks{};  // (block, capacity)
};

// Never destroyed: a segment may be released by another static destructor.
LargeCache& large_cache() {
  static LargeCache* const cache = new LargeCache;
  return *cache;
}

void release_large(Segment* seg) noexcept {
  const std::size_t cap = seg->capacity();
  seg->~Segment();
  void* block = seg;
  LargeCache& c = large_cache();
  {
    const std::lock_guard<std::mutex> lock(c.mu);
    if (c.count < kLargeCacheBlocks && c.bytes + cap <= kLargeCacheBytes) {
      ASAN_POISON_MEMORY_REGION(block, header_size() + cap);
      c.blocks[c.count++] = {block, cap};
      c.bytes += cap;
      return;
    }
  }
  ::operator delete(block, std::align_val_t{kAlign});
}

Segment* allocate_large(std::size_t capacity) {
  const std::size_t cap = (capacity + kLargeMin - 1) / kLargeMin * kLargeMin;
  LargeCache& c = large_cache();
  void* block = nullptr;
  {
    const std::lock_guard<std::mutex> lock(c.mu);
    for (std::size_t i = c.count; i-- > 0;) {  // the most recently released first: its pages are warm
      if (c.blocks[i].second != cap) continue;
      block = c.blocks[i].first;
      c.blocks[i] = c.blocks[--c.count];
      c.bytes -= cap;
      ++c.hits;
      break;
    }
    if (block == nullptr) ++c.misses;
  }
  if (block != nullptr) {
    ASAN_UNPOISON_MEMORY_REGION(block, header_size() + cap);
  } else {
    block = ::operator new(header_size() + cap, std::align_val_t{kAlign});
  }
  auto* data = static_cast<std::byte*>(block) + header_size();
  return new (block) Segment(data, cap, &release_large);
}

}  // namespace

LargeSegmentCacheStats large_segment_cache_stats() {
  LargeCache& c = large_cache();
  const std::lock_guard<std::mutex> lock(c.mu);
  return {c.count, c.bytes, c.hits, c.misses};
}

void large_segment_cache_clear() {
  LargeCache& c = large_cache();
  std::array<std::pair<void*, std::size_t>, kLargeCacheBlocks> out{};
  std::size_t n = 0;
  {
    const std::lock_guard<std::mutex> lock(c.mu);
    n = c.count;
    for (std::size_t i = 0; i < n; ++i) out[i] = c.blocks[i];
    c.count = 0;
    c.bytes = 0;
  }
  for (std::size_t i = 0; i < n; ++i) {
    ASAN_UNPOISON_MEMORY_REGION(out[i].first, header_size() + out[i].second);
    ::operator delete(out[i].first, std::align_val_t{kAlign});
  }
}

Segment* Segment::allocate(std::size_t capacity) {
  if (capacity >= kLargeMin) return allocate_large(capacity);
  void* raw = std::malloc(header_size() + capacity + (kAlign - kMallocAlign));
  if (raw == nullptr) throw std::bad_alloc();
  const auto at = (reinterpret_cast<std::uintptr_t>(raw) + kAlign - 1) & ~std::uintptr_t{kAlign - 1};
  void* block = reinterpret_cast<void*>(at);
  auto* data = static_cast<std::byte*>(block) + header_size();
  return new (block) Segment(data, capacity, &release_heap, nullptr, raw);
}

BufferPtr::BufferPtr(const void* src, std::size_t len) {
  Segment* seg = Segment::allocate(len);
  if (len > 0) std::memcpy(seg->data(), src, len);
  seg->used_ = len;
  seg->ref();
  seg_ = seg;
  len_ = len;
}

BufferPtr::BufferPtr(Segment* seg, std::size_t off, std::size_t len) noexcept
    : seg_(seg), off_(off), len_(len) {
  seg->ref();
  seg->used_ = std::max(seg->used_, off + len);
}

void BufferList::append(const void* src, std::size_t len) {
  if (len == 0) return;
  std::memcpy(append_uninitialized(len), src, len);
}

void BufferList::append_zeros(std::size_t len) {
  if (len == 0) return;
  std::memset(append_uninitialized(len), 0, len);
}

std::byte* BufferList::append_uninitialized(std::size_t len) {
  if (!ptrs_.empty()) {
    BufferPtr& tail = ptrs_.back();
    Segment* seg = tail.seg_;
    // Extend in place only when nobody else can see the segment and the
    // tail of our view is the segment's used end.
    if (seg->use_count() == 1 && tail.off_ + tail.len_ == seg->used_ &&
        seg->capacity_ - seg->used_ >= len) {
      std::byte* p = seg->data_ + seg->used_;
      seg->used_ += len;
      tail.len_ += len;
      len_ += len;
      return p;
    }
  }
  Segment* seg = Segment::allocate(std::max(len, kChunk));
  ptrs_.emplace_back(seg, 0, len);
  len_ += len;
  return seg->data();
}

void BufferList::append(BufferPtr ptr) {
  if (ptr.length() == 0) return;
  len_ += ptr.length();
  ptrs_.push_back(std::move(ptr));
}

void BufferList::append(const BufferList& other) {
  for (const BufferPtr& p : other.ptrs_) append(p);
}

void BufferList::append(BufferList&& other) {
  if (ptrs_.empty()) {
    *this = std::move(other);
    return;
  }
  for (BufferPtr& p : other.ptrs_) append(std::move(p));
  other.clear();
}

BufferList BufferList::slice(std::size_t off, std::size_t len) const {
  BufferList out;
  if (off > len_ || len > len_ - off) return out;
  for (const BufferPtr& p : ptrs_) {
    if (len == 0) break;
    if (off >= p.length()) {
      off -= p.length();
      continue;
    }
    BufferPtr piece = p;
    const std::size_t n = std::min(len, p.length() - off);
    piece.narrow(off, n);
    out.append(std::move(piece));
    off = 0;
    len -= n;
  }
  return out;
}

void BufferList::consume_front(std::size_t len) {
  len = std::min(len, len_);
  len_ -= len;
  std::size_t drop = 0;
  while (len > 0) {
    BufferPtr& p = ptrs_[drop];
    if (len >= p.length()) {
      len -= p.length();
      ++drop;
    } else {
      p.narrow(len, p.length() - len);
      len = 0;
    }
  }
  ptrs_.erase(ptrs_.begin(), ptrs_.begin() + static_cast<std::ptrdiff_t>(drop));
}

BufferList BufferList::split_front(std::size_t len) {
  BufferList head = slice(0, std::min(len, len_));
  consume_front(len);
  return head;
}

void BufferList::copy_out(std::size_t off, std::size_t len, void* dst) const {
  auto* out = static_cast<std::byte*>(dst);
  for (const BufferPtr& p : ptrs_) {
    if (len == 0) break;
    if (off >= p.length()) {
      off -= p.length();
      continue;
    }
    const std::size_t n = std::min(len, p.length() - off);
    std::memcpy(out, p.data() + off, n);
    out += n;
    len -= n;
    off = 0;
  }
}

std::string BufferList::to_string() const {
  std::string s(len_, '\0');
  copy_out(0, len_, s.data());
  return s;
}

std::span<const std::byte> BufferList::contiguous() {
  if (ptrs_.empty()) return {};
  if (ptrs_.size() > 1) {
    Segment* seg = Segment::allocate(len_);
    copy_out(0, len_, seg->data());
    BufferPtr whole(seg, 0, len_);
    ptrs_.clear();
    ptrs_.push_back(std::move(whole));
  }
  return ptrs_.front().bytes();
}

std::size_t BufferList::gather(std::vector<iovec>& out) const {
  std::size_t n = 0;
  for (const BufferPtr& p : ptrs_) {
    if (p.length() == 0) continue;
    out.push_back(iovec{const_cast<std::byte*>(p.data()), p.length()});
    ++n;
  }
  return n;
}

std::uint32_t BufferList::crc32c(std::uint32_t seed) const noexcept {
  std::uint32_t crc = seed;
  for (const BufferPtr& p : ptrs_) crc = siphon::crc32c(crc, p.data(), p.length());
  return crc;
}

bool operator==(const BufferList& a, const BufferList& b) {
  if (a.length() != b.length()) return false;
  BufferCursor ca(a), cb(b);
  std::byte x[256], y[256];
  while (ca.remaining() > 0) {
    const std::size_t n = std::min(ca.remaining(), sizeof(x));
    ca.read(x, n);
    cb.read(y, n);
    if (std::memcmp(x, y, n) != 0) return false;
  }
  return true;
}

template <class F>
void BufferCursor::advance(std::size_t len, F&& each) noexcept {
  while (len > 0) {
    const BufferPtr& p = bl_->ptrs()[idx_];
    const std::size_t n = std::min(len, p.length() - inner_);
    each(p.data() + inner_, n);
    len -= n;
    remaining_ -= n;
    inner_ += n;
    if (inner_ == p.length()) {
      ++idx_;
      inner_ = 0;
    }
  }
}

bool BufferCursor::read(void* dst, std::size_t len) noexcept {
  if (len > remaining_) return false;
  auto* out = static_cast<std::byte*>(dst);
  advance(len, [&out](const std::byte* data, std::size_t n) {
    std::memcpy(out, data, n);
    out += n;
  });
  return true;
}

bool BufferCursor::skip(std::size_t len) noexcept {
  if (len > remaining_) return false;
  advance(len, [](const std::byte*, std::size_t) {});
  return true;
}

bool BufferCursor::read_list(std::size_t len, BufferList& out) {
  if (len > remaining_) return false;
  out.append(bl_->slice(position(), len));
  return skip(len);
}

bool write_all(int fd, const void* data, std::size_t len) noexcept {
  const auto* p = static_cast<const char*>(data);
  while (len > 0) {
    const ssize_t n = ::write(fd, p, len);
    if (n <= 0) return false;
    p += n;
    len -= static_cast<std::size_t>(n);
  }
  return true;
}

bool write_all(int fd, const BufferList& bl) noexcept {
  for (const BufferPtr& p : bl.ptrs())
    if (!write_all(fd, p.data(), p.length())) return false;
  return true;
}

}  // namespace siphon
