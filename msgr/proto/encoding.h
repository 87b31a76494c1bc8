// Ceph's "encode/decode" wire conventions (reference: msgr2-wire.md §1).
//
//   Encoder   appends little-endian integers, strings, blobs, containers and
//             versioned-struct headers (ENCODE_START/FINISH) and hands the
//             result over as a BufferList. Large blobs are shared, not copied.
//   Decoder   reads the same encodings from a BufferList. It never trusts a
//             length: every count and length is checked against the bytes
//             that remain (inside the innermost versioned struct) before
//             anything is read or allocated. The first failure is recorded
//             (what, where, inside which structs) and makes the decoder
//             "sticky": every later read returns a zero value and does
//             nothing, so decode functions can read all fields and check
//             ok() once at the end. Nothing here throws or aborts on input.
//   Result<T> the value of a whole decode, or the DecodeError that stopped it.
//
// Free functions encode(Encoder&, const T&) / decode(Decoder&, T&) form an
// overload set that containers recurse into; project types add their own
// overloads next to their definitions (found by ADL).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <list>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "msgr/base/buffer.h"
#include "msgr/base/error.h"

namespace siphon::proto {

// ---------------------------------------------------------------------------
// Errors and results

/// Why a decode stopped. All text fields view static strings (no allocation
/// on the error path); message() renders them for logs.
struct DecodeError {
  static constexpr std::size_t kMaxContext = 4;

  std::error_code code = errc::decode_error;
  std::string_view reason;   ///< what was wrong, e.g. "length exceeds remaining bytes"
  std::string_view field;    ///< the field being read, e.g. "sockaddr length" (may be empty)
  std::size_t offset = 0;    ///< byte offset in the input of the offending field
  std::uint64_t value = 0;   ///< the offending number (a length, count, version), if any
  std::uint64_t limit = 0;   ///< what it was checked against, if any
  bool has_numbers = false;
  /// Enclosing structs, outermost first ("CLIENT_IDENT", "entity_addr_t").
  std::array<std::string_view, kMaxContext> context{};
  std::size_t depth = 0;

  /// "decode_error at byte 12 in CLIENT_IDENT > entity_addr_t: sockaddr
  /// length: length exceeds remaining bytes (value 200, limit 16)"
  std::string message() const;
};

/// A decoded value or the error that prevented it (no exceptions for bad
/// input). Accessing value() of an error is a programming error.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  Result(DecodeError error) : v_(std::in_place_index<1>, std::move(error)) {}  // NOLINT

  bool has_value() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return has_value(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const DecodeError& error() const& { return std::get<1>(v_); }
  /// The error code, or a default (success) code when a value is present.
  std::error_code code() const noexcept {
    return has_value() ? std::error_code{} : std::get<1>(v_).code;
  }

 private:
  std::variant<T, DecodeError> v_;
};

// ---------------------------------------------------------------------------
// Encoder

class Encoder {
 public:
  /// Blobs at least this long are shared with the caller's BufferList
  /// instead of being copied.
  static constexpr std::size_t kShareThreshold = 512;

  Encoder() { buf_.reserve(128); }
  // Open Struct guards point at their encoder: not copyable or movable.
  Encoder(const Encoder&) = delete;
  Encoder& operator=(const Encoder&) = delete;

  void u8(std::uint8_t v) { buf_.push_back(static_cast<std::byte>(v)); }
  void u16(std::uint16_t v) { put_le(v); }
  void u32(std::uint32_t v) { put_le(v); }
  void u64(std::uint64_t v) { put_le(v); }
  void s32(std::int32_t v) { put_le(static_cast<std::uint32_t>(v)); }
  void s64(std::int64_t v) { put_le(static_cast<std::uint64_t>(v)); }
  void boolean(bool v) { u8(v ? 1 : 0); }
  /// Big-endian (network order) u16, for the few fields Ceph keeps that way.
  void be16(std::uint16_t v) {
    u8(static_cast<std::uint8_t>(v >> 8));
    u8(static_cast<std::uint8_t>(v & 0xff));
  }

