// Frame codec micro-benchmarks: encode + decode of one MESSAGE frame
// (header2-sized segment 0 and a data segment), rev1 crc mode.
// Run: build/release/tests/bench/proto_bench
#include <benchmark/benchmark.h>

#include <string>

#include "msgr/proto/frame.h"
#include "message_frame.h"

namespace {

using siphon::BufferList;
namespace proto = siphon::proto;

using siphon::bench_frames::message;

// Encode, then decode the wire image as one received buffer. Both passes
// compute the segment crcs, so this is about 2x crc32c over the payload plus
// the per-frame overhead.
void BM_EncodeDecodeMessage(benchmark::State& state) {
  const proto::Frame f = message(static_cast<std::size_t>(state.range(0)));
  const auto rev = static_cast<proto::FrameRev>(state.range(1));
  proto::FrameDecoder decoder(rev, proto::FrameLimits{});
  proto::Frame out;
  for (auto _ : state) {
    BufferList wire = proto::encode_frame(f, rev);
    decoder.feed(std::move(wire));
    if (decoder.next(out) != proto::FrameDecoder::Status::frame) {
      state.SkipWithError("decode failed");
      break;
    }
    benchmark::DoNotOptimize(out.segments[3].length());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}
BENCHMARK(BM_EncodeDecodeMessage)
    ->ArgNames({"bytes", "rev"})
    ->Args({4096, 1})
    ->Args({1 << 20, 1})
    ->Args({4096, 0})
    ->Args({1 << 20, 0});

// Baseline for the above: the two crc32c passes over the same bytes that
// encode + decode cannot avoid. The difference is the codec's own cost.
void BM_BaselineTwoCrcPasses(benchmark::State& state) {
  const BufferList data = BufferList::copy_of(std::string(static_cast<std::size_t>(state.range(0)), 'd'));
  for (auto _ : state) {
    std::uint32_t crc = data.crc32c(0xFFFFFFFFu);
    benchmark::DoNotOptimize(crc);
    crc = data.crc32c(0xFFFFFFFFu);
    benchmark::DoNotOptimize(crc);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}
BENCHMARK(BM_BaselineTwoCrcPasses)->Arg(4096)->Arg(1 << 20);

void BM_EncodeOnly(benchmark::State& state) {
  const proto::Frame f = message(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) {
    BufferList wire = proto::encode_frame(f, proto::FrameRev::rev1);
    benchmark::DoNotOptimize(wire.length());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}
BENCHMARK(BM_EncodeOnly)->Arg(4096)->Arg(1 << 20);

}  // namespace

BENCHMARK_MAIN();
