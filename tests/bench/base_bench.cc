// Micro-benchmarks of the base layer. Run: build/release/tests/bench/base_bench
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "msgr/base/buffer.h"
#include "msgr/base/crc32c.h"

namespace {

void BM_Crc32c(benchmark::State& state) {
  std::vector<unsigned char> data(static_cast<std::size_t>(state.range(0)), 0x5a);
  std::uint32_t crc = 0xFFFFFFFFu;
  for (auto _ : state) {
    crc = siphon::crc32c(crc, data.data(), data.size());
    benchmark::DoNotOptimize(crc);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}
BENCHMARK(BM_Crc32c)->Arg(64)->Arg(4096)->Arg(65536)->Arg(4 << 20);

// Baseline for the CRC figures, measured in the same run: copying the same
// bytes once.
void BM_Memcpy(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  std::vector<unsigned char> src(n, 0x5a), dst(n);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), n);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}
BENCHMARK(BM_Memcpy)->Arg(64)->Arg(4096)->Arg(65536)->Arg(4 << 20);

void BM_BufferListSmallAppends(benchmark::State& state) {
  for (auto _ : state) {
    siphon::BufferList bl;
    for (int i = 0; i < 64; ++i) bl.append("0123456789abcdef", 16);
    benchmark::DoNotOptimize(bl.length());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * 64 * 16);
}
BENCHMARK(BM_BufferListSmallAppends);

}  // namespace

BENCHMARK_MAIN();
