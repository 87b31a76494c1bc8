// The frame the micro-benchmarks push through the codecs: a MESSAGE frame as
// the messenger sends one, header2-sized segment 0 and the payload in the
// data segment (proto_bench, secure_bench).
#pragma once

#include <cstddef>
#include <string>

#include "msgr/proto/frame.h"

namespace siphon::bench_frames {

inline proto::Frame message(std::size_t data_len) {
  proto::Frame f;
  f.tag = proto::Tag::message;
  f.segments[0] = BufferList::copy_of(std::string(41, 'h'));
  f.segments[3] = BufferList::copy_of(std::string(data_len, 'd'));
  return f;
}

}  // namespace siphon::bench_frames
