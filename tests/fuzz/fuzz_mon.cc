// libFuzzer target: the Ceph encodings of msgr/mon — the MonMap (every struct
// version 1..9, with its mon_info_t, entity_addrvec_t and legacy
// entity_addr_t maps) and the typed mon messages' decode_payload().
//
// The first byte picks what the rest is:
//   0     a MonMap encoding (what MMonMap carries as its blob)
//   1..6  the front of MMonMap, MPing, MMonSubscribe, MMonGetVersionReply,
//         MMonCommand, MMonCommandAck (message version from the second byte;
//         MMonCommand(Ack) take the last quarter of the bytes as data)
// Oracles besides "no crash, no sanitizer report":
//   * a MonMap decode either succeeds or fails with a decode error that
//     names the cause; a decoded map re-encodes (as v9) to bytes that decode
//     to the same map, and that encoding is a fixed point;
//   * decode_payload() throws only MonDecodeError, with a message.
#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>

#include "msgr/mon/messages.h"
#include "msgr/mon/monmap.h"
#include "msgr/proto/encoding.h"

namespace {

using namespace siphon;
using namespace siphon::mon;

void check(bool ok) {
  if (!ok) __builtin_trap();
}

void fuzz_monmap(const BufferList& in) {
  auto r = proto::decode_from<MonMap>(in, "MonMap");
  if (!r) {
    check(r.error().code == errc::decode_error);
    check(!r.error().message().empty());
    return;
  }
  const BufferList v9 = proto::encode_to_list(*r);
  auto again = proto::decode_from<MonMap>(v9, "MonMap");
  check(again.has_value());
  MonMap expect = *r;
  expect.decoded_version = 9;
  check(*again == expect);
  check(proto::encode_to_list(*again) == v9);
}

template <class M>
void fuzz_message(std::uint16_t version, const BufferList& front, const BufferList& data) {
  const boost::intrusive_ptr<M> owner(new M);
  M& m = *owner;
  m.header().version = version;
  m.front() = front;
  m.data() = data;
  try {
    m.decode_payload();
  } catch (const MonDecodeError& e) {
    check(std::string(e.what()).size() > 0);
    return;
  } catch (...) {
    check(false);  // anything else would escape the messenger's fault path as a bug
  }
  // What decoded encodes again without trouble.
  m.front().clear();
  m.data().clear();
  m.encode_payload(0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const std::uint8_t which = data[0] % 7;
  if (which == 0) {
    fuzz_monmap(BufferList::copy_of(data + 1, size - 1));
    return 0;
  }
  const std::uint16_t version = static_cast<std::uint16_t>(data[1] % 5);
  const std::uint8_t* p = data + 2;
  const std::size_t n = size - 2;
  const BufferList all = BufferList::copy_of(p, n);
  switch (which) {
    case 1: fuzz_message<MMonMap>(version, all, {}); break;
    case 2: fuzz_message<MPing>(version, all, {}); break;
    case 3: fuzz_message<MMonSubscribe>(version, all, {}); break;
    case 4: fuzz_message<MMonGetVersionReply>(version, all, {}); break;
    default: {
      const std::size_t front_len = n - n / 4;
      const BufferList front = BufferList::copy_of(p, front_len);
      const BufferList tail = BufferList::copy_of(p + front_len, n - front_len);
      if (which == 5) fuzz_message<MMonCommand>(version, front, tail);
      else fuzz_message<MMonCommandAck>(version, front, tail);
      break;
    }
  }
  return 0;
}
