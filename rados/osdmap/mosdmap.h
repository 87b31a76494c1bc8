// MOSDMap (type 41, v4/c3; rados-client.md §1.2): the maps a mon or an OSD
// sends. Values stay encoded until the client decides which ones it needs
// (the newest full map, or the incrementals after its epoch).
#pragma once

#include <cstdint>
#include <map>

#include "msgr/base/buffer.h"
#include "msgr/proto/encoding.h"

namespace siphon::osdmap {

inline constexpr std::uint16_t kMsgOsdMap = 41;  // CEPH_MSG_OSD_MAP

struct MOsdMap {
  proto::Uuid fsid;
  std::map<std::uint32_t, BufferList> incremental_maps;
  std::map<std::uint32_t, BufferList> maps;  // full maps
  std::uint32_t oldest_map = 0;
  std::uint32_t newest_map = 0;

  /// The newest epoch the message carries (0 when empty).
  std::uint32_t last() const noexcept;
};

/// Decodes a MOSDMap front (the message has no versioned-struct header: the
/// version is in the message header).
proto::Result<MOsdMap> decode_mosdmap(const BufferList& front);

}  // namespace siphon::osdmap
