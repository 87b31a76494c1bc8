// Reads a file of tests/unit/osdmap/data (the reference material of a Ceph
// 16.2.15 lab cluster, copied from shared/reference/ceph-lab).
#pragma once

#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>

#include "msgr/base/buffer.h"

namespace siphon::osdmap::test {

inline std::string data_path(const std::string& name) {
  return std::string(SIPHON_OSDMAP_DATA) + "/" + name;
}

inline std::string read_text(const std::string& name) {
  std::ifstream in(data_path(name), std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + data_path(name));
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline BufferList read_data(const std::string& name) { return BufferList::copy_of(read_text(name)); }

}  // namespace siphon::osdmap::test
