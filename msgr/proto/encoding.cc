#include "msgr/proto/encoding.h"

#include <algorithm>

namespace siphon::proto {

// ---------------------------------------------------------------------------
// DecodeError

std::string DecodeError::message() const {
  std::string out = "decode error at byte " + std::to_string(offset);
  if (depth > 0) {
    out += " in ";
    const std::size_t shown = std::min(depth, kMaxContext);
    for (std::size_t i = 0; i < shown; ++i) {
      if (i > 0) out += " > ";
      out += context[i];
    }
    if (depth > shown) out += " > ...";
  }
  out += ": ";
  if (!field.empty()) {
    out += field;
    out += ": ";
  }
  out += reason;
  if (has_numbers) {
    out += " (value " + std::to_string(value) + ", limit " + std::to_string(limit) + ")";
  }
  return out;
}

// ---------------------------------------------------------------------------
// Encoder

void Encoder::raw(const void* data, std::size_t len) {
  if (len == 0) return;
  const auto* p = static_cast<const std::byte*>(data);
  buf_.insert(buf_.end(), p, p + len);
}

void Encoder::raw(const BufferList& bl) {
  const std::size_t len = bl.length();
  if (len == 0) return;
  if (len >= kShareThreshold) {
    shared_.push_back(Shared{buf_.size(), bl});
    shared_bytes_ += len;
    return;
  }
  const std::size_t at = buf_.size();
  buf_.resize(at + len);
  bl.copy_out(0, len, buf_.data() + at);
}

void Encoder::string(std::string_view s) {
  u32(static_cast<std::uint32_t>(s.size()));
  raw(s.data(), s.size());
}

void Encoder::blob(const BufferList& bl) {
  u32(static_cast<std::uint32_t>(bl.length()));
  raw(bl);
}

Encoder::Struct Encoder::start_struct(std::uint8_t struct_v, std::uint8_t struct_compat) {
  u8(struct_v);
  u8(struct_compat);
  const std::size_t len_at = buf_.size();
  u32(0);  // struct_len, patched by Struct::finish()
  return Struct(this, len_at, length(), generation_);
}

void Encoder::Struct::finish() noexcept {
  if (enc_ == nullptr) return;
  if (enc_->generation_ != generation_) {
    enc_ = nullptr;  // the bytes it would patch were already handed out
    return;
  }
  enc_->patch_u32(len_at_, static_cast<std::uint32_t>(enc_->length() - body_start_));
  enc_ = nullptr;
}

void Encoder::patch_u32(std::size_t at, std::uint32_t v) noexcept {
  for (std::size_t i = 0; i < 4; ++i) buf_[at + i] = static_cast<std::byte>((v >> (8 * i)) & 0xff);
}

void Encoder::append_to(BufferList& out) {
  std::size_t prev = 0;
  for (Shared& s : shared_) {
    out.append(buf_.data() + prev, s.at - prev);
    out.append(std::move(s.bl));
    prev = s.at;
  }
  out.append(buf_.data() + prev, buf_.size() - prev);
  buf_.clear();
  shared_.clear();
  shared_bytes_ = 0;
  ++generation_;
}

BufferList Encoder::take() {
  BufferList out;
  if (shared_.empty() && !buf_.empty()) {
    // One exact-size segment: control payloads are a few bytes, and a queued
    // frame must not pin a whole BufferList chunk (4 KiB) for them.
    out.append(BufferPtr(buf_.data(), buf_.size()));
    buf_.clear();
    shared_bytes_ = 0;
    ++generation_;
    return out;
  }
  append_to(out);
  return out;
}

// ---------------------------------------------------------------------------
// Decoder

void Decoder::fail(std::string_view reason, std::string_view field) {
  if (failed_) return;
  failed_ = true;
  err_ = DecodeError{};
  err_.code = errc::decode_error;
  err_.reason = reason;
  err_.field = field;
  err_.offset = cur_.position();
  err_.depth = depth_;
  for (std::size_t i = 0; i < std::min(depth_, DecodeError::kMaxContext); ++i) err_.context[i] = ctx_[i];
}

void Decoder::fail(std::string_view reason, std::string_view field, std::uint64_t value,
                   std::uint64_t limit) {
  fail_at(cur_.position(), reason, field, value, limit);
}

void Decoder::fail_at(std::size_t offset, std::string_view reason, std::string_view field,
                      std::uint64_t value, std::uint64_t limit) {
  if (failed_) return;
  fail(reason, field);
  err_.offset = offset;
  err_.value = value;
  err_.limit = limit;
  err_.has_numbers = true;
}

bool Decoder::need(std::size_t len, std::string_view field) {
  if (failed_) return false;
  if (len > remaining()) {
    fail("input ends inside this field", field, len, remaining());
    return false;
  }
  return true;
}

std::uint8_t Decoder::u8(std::string_view field) {
  std::uint8_t b = 0;
  if (!need(1, field)) return 0;
  cur_.read(&b, 1);
  return b;
}

template <class U>
U Decoder::read_le(std::string_view field) {
  std::uint8_t b[sizeof(U)] = {};
  if (!need(sizeof(U), field)) return 0;
  cur_.read(b, sizeof(U));
  U v = 0;
  for (std::size_t i = sizeof(U); i-- > 0;) v = static_cast<U>((v << 8) | b[i]);
  return v;
}

std::uint16_t Decoder::u16(std::string_view field) { return read_le<std::uint16_t>(field); }
std::uint32_t Decoder::u32(std::string_view field) { return read_le<std::uint32_t>(field); }
std::uint64_t Decoder::u64(std::string_view field) { return read_le<std::uint64_t>(field); }

std::uint16_t Decoder::be16(std::string_view field) {
  std::uint8_t b[2] = {};
  if (!need(2, field)) return 0;
  cur_.read(b, 2);
  return static_cast<std::uint16_t>((b[0] << 8) | b[1]);
}

void Decoder::raw(void* dst, std::size_t len, std::string_view field) {
  if (!need(len, field)) {
    if (len > 0) std::memset(dst, 0, len);
    return;
  }
  cur_.read(dst, len);
}

void Decoder::skip(std::size_t len, std::string_view field) {
  if (!need(len, field)) return;
  cur_.skip(len);
}

std::string Decoder::string(std::string_view field) {
  const std::size_t at = cur_.position();
  const std::uint32_t len = u32(field);
  if (failed_) return {};
  if (len > remaining()) {
    fail_at(at, "length exceeds remaining bytes", field, len, remaining());
    return {};
  }
  std::string s(len, '\0');
  cur_.read(s.data(), len);
  return s;
}

BufferList Decoder::blob(std::string_view field) {
  const std::size_t at = cur_.position();
  const std::uint32_t len = u32(field);
  if (failed_) return {};
  if (len > remaining()) {
    fail_at(at, "length exceeds remaining bytes", field, len, remaining());
    return {};
  }
  BufferList out;
  cur_.read_list(len, out);
  return out;
}

BufferList Decoder::raw_list(std::size_t len, std::string_view field) {
  BufferList out;
  if (!need(len, field)) return out;
  cur_.read_list(len, out);
  return out;
}

std::uint32_t Decoder::count(std::size_t min_element_size, std::string_view field) {
  const std::size_t at = cur_.position();
  const std::uint32_t n = u32(field);
  if (failed_) return 0;
  if (n > limits_.max_elements) {
    fail_at(at, "count exceeds the decoder's element limit", field, n, limits_.max_elements);
    return 0;
  }
  const std::size_t fit = remaining() / std::max<std::size_t>(min_element_size, 1);
  if (n > fit) {
    fail_at(at, "count exceeds what the remaining bytes can hold", field, n, fit);
    return 0;
  }
  return n;
}

Decoder::StructHeader Decoder::begin_struct(std::uint8_t max_v, std::string_view name) {
  StructHeader h;
  h.outer_limit = limit_;
  h.outer_depth = depth_;
  push(name);
  const std::size_t at = cur_.position();
  h.struct_v = u8("struct_v");
  h.struct_compat = u8("struct_compat");
  h.struct_len = u32("struct_len");
  if (failed_) return h;
  if (h.struct_compat > max_v) {
    fail_at(at + 1, "struct_compat is newer than this decoder supports", "struct_compat",
            h.struct_compat, max_v);
    return h;
  }
  if (h.struct_len > remaining()) {
    fail_at(at + 2, "struct_len exceeds remaining bytes", "struct_len", h.struct_len,
            remaining());
    return h;
  }
  h.has_len = true;
  h.end = cur_.position() + h.struct_len;
  limit_ = h.end;
  return h;
}

Decoder::StructHeader Decoder::begin_struct_legacy(std::uint8_t max_v, std::uint8_t compatv,
                                                   std::uint8_t lenv, std::uint8_t skip_v,
                                                   std::string_view name) {
  StructHeader h;
  h.outer_limit = limit_;
  h.outer_depth = depth_;
  push(name);
  h.struct_v = u8("struct_v");
  if (failed_) return h;
  if (h.struct_v >= compatv) {
    const std::size_t at = cur_.position();
    h.struct_compat = u8("struct_compat");
    if (failed_) return h;
    if (h.struct_compat > max_v) {
      fail_at(at, "struct_compat is newer than this decoder supports", "struct_compat",
              h.struct_compat, max_v);
      return h;
    }
  } else if (skip_v > 0) {
    skip(skip_v, "legacy version bytes");
    if (failed_) return h;
  }
  if (h.struct_v >= lenv) {
    const std::size_t at = cur_.position();
    h.struct_len = u32("struct_len");
    if (failed_) return h;
    if (h.struct_len > remaining()) {
      fail_at(at, "struct_len exceeds remaining bytes", "struct_len", h.struct_len, remaining());
      return h;
    }
    h.has_len = true;
    h.end = cur_.position() + h.struct_len;
    limit_ = h.end;
  }
  return h;
}

void Decoder::end_struct(const StructHeader& h) {
  if (!failed_ && h.has_len && cur_.position() < h.end) cur_.skip(h.end - cur_.position());
  limit_ = h.outer_limit;
  depth_ = h.outer_depth;
}

// ---------------------------------------------------------------------------
// UTime, Uuid

std::string UTime::to_string() const {
  std::string ns = std::to_string(nsec);
  if (ns.size() < 9) ns.insert(0, 9 - ns.size(), '0');
  return std::to_string(sec) + "." + ns;
}

bool Uuid::is_zero() const noexcept {
  return std::all_of(bytes.begin(), bytes.end(), [](std::uint8_t b) { return b == 0; });
}

std::string Uuid::to_string() const {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(36);
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    out += kHex[bytes[i] >> 4];
    out += kHex[bytes[i] & 0x0f];
  }
  return out;
}

std::optional<Uuid> Uuid::parse(std::string_view text) {
  if (text.size() != 36) return std::nullopt;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  Uuid u;
  std::size_t out = 0;
  for (std::size_t i = 0; i < text.size();) {
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (text[i] != '-') return std::nullopt;
      ++i;
      continue;
    }
    const int hi = nibble(text[i]);
    const int lo = nibble(text[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    u.bytes[out++] = static_cast<std::uint8_t>((hi << 4) | lo);
    i += 2;
  }
  return u;
}

}  // namespace siphon::proto
