#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "msgr/base/buffer.h"
#include "msgr/base/buffer_cache.h"

namespace siphon {
namespace {

std::string pattern(std::size_t n, int seed = 1) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 7 + seed) & 0xff);
  return s;
}

TEST(BufferList, SmallAppendsShareOneSegment) {
  BufferList bl;
  for (int i = 0; i < 100; ++i) bl.append("abcd", 4);
  EXPECT_EQ(bl.length(), 400u);
  EXPECT_EQ(bl.segment_count(), 1u);
  EXPECT_EQ(bl.to_string().substr(0, 8), "abcdabcd");
}

TEST(BufferList, AppendDoesNotScribbleOnSharedTail) {
  BufferList a;
  a.append("hello", 5);
  BufferList b = a;  // shares the segment
  b.append(" world", 6);
  a.append("!!", 2);
  EXPECT_EQ(a.to_string(), "hello!!");
  EXPECT_EQ(b.to_string(), "hello world");
}

TEST(BufferList, SliceSharesMemory) {
  const std::string s = pattern(10000);
  BufferList bl;
  bl.append(BufferPtr(s.data(), 3000));
  bl.append(BufferPtr(s.data() + 3000, 7000));
  BufferList sl = bl.slice(2990, 20);
  EXPECT_EQ(sl.to_string(), s.substr(2990, 20));
  EXPECT_EQ(sl.segment_count(), 2u);
  EXPECT_EQ(sl.ptrs()[0].segment(), bl.ptrs()[0].segment());
  EXPECT_EQ(sl.ptrs()[0].data(), bl.ptrs()[0].data() + 2990);
  EXPECT_TRUE(bl.slice(9990, 11).empty()) << "out-of-range slices are empty";
  EXPECT_EQ(bl.slice(10000, 0).length(), 0u);
}

TEST(BufferList, SegmentOutlivesList) {
  BufferList sl;
  {
    BufferList bl;
    bl.append(pattern(100));
    sl = bl.slice(10, 50);
  }
  EXPECT_EQ(sl.to_string(), pattern(100).substr(10, 50));
  EXPECT_EQ(sl.ptrs()[0].segment()->use_count(), 1u);
}

TEST(BufferList, ConsumeAndSplitFront) {
  const std::string s = pattern(5000);
  BufferList bl;
  for (std::size_t off = 0; off < s.size(); off += 1000) bl.append(BufferPtr(s.data() + off, 1000));
  BufferList head = bl.split_front(1500);
  EXPECT_EQ(head.to_string(), s.substr(0, 1500));
  EXPECT_EQ(bl.to_string(), s.substr(1500));
  bl.consume_front(2500);
  EXPECT_EQ(bl.to_string(), s.substr(4000));
  EXPECT_EQ(bl.segment_count(), 1u);
  bl.consume_front(99999);
  EXPECT_TRUE(bl.empty());
}

TEST(BufferList, ContiguousCopiesOnlyWhenNeeded) {
  BufferList one;
  one.append(pattern(100));
  const std::byte* before = one.ptrs()[0].data();
  EXPECT_EQ(one.contiguous().data(), before);

  BufferList many;
  many.append(BufferPtr("ab", 2));
  many.append(BufferPtr("cd", 2));
  auto span = many.contiguous();
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(span.data()), span.size()), "abcd");
  EXPECT_EQ(many.segment_count(), 1u);
}

TEST(BufferList, GatherAndCursor) {
  BufferList bl;
  bl.append(BufferPtr("0123", 4));
  bl.append(BufferPtr("4567", 4));
  bl.append(BufferPtr("89", 2));
  std::vector<iovec> iov;
  EXPECT_EQ(bl.gather(iov), 3u);
  EXPECT_EQ(iov[1].iov_len, 4u);

  BufferCursor c(bl);
  char buf[6] = {};
  ASSERT_TRUE(c.read(buf, 3));
  EXPECT_EQ(std::string(buf, 3), "012");
  ASSERT_TRUE(c.skip(2));
  BufferList rest;
  ASSERT_TRUE(c.read_list(4, rest));
  EXPECT_EQ(rest.to_string(), "5678");
  EXPECT_EQ(c.remaining(), 1u);
  EXPECT_FALSE(c.read(buf, 2)) << "reading past the end fails and reads nothing";
  EXPECT_EQ(c.remaining(), 1u);
}

TEST(BufferList, Equality) {
  BufferList a = BufferList::copy_of("abcdef");
  BufferList b;
  b.append(BufferPtr("abc", 3));
  b.append(BufferPtr("def", 3));
  EXPECT_EQ(a, b);
  b.append_zeros(1);
  EXPECT_FALSE(a == b);
}

