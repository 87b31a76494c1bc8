// Inside the perf counter library: a logger's storage. Not for users.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "msgr/perf/perf_counters.h"

namespace siphon::perf::detail {

// One counter's memory. `v` is the value, or an average's sum; `begun` and
// `count` bracket an average's updates (a sequence lock). 32 bytes in an
// array aligned to 64: a slot never straddles two cache lines, so a reader's
// three loads see one line (a straddling slot made consistent reads rare
// while a writer was busy).
struct Slot {
  std::atomic<std::uint64_t> v{0};
  std::atomic<std::uint64_t> count{0};
  std::atomic<std::uint64_t> begun{0};
  // Written once when the logger is created, read by inc() so the hot path
  // needs no look-up in the logger's CounterInfo table.
  bool average = false;  // kLongRunAvg: inc() updates sum and count
  bool shared = false;   // the logger's: fetch_add instead of load/store
  std::uint8_t pad[6] = {};
};
static_assert(sizeof(Slot) == 32);
// Slots either side of a logger's array (2 × 32 bytes = one cache line), so
// no two loggers' counters share a line; the same for histogram cells.
inline constexpr std::size_t kPadSlots = 2;
inline constexpr std::size_t kPadCells = 8;

// Frees a slot array made by make_slots() (aligned_alloc; not over-aligned
// new, which trips TSan's allocator in clang 14).
struct FreeSlots {
  void operator()(Slot* p) const noexcept;
};
using SlotArray = std::unique_ptr<Slot[], FreeSlots>;
SlotArray make_slots(std::size_t n);

// What `perf reset` moved the zero to (readers subtract it).
struct Baseline {
  std::atomic<std::uint64_t> v{0};
  std::atomic<std::uint64_t> count{0};
};

std::int32_t bucket_of(const HistogramAxis& a, std::int64_t v) noexcept;
// A consistent (sum, count) of an average.
std::pair<std::uint64_t, std::uint64_t> read_pair(const Slot& s) noexcept;

}  // namespace siphon::perf::detail

namespace siphon::perf {

struct Logger::Impl {
  std::string name;
  std::vector<std::pair<std::string, std::string>> labels;
  int first = 0, last = 0;
  bool shared = false;
  std::vector<CounterInfo> infos;  // [idx - first]
  detail::SlotArray storage;  // kPadSlots + n + kPadSlots
  std::unique_ptr<detail::Baseline[]> base;
  std::vector<std::unique_ptr<std::atomic<std::uint64_t>[]>> hist;       // padded cells, [x * ny + y]
  std::vector<std::unique_ptr<std::atomic<std::uint64_t>[]>> hist_base;  // unpadded

  detail::Slot* slot(int idx) noexcept {
    // One unsigned compare covers both ends of [first, last).
    const auto i = static_cast<unsigned>(idx - first);
    if (i >= static_cast<unsigned>(last - first)) return nullptr;
    return &storage[detail::kPadSlots + i];
  }
};

}  // namespace siphon::perf
