// libFuzzer target: what an RDMA peer controls before any frame is parsed --
// the CM private data (ConnectInfo, RejectInfo) and the 16-byte header of
// every SEND with its read descriptors. Oracles: no crash, and anything
// accepted re-encodes to exactly the bytes it was decoded from.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "rdma/transport/rdma_wire.h"

using namespace siphon::rdma;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> in(data, size);
  ConnectInfo ci;
  if (!ConnectInfo::decode(in, ci)) {
    const auto again = ci.encode();
    if (std::memcmp(again.data(), data, ConnectInfo::kSize) != 0) __builtin_trap();
  }
  RejectInfo ri;
  (void)RejectInfo::decode(in, ri);
  SendHeader h;
  if (!SendHeader::decode(in, h)) {
    std::uint8_t out[SendHeader::kSize];
    h.encode(out);
    if (std::memcmp(out, data, SendHeader::kSize) != 0) __builtin_trap();
    if (h.type == SendType::read_request)
      for (std::size_t off = SendHeader::kSize; off + ReadDescriptor::kSize <= size; off += ReadDescriptor::kSize) {
        const ReadDescriptor d = ReadDescriptor::decode(data + off);
        std::uint8_t re[ReadDescriptor::kSize];
        d.encode(re);
        if (std::memcmp(re, data + off, ReadDescriptor::kSize) != 0) __builtin_trap();
      }
  }
  return 0;
}
