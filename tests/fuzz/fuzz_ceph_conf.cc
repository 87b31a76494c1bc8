// libFuzzer target: the ceph.conf parser, $-expansion and every option's
// value parser, over arbitrary text. Oracle: Config::load_text never throws
// and never crashes; problems become diagnostics.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "compat/config.h"

using namespace siphon::compat;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  Diagnostics diags;
  ConfigRequest req;
  req.name.type = "osd";
  req.name.id = "3";
  req.pid = "1";
  req.hostname = "h";
  req.home = "/root";
  try {
    const Config c = Config::load_text(text, "fuzz.conf", req, diags);
    (void)c.ms_types();
    (void)c.lookup("mon_host");
    (void)c.expand("$cluster/$name/$mon_host");
  } catch (...) {
    __builtin_trap();  // load_text must report problems as diagnostics
  }
  return 0;
}
