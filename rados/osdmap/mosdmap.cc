#include "mosdmap.h"

#include <algorithm>

namespace siphon::osdmap {

std::uint32_t MOsdMap::last() const noexcept {
  std::uint32_t e = 0;
  if (!incremental_maps.empty()) e = incremental_maps.rbegin()->first;
  if (!maps.empty()) e = std::max(e, maps.rbegin()->first);
  return e;
}

proto::Result<MOsdMap> decode_mosdmap(const BufferList& front) {
  proto::Decoder d(front);
  proto::Decoder::Scope scope(d, "MOSDMap");
  MOsdMap m;
  d.get(m.fsid);
  d.get(m.incremental_maps);
  d.get(m.maps);
  // v2+: oldest/newest; v4 adds gap_removed_snaps (always empty since octopus).
  if (d.ok() && d.remaining() >= 8) {
    m.oldest_map = d.u32("oldest_map");
    m.newest_map = d.u32("newest_map");
  }
  if (!d.ok()) return d.error();
  return m;
}

}  // namespace siphon::osdmap
