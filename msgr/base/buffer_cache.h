// The cache of large heap segments behind Segment::allocate (buffer.cc says
// why it exists): its statistics, and a way to give its memory back.
#pragma once

#include <cstddef>

namespace siphon {

struct LargeSegmentCacheStats {
  std::size_t blocks = 0;  // cached now
  std::size_t bytes = 0;   // their capacity
  std::size_t hits = 0;    // large allocations served from the cache, ever
  std::size_t misses = 0;  // large allocations that went to the heap, ever
};

LargeSegmentCacheStats large_segment_cache_stats();

// Frees every cached block (tests; a daemon that wants the memory back).
void large_segment_cache_clear();

}  // namespace siphon
