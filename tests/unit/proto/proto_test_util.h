// Helpers shared by the msgr/proto payload tests: hex <-> BufferList and
// truncation sweeps.
#pragma once

#include <gtest/gtest.h>

#include <cctype>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "msgr/base/buffer.h"

namespace siphon::proto::test {

// msgr2-wire.md §4.6: the entity_addr_t of v2:127.0.0.1:3300/0 (the mon's
// address in the captured handshakes), 35 bytes.
inline constexpr const char* kMonAddrHex =
    "01 01 01 1c 00 00 00 02 00 00 00 00 00 00 00 10 00 00 00 02 00 0c e4 7f 00 00 01"
    " 00 00 00 00 00 00 00 00";

// "01 02 ff" (whitespace ignored) -> bytes.
inline std::vector<std::uint8_t> bytes_from_hex(std::string_view hex) {
  std::vector<std::uint8_t> out;
  int hi = -1;
  for (char c : hex) {
    if (std::isspace(static_cast<unsigned char>(c)) != 0) continue;
    int v = 0;
    if (c >= '0' && c <= '9') v = c - '0';
    else if (c >= 'a' && c <= 'f') v = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') v = c - 'A' + 10;
    else ADD_FAILURE() << "bad hex character '" << c << "'";
    if (hi < 0) {
      hi = v;
    } else {
      out.push_back(static_cast<std::uint8_t>((hi << 4) | v));
      hi = -1;
    }
  }
  EXPECT_LT(hi, 0) << "odd number of hex digits";
  return out;
}

inline BufferList from_hex(std::string_view hex) {
  const auto b = bytes_from_hex(hex);
  return BufferList::copy_of(b.data(), b.size());
}

inline BufferList from_bytes(const std::vector<std::uint8_t>& b) {
  return BufferList::copy_of(b.data(), b.size());
}

// Lower-case hex, bytes separated by spaces.
inline std::string to_hex(const BufferList& bl) {
  static constexpr char kHex[] = "0123456789abcdef";
  const std::string s = bl.to_string();
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i > 0) out += ' ';
    const auto b = static_cast<unsigned char>(s[i]);
    out += kHex[b >> 4];
    out += kHex[b & 0x0f];
  }
  return out;
}

// Normalises a hex string written with arbitrary spacing.
inline std::string norm_hex(std::string_view hex) { return to_hex(from_hex(hex)); }

// The same bytes split into one-byte segments (exercises the cursor across
// segment boundaries).
inline BufferList fragmented(const BufferList& bl) {
  const std::string s = bl.to_string();
  BufferList out;
  for (char c : s) out.append(BufferPtr(&c, 1));
  return out;
}

inline BufferList prefix(const BufferList& bl, std::size_t n) { return bl.slice(0, n); }

}  // namespace siphon::proto::test