  /// Raw bytes, no length prefix.
  void raw(const void* data, std::size_t len);
  void raw(std::span<const std::byte> bytes) { raw(bytes.data(), bytes.size()); }
  void zeros(std::size_t len) { buf_.insert(buf_.end(), len, std::byte{0}); }
  /// Raw bytes of a list, no length prefix (shared when large).
  void raw(const BufferList& bl);

  /// u32 length + bytes.
  void string(std::string_view s);
  /// u32 length + bytes (Ceph bufferlist); shared when large.
  void blob(const BufferList& bl);

  /// Bytes written so far.
  std::size_t length() const noexcept { return buf_.size() + shared_bytes_; }

  /// RAII ENCODE_START(v, compat) ... ENCODE_FINISH: writes the 6-byte header
  /// now and back-patches struct_len when finished (or destroyed).
  class Struct {
   public:
    Struct(const Struct&) = delete;
    Struct& operator=(const Struct&) = delete;
    Struct(Struct&& o) noexcept
        : enc_(std::exchange(o.enc_, nullptr)), len_at_(o.len_at_), body_start_(o.body_start_),
          generation_(o.generation_) {}
    Struct& operator=(Struct&&) = delete;
    ~Struct() { finish(); }
    /// Patches struct_len; idempotent. Does nothing if the encoding was
    /// taken (take()/append_to()) while the struct was still open.
    void finish() noexcept;

   private:
    friend class Encoder;
    Struct(Encoder* enc, std::size_t len_at, std::size_t body_start, std::uint64_t gen) noexcept
        : enc_(enc), len_at_(len_at), body_start_(body_start), generation_(gen) {}
    Encoder* enc_;
    std::size_t len_at_;      // index of struct_len in buf_
    std::size_t body_start_;  // logical length right after struct_len
    std::uint64_t generation_;
  };
  [[nodiscard]] Struct start_struct(std::uint8_t struct_v, std::uint8_t struct_compat);

  /// ENCODE_START(v, compat); body(*this); ENCODE_FINISH.
  template <class F>
  void versioned(std::uint8_t struct_v, std::uint8_t struct_compat, F&& body) {
    Struct s = start_struct(struct_v, struct_compat);
    std::forward<F>(body)(*this);
  }

  /// Generic entry point: encode(*this, v).
  template <class T>
  Encoder& put(const T& v);

  /// Moves the encoding out (the encoder is empty afterwards).
  BufferList take();
  /// Appends the encoding to `out` (the encoder is empty afterwards).
  void append_to(BufferList& out);

 private:
  template <class U>
  void put_le(U v) {
    std::byte tmp[sizeof(U)];
    for (std::size_t i = 0; i < sizeof(U); ++i)
      tmp[i] = static_cast<std::byte>((v >> (8 * i)) & 0xff);
    buf_.insert(buf_.end(), tmp, tmp + sizeof(U));
  }
  void patch_u32(std::size_t at, std::uint32_t v) noexcept;

  // Everything except shared blobs, contiguous; shared blobs are inserted
  // before buf_[at] when the encoding is taken.
  struct Shared {
    std::size_t at;
    BufferList bl;
  };
  std::vector<std::byte> buf_;
  std::vector<Shared> shared_;
  std::size_t shared_bytes_ = 0;
  std::uint64_t generation_ = 0;  // bumped by take()/append_to()
};

// ---------------------------------------------------------------------------
// Decoder

struct DecodeLimits {
  /// Upper bound on any container count (in addition to the rule that a
  /// count may not exceed the bytes that remain).
  std::uint32_t max_elements = 1u << 20;
};

class Decoder {
 public:
  explicit Decoder(const BufferList& bl, DecodeLimits limits = {}) noexcept
      : cur_(bl), limit_(bl.length()), limits_(limits) {}
  /// The decoder reads the list in place: it must outlive the decoder.
  Decoder(BufferList&&, DecodeLimits = {}) = delete;
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;

