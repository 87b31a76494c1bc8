// libFuzzer target: arbitrary bytes into every msgr/proto payload decoder
// (all control payloads, the auth-none payload, entity_addr_t,
// entity_addrvec_t, EntityName, ceph_msg_header2).
//
// Besides "no crash, no sanitizer report", it checks two properties:
//   * a decode either succeeds or reports errc::decode_error with a reason;
//   * whatever decodes re-encodes to bytes that decode to the same value.
// Every input is decoded twice: as one segment and split into small segments
// (sizes derived from the first byte), so the cursor's segment walking is
// fuzzed too.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "msgr/base/buffer.h"
#include "msgr/proto/control.h"
#include "msgr/proto/encoding.h"
#include "msgr/proto/message_header.h"
#include "msgr/proto/types.h"

namespace {

using namespace siphon;
using namespace siphon::proto;

void check(bool ok) {
  if (!ok) std::abort();
}

void check_error(const DecodeError& e) {
  check(e.code == errc::decode_error);
  check(!e.reason.empty());
  check(!e.message().empty());
}

// T with static decode(const BufferList&) and member encode().
template <class T>
void fuzz_payload(const BufferList& in) {
  auto r = T::decode(in);
  if (!r) {
    check_error(r.error());
    return;
  }
  const BufferList again = r->encode();
  auto r2 = T::decode(again);
  check(r2.has_value());
  check(*r2 == *r);
}

// T with free encode/decode overloads.
template <class T>
void fuzz_value(const BufferList& in, const char* name) {
  auto r = decode_from<T>(in, name);
  if (!r) {
    check_error(r.error());
    return;
  }
  const BufferList again = encode_to_list(*r);
  auto r2 = decode_from<T>(again, name);
  check(r2.has_value());
  check(*r2 == *r);
}

BufferList fragmented(const std::uint8_t* data, std::size_t size) {
  BufferList bl;
  std::size_t step = size > 0 ? data[0] % 7 + 1 : 1;
  std::size_t off = 0;
  while (off < size) {
    const std::size_t n = std::min(step, size - off);
    bl.append(BufferPtr(data + off, n));
    off += n;
    step = step % 7 + 1;
  }
  return bl;
}

void fuzz_all(const BufferList& in) {
  fuzz_payload<Hello>(in);
  fuzz_payload<AuthRequest>(in);
  fuzz_payload<AuthBadMethod>(in);
  fuzz_payload<AuthReplyMore>(in);
  fuzz_payload<AuthRequestMore>(in);
  fuzz_payload<AuthDone>(in);
  fuzz_payload<AuthSignature>(in);
  fuzz_payload<ClientIdent>(in);
  fuzz_payload<ServerIdent>(in);
  fuzz_payload<IdentMissingFeatures>(in);
  fuzz_payload<SessionReconnect>(in);
  fuzz_payload<SessionReset>(in);
  fuzz_payload<SessionRetry>(in);
  fuzz_payload<SessionRetryGlobal>(in);
  fuzz_payload<SessionReconnectOk>(in);
  fuzz_payload<Wait>(in);
  fuzz_payload<Keepalive2>(in);
  fuzz_payload<Keepalive2Ack>(in);
  fuzz_payload<Ack>(in);
  fuzz_payload<AuthNonePayload>(in);
  fuzz_payload<MessageHeader2>(in);
  fuzz_value<EntityAddr>(in, "entity_addr_t");
  fuzz_value<EntityAddrVec>(in, "entity_addrvec_t");
  fuzz_value<EntityName>(in, "EntityName");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz_all(BufferList::copy_of(data, size));
  fuzz_all(fragmented(data, size));
  return 0;
}
