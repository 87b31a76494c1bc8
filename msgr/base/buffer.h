// Buffers: refcounted segments of memory and lists of slices over them.
//
//   Segment     one contiguous block of memory with an atomic refcount. It is
//               either heap memory (header and data in one allocation) or
//               memory owned by someone else, such as a registered RDMA pool,
//               in which case it carries the region's keys and a release hook
//               that hands the block back to its owner.
//   BufferPtr   a counted reference to [offset, offset+length) of a segment.
//   BufferList  an ordered list of BufferPtrs: the unit every layer passes
//               around. Appending, slicing and concatenating never copy
//               payload bytes; contiguous() copies only when the list spans
//               several segments.
//
// A BufferList is not thread-safe; Segments may be shared across threads.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/container/small_vector.hpp>
#include <sys/uio.h>

namespace siphon {

// Keys of the registered memory region a segment lies in (RDMA pools).
struct RegionKeys {
  std::uint32_t lkey = 0;
  std::uint32_t rkey = 0;
  std::uint64_t region_id = 0;  // the owner's identifier of the region
};

class Segment {
 public:
  // Called when the last reference goes away. The owner reclaims the segment
  // (and its header, which it allocated).
  using ReleaseFn = void (*)(Segment* seg) noexcept;

  // Heap segment with room for at least `capacity` bytes, 64-byte aligned.
  // From 1 MiB up, the capacity is rounded up to whole MiB and the block is
  // recycled through a small process-wide cache (buffer.cc says why;
  // buffer_cache.h has its statistics).
  static Segment* allocate(std::size_t capacity);


  // A segment header over memory the caller owns. Typically embedded in a
  // pool's own bookkeeping; `release` returns it to the pool.
  Segment(std::byte* data, std::size_t capacity, ReleaseFn release,
          const RegionKeys* keys = nullptr, void* owner = nullptr) noexcept
      : data_(data), capacity_(capacity), release_(release), owner_(owner) {
    if (keys != nullptr) {
      keys_ = *keys;
      registered_ = true;
    }
  }
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  std::byte* data() const noexcept { return data_; }
  std::size_t capacity() const noexcept { return capacity_; }
  // Registered-region keys, or nullptr for ordinary heap memory.
  const RegionKeys* keys() const noexcept { return registered_ ? &keys_ : nullptr; }
  void* owner() const noexcept { return owner_; }
  // New keys for a registered segment whose memory was registered again (an
  // RDMA pool after its device came back). Only the owner calls this, while
  // no work request can use the keys.
  void rekey(const RegionKeys& keys) noexcept { keys_ = keys; }

  void ref() noexcept { refs_.fetch_add(1, std::memory_order_relaxed); }
  void unref() noexcept {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) release_(this);
  }
  std::uint32_t use_count() const noexcept { return refs_.load(std::memory_order_acquire); }

  // Re-arms a pooled segment handed out again (refcount back to zero, tail
  // reset). Only the owner calls this, while it holds no references.
  void reset_for_reuse() noexcept {
    refs_.store(0, std::memory_order_relaxed);
    used_ = 0;
  }

 private:
  friend class BufferList;
  friend class BufferPtr;
  std::byte* data_;
  std::size_t capacity_;
  std::size_t used_ = 0;  // bytes handed out from the front (append room after)
  std::atomic<std::uint32_t> refs_{0};
  bool registered_ = false;
  RegionKeys keys_{};
  ReleaseFn release_;
  void* owner_;
};

class BufferPtr {
 public:
  BufferPtr() noexcept = default;
  // A new heap segment holding a copy of `len` bytes.
  BufferPtr(const void* src, std::size_t len);
  // A reference to [off, off+len) of `seg`; marks those bytes as used.
  BufferPtr(Segment* seg, std::size_t off, std::size_t len) noexcept;
  BufferPtr(const BufferPtr& o) noexcept : seg_(o.seg_), off_(o.off_), len_(o.len_) {
    if (seg_ != nullptr) seg_->ref();
  }
  BufferPtr(BufferPtr&& o) noexcept
      : seg_(std::exchange(o.seg_, nullptr)), off_(o.off_), len_(std::exchange(o.len_, 0)) {}
  BufferPtr& operator=(BufferPtr o) noexcept {
    swap(o);
    return *this;
  }
  ~BufferPtr() {
    if (seg_ != nullptr) seg_->unref();
  }
  void swap(BufferPtr& o) noexcept {
    std::swap(seg_, o.seg_);
    std::swap(off_, o.off_);
    std::swap(len_, o.len_);
  }