  bool ok() const noexcept { return !failed_; }
  /// The first failure (meaningful only when !ok()).
  const DecodeError& error() const noexcept { return err_; }
  const DecodeLimits& limits() const noexcept { return limits_; }

  /// Offset of the next byte in the input.
  std::size_t position() const noexcept { return cur_.position(); }
  /// Bytes left before the end of the innermost struct (or the input).
  std::size_t remaining() const noexcept { return failed_ ? 0 : limit_ - cur_.position(); }

  // Primitive reads. `field` names the value in error messages. After a
  // failure they return 0 / empty and read nothing.
  std::uint8_t u8(std::string_view field = "u8");
  std::uint16_t u16(std::string_view field = "u16");
  std::uint32_t u32(std::string_view field = "u32");
  std::uint64_t u64(std::string_view field = "u64");
  std::int32_t s32(std::string_view field = "s32") { return static_cast<std::int32_t>(u32(field)); }
  std::int64_t s64(std::string_view field = "s64") { return static_cast<std::int64_t>(u64(field)); }
  /// Any non-zero byte is true (as in Ceph).
  bool boolean(std::string_view field = "bool") { return u8(field) != 0; }
  std::uint16_t be16(std::string_view field = "be16");
  /// Copies exactly `len` bytes; on failure `dst` is zero-filled.
  void raw(void* dst, std::size_t len, std::string_view field = "bytes");
  void skip(std::size_t len, std::string_view field = "bytes");
  /// u32 length + bytes.
  std::string string(std::string_view field = "string");
  /// u32 length + bytes, shared with the input (no copy).
  BufferList blob(std::string_view field = "blob");
  /// Exactly `len` bytes shared with the input, no length prefix.
  BufferList raw_list(std::size_t len, std::string_view field = "bytes");

  /// Reads a u32 element count and checks it against the remaining bytes
  /// (each element needs at least `min_element_size` bytes) and the limits.
  /// Returns 0 on failure.
  std::uint32_t count(std::size_t min_element_size, std::string_view field = "count");

  /// A decoded versioned-struct header (DECODE_START).
  struct StructHeader {
    std::uint8_t struct_v = 0;
    std::uint8_t struct_compat = 0;
    std::uint32_t struct_len = 0;
    bool has_len = false;          // false only for legacy encodings without a length
    std::size_t end = 0;           // absolute offset of the end of the body (if has_len)
    std::size_t outer_limit = 0;   // restored by end_struct
    std::size_t outer_depth = 0;
  };
  /// DECODE_START(max_v): reads struct_v, struct_compat, struct_len; fails if
  /// struct_compat > max_v or struct_len exceeds the remaining bytes. Until
  /// end_struct() no read can go past the end of the body.
  StructHeader begin_struct(std::uint8_t max_v, std::string_view name);
  /// DECODE_START_LEGACY_COMPAT_LEN(v, compatv, lenv) with Ceph's skip_v:
  /// 0 for the plain macro, 1 for the _16 variant (MonMap), 3 for _32. When
  /// struct_v < compatv there is no compat byte (skip_v bytes of an older,
  /// wider version field are skipped instead); when struct_v < lenv there is
  /// no struct_len and the body is not bounded.
  StructHeader begin_struct_legacy(std::uint8_t max_v, std::uint8_t compatv, std::uint8_t lenv,
                                   std::uint8_t skip_v, std::string_view name);
  /// DECODE_FINISH: skips unknown trailing bytes up to struct_len and
  /// restores the enclosing bound. Safe to call after a failure.
  void end_struct(const StructHeader& h);

  /// begin_struct; body(header); end_struct.
  template <class F>
  void versioned(std::uint8_t max_v, std::string_view name, F&& body) {
    const StructHeader h = begin_struct(max_v, name);
    if (ok()) std::forward<F>(body)(h);
    end_struct(h);
  }