// Memory from a pool: the segment carries the region's keys and goes back to
// its owner when the last reference drops.
struct FakePool {
  std::byte memory[256];
  int released = 0;
  Segment seg;
  static void release(Segment* s) noexcept { static_cast<FakePool*>(s->owner())->released++; }
  FakePool() : seg(memory, sizeof(memory), &FakePool::release, &keys(), this) {}
  static const RegionKeys& keys() {
    static const RegionKeys k{0x11, 0x22, 7};
    return k;
  }
};

TEST(BufferList, RegisteredSegmentsKeepKeysAndReturnToOwner) {
  FakePool pool;
  {
    BufferList bl;
    bl.append(BufferPtr(&pool.seg, 0, 128));
    BufferList copy = bl.slice(64, 64);
    ASSERT_NE(copy.ptrs()[0].keys(), nullptr);
    EXPECT_EQ(copy.ptrs()[0].keys()->rkey, 0x22u);
    EXPECT_EQ(pool.released, 0);
  }
  EXPECT_EQ(pool.released, 1);
  BufferList heap = BufferList::copy_of("x");
  EXPECT_EQ(heap.ptrs()[0].keys(), nullptr);
}

// Large segments come back from a bounded cache instead of fresh pages
// (buffer.cc): a released 4 MiB block serves the next allocation of its
// size class, the cache keeps at most 16 blocks / 64 MiB, and small
// segments never enter it.
TEST(Segment, LargeBlocksAreRecycledWithinBounds) {
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  large_segment_cache_clear();  // what earlier tests left
  ASSERT_EQ(large_segment_cache_stats().blocks, 0u);

  // Rounded up to whole MiB.
  Segment* a = Segment::allocate(4 * kMiB + 100);
  EXPECT_EQ(a->capacity(), 5 * kMiB);
  std::byte* const a_data = a->data();
  std::memset(a_data, 0xab, a->capacity());  // every byte of the rounded capacity is usable
  const auto before = large_segment_cache_stats();
  { BufferPtr hold(a, 0, 0); }  // the last reference goes: into the cache
  EXPECT_EQ(large_segment_cache_stats().blocks, 1u);
  EXPECT_EQ(large_segment_cache_stats().bytes, 5 * kMiB);

  // The same class is served from the cache, the same block.
  BufferPtr b(Segment::allocate(4 * kMiB + 4096), 0, 0);
  EXPECT_EQ(b.segment()->data(), a_data);
  EXPECT_EQ(b.segment()->use_count(), 1u);
  EXPECT_EQ(large_segment_cache_stats().hits, before.hits + 1);
  EXPECT_EQ(large_segment_cache_stats().blocks, 0u);
  // Another class is not.
  BufferPtr c(Segment::allocate(2 * kMiB), 0, 0);
  EXPECT_NE(c.segment()->data(), a_data);
  EXPECT_EQ(c.segment()->capacity(), 2 * kMiB);

  // Bounded: 20 blocks of 5 MiB released, at most 64 MiB (12 of them) kept.
  {
    std::vector<BufferPtr> many;
    for (int i = 0; i < 20; ++i) many.emplace_back(Segment::allocate(5 * kMiB), 0, 0);
  }
  const auto after = large_segment_cache_stats();
  EXPECT_LE(after.bytes, 64 * kMiB);
  EXPECT_LE(after.blocks, 16u);
  EXPECT_EQ(after.blocks, 12u);

  // Below 1 MiB nothing is cached and the capacity is exact.
  const auto small_before = large_segment_cache_stats();
  {
    BufferPtr small(Segment::allocate(kMiB - 1), 0, 0);
    EXPECT_EQ(small.segment()->capacity(), kMiB - 1);
  }
  EXPECT_EQ(large_segment_cache_stats().blocks, small_before.blocks);
  EXPECT_EQ(large_segment_cache_stats().misses, small_before.misses);
}

// Heap segments below the large size are plain malloc blocks aligned by hand
// (buffer.cc): the data is 64-byte aligned for every capacity, the whole
// capacity is writable, and the release frees the block itself (ASan reports
// a free of the aligned address or a leak otherwise).
TEST(Segment, SmallBlocksAreAlignedAndFreed) {
  for (std::size_t cap : {std::size_t{0}, std::size_t{1}, std::size_t{41}, std::size_t{64}, std::size_t{4096 - 128},
                          std::size_t{20000}, std::size_t{(1u << 20) - 1}}) {
    Segment* seg = Segment::allocate(cap);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(seg->data()) % 64, 0u) << cap;
    EXPECT_GE(seg->capacity(), cap);
    if (cap > 0) {
      std::memset(seg->data(), 0xA5, cap);
      EXPECT_EQ(static_cast<unsigned char>(seg->data()[cap - 1]), 0xA5);
    }
    seg->ref();
    seg->unref();
  }
}

}  // namespace
}  // namespace siphon