  const std::byte* data() const noexcept { return seg_ != nullptr ? seg_->data() + off_ : nullptr; }
  std::byte* mutable_data() noexcept { return seg_ != nullptr ? seg_->data() + off_ : nullptr; }
  std::size_t length() const noexcept { return len_; }
  std::size_t offset() const noexcept { return off_; }
  Segment* segment() const noexcept { return seg_; }
  const RegionKeys* keys() const noexcept { return seg_ != nullptr ? seg_->keys() : nullptr; }
  std::span<const std::byte> bytes() const noexcept { return {data(), len_}; }

  // Narrows the view to [off, off+len) of the current view.
  void narrow(std::size_t off, std::size_t len) noexcept {
    off_ += off;
    len_ = len;
  }

 private:
  friend class BufferList;
  Segment* seg_ = nullptr;
  std::size_t off_ = 0;
  std::size_t len_ = 0;
};

class BufferList {
 public:
  using Ptrs = boost::container::small_vector<BufferPtr, 4>;
  // Size of the heap segments small appends go into.
  static constexpr std::size_t kChunk = 4096 - 128;

  BufferList() = default;
  BufferList(const BufferList&) = default;
  BufferList(BufferList&& o) noexcept : ptrs_(std::move(o.ptrs_)), len_(std::exchange(o.len_, 0)) {}
  BufferList& operator=(const BufferList&) = default;
  BufferList& operator=(BufferList&& o) noexcept {
    ptrs_ = std::move(o.ptrs_);
    len_ = std::exchange(o.len_, 0);
    o.ptrs_.clear();
    return *this;
  }

  static BufferList copy_of(const void* src, std::size_t len) {
    BufferList bl;
    bl.append(src, len);
    return bl;
  }
  static BufferList copy_of(std::string_view s) { return copy_of(s.data(), s.size()); }

  std::size_t length() const noexcept { return len_; }
  bool empty() const noexcept { return len_ == 0; }
  std::size_t segment_count() const noexcept { return ptrs_.size(); }
  const Ptrs& ptrs() const noexcept { return ptrs_; }
  void clear() noexcept {
    ptrs_.clear();
    len_ = 0;
  }

  // Copies bytes in, into the tail segment's spare room when this list is its
  // only user, else into a new segment.
  void append(const void* src, std::size_t len);
  void append(std::string_view s) { append(s.data(), s.size()); }
  void append_zeros(std::size_t len);
  // Reserves `len` writable bytes at the tail and returns them (for encoders
  // that fill fixed-size fields in place). Valid until the next mutation.
  std::byte* append_uninitialized(std::size_t len);
  // Shares memory: no payload bytes are copied.
  void append(BufferPtr ptr);
  void append(const BufferList& other);
  void append(BufferList&& other);

  // The bytes [off, off+len) as a new list sharing this list's segments.
  BufferList slice(std::size_t off, std::size_t len) const;
  // Drops `len` bytes from the front.
  void consume_front(std::size_t len);
  // Splits off the first `len` bytes and returns them (shared, not copied).
  BufferList split_front(std::size_t len);

  // Copies [off, off+len) out into `dst`.
  void copy_out(std::size_t off, std::size_t len, void* dst) const;
  std::string to_string() const;

  // Makes the list one segment (copying only if it has several) and returns it.
  std::span<const std::byte> contiguous();
  bool is_contiguous() const noexcept { return ptrs_.size() <= 1; }

  // Appends one iovec per non-empty segment to `out`; returns how many.
  std::size_t gather(std::vector<iovec>& out) const;

  std::uint32_t crc32c(std::uint32_t seed) const noexcept;

  friend bool operator==(const BufferList& a, const BufferList& b);

 private:
  Ptrs ptrs_;
  std::size_t len_ = 0;
};

// Sequential reader over a BufferList (does not own it).
class BufferCursor {
 public:
  explicit BufferCursor(const BufferList& bl) noexcept : bl_(&bl), remaining_(bl.length()) {}
  std::size_t remaining() const noexcept { return remaining_; }
  std::size_t position() const noexcept { return bl_->length() - remaining_; }
  // Copies `len` bytes out; returns false (and reads nothing) if fewer remain.
  bool read(void* dst, std::size_t len) noexcept;
  bool skip(std::size_t len) noexcept;
  // Shares the next `len` bytes as a list; false if fewer remain.
  bool read_list(std::size_t len, BufferList& out);

 private:
  // Moves `len` bytes forward (len <= remaining_), calling
  // each(const std::byte* data, std::size_t n) for every piece passed.
  template <class F>
  void advance(std::size_t len, F&& each) noexcept;

  const BufferList* bl_;
  std::size_t idx_ = 0;     // current segment
  std::size_t inner_ = 0;   // offset inside it
  std::size_t remaining_;
};

// Writes `len` bytes to a blocking `fd`, resuming after short writes.
// False when a write fails or writes nothing (errno tells why).
bool write_all(int fd, const void* data, std::size_t len) noexcept;
// The same for every segment of `bl`, in order.
bool write_all(int fd, const BufferList& bl) noexcept;

}  // namespace siphon