  /// Labels errors raised while it lives with `name` (e.g. a payload type).
  class Scope {
   public:
    Scope(Decoder& d, std::string_view name) noexcept : d_(d), depth_(d.depth_) { d.push(name); }
    ~Scope() { d_.depth_ = depth_; }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    Decoder& d_;
    std::size_t depth_;
  };

  /// Records a failure (only the first one is kept) and makes the decoder
  /// sticky. `reason` and `field` must be static strings.
  void fail(std::string_view reason, std::string_view field = {});
  void fail(std::string_view reason, std::string_view field, std::uint64_t value,
            std::uint64_t limit);
  /// As fail(), reporting `offset` (typically where the offending field
  /// starts) instead of the current position.
  void fail_at(std::size_t offset, std::string_view reason, std::string_view field,
               std::uint64_t value, std::uint64_t limit);

  /// Generic entry point: decode(*this, v).
  template <class T>
  Decoder& get(T& v);

 private:
  bool need(std::size_t len, std::string_view field);
  /// A little-endian unsigned integer (0 after a failure).
  template <class U>
  U read_le(std::string_view field);
  void push(std::string_view name) noexcept {
    if (depth_ < DecodeError::kMaxContext) ctx_[depth_] = name;
    ++depth_;
  }

  BufferCursor cur_;
  std::size_t limit_;
  DecodeLimits limits_;
  bool failed_ = false;
  DecodeError err_{};
  std::array<std::string_view, DecodeError::kMaxContext> ctx_{};
  std::size_t depth_ = 0;
};

// ---------------------------------------------------------------------------
// Value types shared by many encodings

/// Ceph utime_t / ceph_timespec: u32 seconds + u32 nanoseconds.
struct UTime {
  std::uint32_t sec = 0;
  std::uint32_t nsec = 0;
  friend bool operator==(const UTime&, const UTime&) = default;
  /// From nanoseconds since the epoch (seconds truncated to 32 bits, as Ceph).
  static constexpr UTime from_nanoseconds(std::uint64_t ns) noexcept {
    return UTime{static_cast<std::uint32_t>(ns / 1'000'000'000u),
                 static_cast<std::uint32_t>(ns % 1'000'000'000u)};
  }
  constexpr std::uint64_t nanoseconds() const noexcept {
    return std::uint64_t{sec} * 1'000'000'000u + nsec;
  }
  /// "1796529372.000000000"
  std::string to_string() const;
};

/// Ceph uuid_d: 16 raw bytes in RFC 4122 (printed) order.
struct Uuid {
  std::array<std::uint8_t, 16> bytes{};
  friend bool operator==(const Uuid&, const Uuid&) = default;
  bool is_zero() const noexcept;
  /// "01234567-89ab-cdef-0123-456789abcdef" (lower case)
  std::string to_string() const;
  /// Accepts the 36-character form (either case); nullopt otherwise.
  static std::optional<Uuid> parse(std::string_view text);
};

// ---------------------------------------------------------------------------
// The encode/decode overload set

inline void encode(Encoder& e, std::uint8_t v) { e.u8(v); }
inline void encode(Encoder& e, std::uint16_t v) { e.u16(v); }
inline void encode(Encoder& e, std::uint32_t v) { e.u32(v); }
inline void encode(Encoder& e, std::uint64_t v) { e.u64(v); }
inline void encode(Encoder& e, std::int32_t v) { e.s32(v); }
inline void encode(Encoder& e, std::int64_t v) { e.s64(v); }
inline void encode(Encoder& e, bool v) { e.boolean(v); }
inline void encode(Encoder& e, const std::string& v) { e.string(v); }
inline void encode(Encoder& e, std::string_view v) { e.string(v); }
inline void encode(Encoder& e, const char* v) { e.string(v); }
inline void encode(Encoder& e, const BufferList& v) { e.blob(v); }
inline void encode(Encoder& e, const UTime& v) {
  e.u32(v.sec);
  e.u32(v.nsec);
}
inline void encode(Encoder& e, const Uuid& v) { e.raw(v.bytes.data(), v.bytes.size()); }

inline void decode(Decoder& d, std::uint8_t& v) { v = d.u8(); }
inline void decode(Decoder& d, std::uint16_t& v) { v = d.u16(); }
inline void decode(Decoder& d, std::uint32_t& v) { v = d.u32(); }
inline void decode(Decoder& d, std::uint64_t& v) { v = d.u64(); }
inline void decode(Decoder& d, std::int32_t& v) { v = d.s32(); }
inline void decode(Decoder& d, std::int64_t& v) { v = d.s64(); }
inline void decode(Decoder& d, bool& v) { v = d.boolean(); }
inline void decode(Decoder& d, std::string& v) { v = d.string(); }
inline void decode(Decoder& d, BufferList& v) { v = d.blob(); }
inline void decode(Decoder& d, UTime& v) {
  v.sec = d.u32("utime sec");
  v.nsec = d.u32("utime nsec");
}
inline void decode(Decoder& d, Uuid& v) { d.raw(v.bytes.data(), v.bytes.size(), "uuid"); }

/// Lower bound on the encoded size of a T, used to reject element counts
/// that the remaining bytes cannot hold. Specialise for project types whose
/// minimum is larger than one byte.
template <class T, class = void>
struct MinEncodedSize : std::integral_constant<std::size_t, 1> {};
template <class T>
struct MinEncodedSize<T, std::enable_if_t<std::is_arithmetic_v<T>>>
    : std::integral_constant<std::size_t, sizeof(T)> {};
template <>
struct MinEncodedSize<std::string> : std::integral_constant<std::size_t, 4> {};
template <>
struct MinEncodedSize<BufferList> : std::integral_constant<std::size_t, 4> {};
template <>
struct MinEncodedSize<UTime> : std::integral_constant<std::size_t, 8> {};
template <>
struct MinEncodedSize<Uuid> : std::integral_constant<std::size_t, 16> {};
template <class T, class A>
struct MinEncodedSize<std::vector<T, A>> : std::integral_constant<std::size_t, 4> {};
template <class T, class A>
struct MinEncodedSize<std::list<T, A>> : std::integral_constant<std::size_t, 4> {};
template <class T, class C, class A>
struct MinEncodedSize<std::set<T, C, A>> : std::integral_constant<std::size_t, 4> {};
template <class K, class V, class C, class A>
struct MinEncodedSize<std::map<K, V, C, A>> : std::integral_constant<std::size_t, 4> {};
template <class A, class B>
struct MinEncodedSize<std::pair<A, B>>
    : std::integral_constant<std::size_t, MinEncodedSize<A>::value + MinEncodedSize<B>::value> {};
template <class T, std::size_t N>
struct MinEncodedSize<std::array<T, N>>
    : std::integral_constant<std::size_t, N * MinEncodedSize<T>::value> {};

// Forward declarations, so each template sees the others whatever the
// nesting (pair of vectors, map of sets, ...).
template <class A, class B>
void encode(Encoder& e, const std::pair<A, B>& p);
template <class A, class B>
void decode(Decoder& d, std::pair<A, B>& p);
template <class T, std::size_t N>
void encode(Encoder& e, const std::array<T, N>& a);
template <class T, std::size_t N>
void decode(Decoder& d, std::array<T, N>& a);
template <class T, class A>
void encode(Encoder& e, const std::vector<T, A>& v);
template <class T, class A>
void decode(Decoder& d, std::vector<T, A>& v);
template <class T, class A>
void encode(Encoder& e, const std::list<T, A>& v);
template <class T, class A>
void decode(Decoder& d, std::list<T, A>& v);
template <class T, class C, class A>
void encode(Encoder& e, const std::set<T, C, A>& v);
template <class T, class C, class A>
void decode(Decoder& d, std::set<T, C, A>& v);
template <class K, class V, class C, class A>
void encode(Encoder& e, const std::map<K, V, C, A>& m);
template <class K, class V, class C, class A>
void decode(Decoder& d, std::map<K, V, C, A>& m);

// pair: A then B.
template <class A, class B>
void encode(Encoder& e, const std::pair<A, B>& p) {
  encode(e, p.first);
  encode(e, p.second);
}
template <class A, class B>
void decode(Decoder& d, std::pair<A, B>& p) {
  decode(d, p.first);
  decode(d, p.second);
}

// Fixed arrays: N elements, no count prefix.
template <class T, std::size_t N>
void encode(Encoder& e, const std::array<T, N>& a) {
  if constexpr (std::is_same_v<T, std::uint8_t> || std::is_same_v<T, std::byte>) {
    e.raw(a.data(), N);
  } else {
    for (const T& v : a) encode(e, v);
  }
}
template <class T, std::size_t N>
void decode(Decoder& d, std::array<T, N>& a) {
  if constexpr (std::is_same_v<T, std::uint8_t> || std::is_same_v<T, std::byte>) {
    d.raw(a.data(), N, "fixed array");
  } else {
    for (T& v : a) decode(d, v);
  }
}

namespace detail {
template <class C>
void encode_sequence(Encoder& e, const C& c) {
  e.u32(static_cast<std::uint32_t>(c.size()));
  for (const auto& v : c) encode(e, v);
}
}  // namespace detail

// Sequences and associative containers: u32 count + elements.
template <class T, class A>
void encode(Encoder& e, const std::vector<T, A>& v) { detail::encode_sequence(e, v); }
template <class T, class A>
void encode(Encoder& e, const std::list<T, A>& v) { detail::encode_sequence(e, v); }
template <class T, class C, class A>
void encode(Encoder& e, const std::set<T, C, A>& v) { detail::encode_sequence(e, v); }
template <class K, class V, class C, class A>
void encode(Encoder& e, const std::map<K, V, C, A>& m) {
  e.u32(static_cast<std::uint32_t>(m.size()));
  for (const auto& [k, v] : m) {
    encode(e, k);
    encode(e, v);
  }
}

template <class T, class A>
void decode(Decoder& d, std::vector<T, A>& v) {
  v.clear();
  const std::uint32_t n = d.count(MinEncodedSize<T>::value, "vector count");
  v.reserve(n);  // bounded: n * min size <= remaining bytes
  for (std::uint32_t i = 0; i < n && d.ok(); ++i) {
    T item{};
    decode(d, item);
    v.push_back(std::move(item));
  }
  if (!d.ok()) v.clear();
}
template <class T, class A>
void decode(Decoder& d, std::list<T, A>& l) {
  l.clear();
  const std::uint32_t n = d.count(MinEncodedSize<T>::value, "list count");
  for (std::uint32_t i = 0; i < n && d.ok(); ++i) {
    T item{};
    decode(d, item);
    l.push_back(std::move(item));
  }
  if (!d.ok()) l.clear();
}
template <class T, class C, class A>
void decode(Decoder& d, std::set<T, C, A>& s) {
  s.clear();
  const std::uint32_t n = d.count(MinEncodedSize<T>::value, "set count");
  for (std::uint32_t i = 0; i < n && d.ok(); ++i) {
    T item{};
    decode(d, item);
    s.insert(std::move(item));
  }
  if (!d.ok()) s.clear();
}
template <class K, class V, class C, class A>
void decode(Decoder& d, std::map<K, V, C, A>& m) {
  m.clear();
  const std::uint32_t n =
      d.count(MinEncodedSize<K>::value + MinEncodedSize<V>::value, "map count");
  for (std::uint32_t i = 0; i < n && d.ok(); ++i) {
    K k{};
    V v{};
    decode(d, k);
    decode(d, v);
    m.insert_or_assign(std::move(k), std::move(v));  // Ceph: a repeated key overwrites
  }
  if (!d.ok()) m.clear();
}

template <class T>
Encoder& Encoder::put(const T& v) {
  encode(*this, v);
  return *this;
}
template <class T>
Decoder& Decoder::get(T& v) {
  decode(*this, v);
  return *this;
}

// ---------------------------------------------------------------------------
// Field lists: one description of a payload serves encode and decode
//
// A payload's fields are listed once, in wire order, as a template over the
// direction:
//
//   template <class Io>
//   void fields(Io& io, FieldRef<Io, Hello> v) {
//     io.u8(v.entity_type, "entity_type");
//     io.value(v.peer_addr);
//   }
//
// With a FieldWriter the list encodes (`v` is const, names are unused); with
// a FieldReader it decodes into `v` (names label errors). Everything is
// inlined: the writer compiles to the same Encoder calls as hand-written code.

class FieldWriter {
 public:
  template <class T>
  using Ref = const T&;
  explicit FieldWriter(Encoder& e) noexcept : e_(e) {}

  void u8(std::uint8_t v, std::string_view) { e_.u8(v); }
  void u16(std::uint16_t v, std::string_view) { e_.u16(v); }
  void s16(std::int16_t v, std::string_view) { e_.u16(static_cast<std::uint16_t>(v)); }
  void u32(std::uint32_t v, std::string_view) { e_.u32(v); }
  void u64(std::uint64_t v, std::string_view) { e_.u64(v); }
  void s32(std::int32_t v, std::string_view) { e_.s32(v); }
  void s64(std::int64_t v, std::string_view) { e_.s64(v); }
  void boolean(bool v, std::string_view) { e_.boolean(v); }
  void string(const std::string& v, std::string_view) { e_.string(v); }
  void blob(const BufferList& v, std::string_view) { e_.blob(v); }
  /// Fixed-size bytes, no length prefix.
  template <std::size_t N>
  void raw(const std::array<std::uint8_t, N>& v, std::string_view) { e_.raw(v.data(), N); }
  /// Any type of the encode/decode overload set (its own field names).
  template <class T>
  void value(const T& v) { encode(e_, v); }

 private:
  Encoder& e_;
};

class FieldReader {
 public:
  template <class T>
  using Ref = T&;
  explicit FieldReader(Decoder& d) noexcept : d_(d) {}

  void u8(std::uint8_t& v, std::string_view field) { v = d_.u8(field); }
  void u16(std::uint16_t& v, std::string_view field) { v = d_.u16(field); }
  void s16(std::int16_t& v, std::string_view field) { v = static_cast<std::int16_t>(d_.u16(field)); }
  void u32(std::uint32_t& v, std::string_view field) { v = d_.u32(field); }
  void u64(std::uint64_t& v, std::string_view field) { v = d_.u64(field); }
  void s32(std::int32_t& v, std::string_view field) { v = d_.s32(field); }
  void s64(std::int64_t& v, std::string_view field) { v = d_.s64(field); }
  void boolean(bool& v, std::string_view field) { v = d_.boolean(field); }
  void string(std::string& v, std::string_view field) { v = d_.string(field); }
  void blob(BufferList& v, std::string_view field) { v = d_.blob(field); }
  template <std::size_t N>
  void raw(std::array<std::uint8_t, N>& v, std::string_view field) { d_.raw(v.data(), N, field); }
  template <class T>
  void value(T& v) { decode(d_, v); }

 private:
  Decoder& d_;
};

/// `const T&` for a FieldWriter, `T&` for a FieldReader.
template <class Io, class T>
using FieldRef = typename Io::template Ref<T>;

/// Decodes a whole BufferList with decode(Decoder&, T&); trailing bytes are
/// ignored (msgr2 payload rule). `name` labels errors.
template <class T>
Result<T> decode_from(const BufferList& bl, std::string_view name, DecodeLimits limits = {}) {
  Decoder d(bl, limits);
  Decoder::Scope scope(d, name);
  T value{};
  decode(d, value);
  if (!d.ok()) return d.error();
  return value;
}

/// Encodes one value into a fresh BufferList.
template <class T>
BufferList encode_to_list(const T& v) {
  Encoder e;
  encode(e, v);
  return e.take();
}

}  // namespace siphon::proto
